package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/store"
)

// Service IPs and node ports. Like kube-apiserver, minictl gives a
// Service a cluster IP from --service-cluster-ip-range unless it is
// headless or an ExternalName, and node ports from
// --service-node-port-range to a NodePort Service and a LoadBalancer that
// allocates them (and a health check port to a LoadBalancer with the
// Local traffic policy). A client may ask for a particular address or
// port: it gets it if it is in the range and free, and a 422 naming the
// field otherwise.
//
// Every allocated cluster IP is an IPAddress object named by the address
// (networking.k8s.io/v1, as kube-apiserver's MultiCIDRServiceAllocator
// keeps them), and every allocated node port is a key of its own under
// /registry/ranges/servicenodeports/. etcd lets one writer create a key,
// so creating it is the allocation, and the API servers of one cluster
// never hand out the same one. A new Service's keys are created in the
// same etcd transaction as the Service itself: they appear together or
// not at all, and allocation costs a create no extra round trip. The
// candidates come from what this server already knows is taken (the
// IPAddresses' watch cache; the node ports it has seen), picked at random
// so that concurrent creators rarely pick the same; the rare collision is
// retried with another.
//
// What no transaction covers is repaired: an update that gains an IP or
// port creates its key before the Service is written, a delete removes
// the Service and then its keys, and a crash between the two leaves a key
// without a Service (never a Service without its key, unless the keys are
// deleted by hand). repairServiceAllocations, at start and every
// serviceRepairInterval as kube's repair loops, creates the keys of
// Services that lack them and deletes the keys whose Service is gone or
// no longer holds them.

const (
	// nodePortsPrefix is where the allocated node ports live, one key per
	// port, beside kube-apiserver's single bitmap key for them
	// (/registry/ranges/servicenodeports).
	nodePortsPrefix = "/registry/ranges/servicenodeports/"
	// serviceRepairInterval is how often the allocations are repaired,
	// as kube-apiserver's repair controllers do.
	serviceRepairInterval = 3 * time.Minute
	// orphanGrace is how old a key without a Service must be before
	// repair deletes it: a Service being updated holds its new key a
	// moment before the Service says so, and another server's watch
	// cache may be a moment behind.
	orphanGrace = time.Minute
	// allocationAttempts bounds the picks of one create that another
	// server took first.
	allocationAttempts = 16
)

// DefaultServiceNodePortRange is kube-apiserver's
// --service-node-port-range default.
var DefaultServiceNodePortRange = PortRange{Base: 30000, Size: 2768}

// PortRange is a range of ports, written as kube-apiserver's flags write
// it: "30000-32767" (both ends included) or a single port.
type PortRange struct{ Base, Size int }

func (r PortRange) String() string {
	if r.Size == 0 {
		return ""
	}
	return fmt.Sprintf("%d-%d", r.Base, r.Base+r.Size-1)
}

// Contains reports whether port is in r.
func (r PortRange) Contains(port int) bool { return port >= r.Base && port < r.Base+r.Size }

// MarshalText and UnmarshalText make a PortRange a flag value.
func (r PortRange) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

func (r *PortRange) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	lo, hi, found := strings.Cut(s, "-")
	if !found {
		hi = lo
	}
	base, err1 := strconv.Atoi(strings.TrimSpace(lo))
	last, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if err1 != nil || err2 != nil || base < 1 || last > 65535 || last < base {
		return fmt.Errorf("%q is not a port range such as 30000-32767", s)
	}
	*r = PortRange{Base: base, Size: last - base + 1}
	return nil
}

// serviceAllocator remembers the node ports this server knows are taken.
// Cluster IPs need no such memory: the IPAddresses' watch cache is it.
type serviceAllocator struct {
	ips   netip.Prefix
	ports PortRange
	grace time.Duration // orphanGrace, shorter in tests

	mu    sync.Mutex
	taken map[int32]bool
}

func newServiceAllocator(ips netip.Prefix, ports PortRange) *serviceAllocator {
	return &serviceAllocator{ips: ips.Masked(), ports: ports, grace: orphanGrace, taken: map[int32]bool{}}
}

// nodePortOwner is the value of a node port's key.
type nodePortOwner struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Allocated time.Time `json:"allocated"`
}

func nodePortKey(port int32) string { return nodePortsPrefix + strconv.Itoa(int(port)) }

// holds is what a Service holds: its cluster IPs in the range and its
// node ports, health check port included.
type holds struct {
	ips   []netip.Addr
	ports []int32
}

// servicePaths name, for a 422, where each IP and port of a Service was
// asked for.
type servicePaths map[any]*field.Path

func (a *serviceAllocator) held(svc *corev1.Service) (holds, servicePaths) {
	var h holds
	paths := servicePaths{}
	if svc.Spec.Type != corev1.ServiceTypeExternalName {
		for i, s := range svc.Spec.ClusterIPs {
			if ip, err := netip.ParseAddr(s); err == nil {
				h.ips = append(h.ips, ip)
				paths[ip] = field.NewPath("spec", "clusterIPs").Index(i)
			}
		}
	}
	for i, p := range svc.Spec.Ports {
		if p.NodePort != 0 && !slices.Contains(h.ports, p.NodePort) {
			h.ports = append(h.ports, p.NodePort)
			paths[p.NodePort] = field.NewPath("spec", "ports").Index(i).Child("nodePort")
		}
	}
	if p := svc.Spec.HealthCheckNodePort; p != 0 && !slices.Contains(h.ports, p) {
		h.ports = append(h.ports, p)
		paths[p] = field.NewPath("spec", "healthCheckNodePort")
	}
	return h, paths
}

// allocating reports whether the server allocates Service IPs: whether it
// serves IPAddresses (a server built with a catalogue of its own may not).
func (s *Server) allocating() bool {
	_, ok := s.serving().caches[api.IPAddresses]
	return ok && s.alloc != nil
}

// assign fills in what svc lacks: a cluster IP unless it is headless or
// an ExternalName, node ports where its type needs them and a health
// check port where it needs one. The picks are candidates, free as far
// as this server knows; only the write of their keys makes them svc's.
func (s *Server) assign(svc *corev1.Service) error {
	a := s.alloc
	if svc.Spec.Type != corev1.ServiceTypeExternalName && len(svc.Spec.ClusterIPs) == 0 {
		ip, ok := a.pickIP(s.ipTaken)
		if !ok {
			return apierrors.NewInternalError(errors.New("failed to allocate a serviceIP: range is full"))
		}
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = ip.String(), []string{ip.String()}
	}
	h, _ := a.held(svc)
	pick := func() (int32, error) {
		p, ok := a.pickPort(func(p int32) bool { return slices.Contains(h.ports, p) })
		if !ok {
			return 0, apierrors.NewInternalError(errors.New("failed to allocate a nodePort: range is full"))
		}
		h.ports = append(h.ports, p)
		return p, nil
	}
	if api.ServiceNeedsNodePorts(svc) {
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if p.NodePort != 0 {
				continue
			}
			// A port number served over two protocols shares one node
			// port, as kube-apiserver gives it.
			for _, q := range svc.Spec.Ports {
				if q.Port == p.Port && q.NodePort != 0 {
					p.NodePort = q.NodePort
				}
			}
			if p.NodePort == 0 {
				port, err := pick()
				if err != nil {
					return err
				}
				p.NodePort = port
			}
		}
	}
	if api.ServiceNeedsHealthCheckNodePort(svc) && svc.Spec.HealthCheckNodePort == 0 {
		port, err := pick()
		if err != nil {
			return err
		}
		svc.Spec.HealthCheckNodePort = port
	}
	return nil
}

// ipTaken reports whether this server's watch cache has an IPAddress for
// ip.
func (s *Server) ipTaken(ip netip.Addr) bool {
	v := s.serving()
	o, _ := v.caches[api.IPAddresses].get(v.stores[api.IPAddresses].key("", ip.String()))
	return o != nil
}

// band splits a range of size addresses or ports as kube-apiserver does:
// the lower part, min(max(16, size/16), 256) long, is left to those who
// ask for a particular one (the kubernetes Service's 10.96.0.1, a DNS
// Service's 10.96.0.10), and what the server picks comes from the upper
// part first.
func band(size uint64) uint64 {
	return min(max(16, size/16), 256)
}

// pickIP picks a free address of the range, the network and broadcast
// addresses excepted.
func (a *serviceAllocator) pickIP(taken func(netip.Addr) bool) (netip.Addr, bool) {
	bits := a.ips.Addr().BitLen() - a.ips.Bits()
	size := uint64(1) << min(bits, 32)
	first := a.ips.Addr().As4()
	base := uint64(first[0])<<24 | uint64(first[1])<<16 | uint64(first[2])<<8 | uint64(first[3])
	at := func(off uint64) netip.Addr {
		n := base + off
		return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	}
	off, ok := pickFree(1, size-1, band(size), func(off uint64) bool { return taken(at(off)) })
	return at(off), ok
}

// pickPort picks a port of the range that this server has not seen taken
// and that ours, the ports already picked for the same Service, lacks.
func (a *serviceAllocator) pickPort(ours func(int32) bool) (int32, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	port := func(off uint64) int32 { return int32(a.ports.Base + int(off)) }
	off, ok := pickFree(0, uint64(a.ports.Size), band(uint64(a.ports.Size)), func(off uint64) bool {
		p := port(off)
		return a.taken[p] || ours(p)
	})
	return port(off), ok
}

// pickFree picks an offset in [lo, hi) that is not taken: at random from
// above lo+reserved, then, when that part is full, from below.
func pickFree(lo, hi, reserved uint64, taken func(uint64) bool) (uint64, bool) {
	mid := min(lo+reserved, hi)
	for _, part := range [][2]uint64{{mid, hi}, {lo, mid}} {
		from, to := part[0], part[1]
		if from >= to {
			continue
		}
		n := to - from
		for range 32 {
			if off := from + rand.Uint64N(n); !taken(off) {
				return off, true
			}
		}
		start := rand.Uint64N(n)
		for i := range n {
			if off := from + (start+i)%n; !taken(off) {
				return off, true
			}
		}
	}
	return 0, false
}

// checkAsked refuses, in kube-apiserver's words, what svc asks for that is
// outside the ranges. Taken ones are found by the write.
func (a *serviceAllocator) checkAsked(want holds, paths servicePaths) field.ErrorList {
	var errs field.ErrorList
	for _, ip := range want.ips {
		if !a.ips.Contains(ip) {
			errs = append(errs, field.Invalid(paths[ip], ip.String(), "provided IP is not in the valid range. The range of valid IPs is "+a.ips.String()))
		}
	}
	for _, p := range want.ports {
		if !a.ports.Contains(int(p)) {
			errs = append(errs, field.Invalid(paths[p], p, "provided port is not in the valid range. The range of valid ports is "+a.ports.String()))
		}
	}
	return errs
}

// allocationKeys are the keys, and their values, that reserve want for
// svc: one IPAddress per IP, one key per node port.
func (s *Server) allocationKeys(ctx context.Context, svc *corev1.Service, want holds) ([]store.KeyValue, error) {
	v := s.serving()
	rs := v.stores[api.IPAddresses]
	kvs := make([]store.KeyValue, 0, len(want.ips)+len(want.ports))
	now := time.Now()
	for _, ip := range want.ips {
		obj := newIPAddress(ip, svc, now)
		data, err := rs.encode(ctx, obj)
		if err != nil {
			return nil, err
		}
		kvs = append(kvs, store.KeyValue{Key: rs.key("", ip.String()), Value: data})
	}
	for _, p := range want.ports {
		data, err := json.Marshal(nodePortOwner{Namespace: svc.Namespace, Name: svc.Name, Allocated: now.UTC()})
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		kvs = append(kvs, store.KeyValue{Key: nodePortKey(p), Value: data})
	}
	return kvs, nil
}

// newIPAddress is the IPAddress that gives ip to svc, as kube-apiserver's
// allocator writes it.
func newIPAddress(ip netip.Addr, svc *corev1.Service, now time.Time) *networkingv1.IPAddress {
	family := corev1.IPv4Protocol
	if ip.Is6() {
		family = corev1.IPv6Protocol
	}
	obj := &networkingv1.IPAddress{}
	obj.Name = ip.String()
	obj.Labels = map[string]string{
		api.LabelIPAddressFamily:    string(family),
		api.LabelIPAddressManagedBy: api.IPAllocatorManager,
	}
	obj.Spec.ParentRef = &networkingv1.ParentReference{Resource: "services", Namespace: svc.Namespace, Name: svc.Name}
	api.PrepareObjectMetaForCreate(obj, now)
	setTypeMeta(api.IPAddresses, obj)
	return obj
}

// takenErrors are the 422 of what another Service holds: the asked ones
// among the keys found present.
func (s *Server) takenErrors(present []string, paths servicePaths) field.ErrorList {
	var errs field.ErrorList
	for _, k := range present {
		if p, ok := strings.CutPrefix(k, nodePortsPrefix); ok {
			n, _ := strconv.Atoi(p)
			errs = append(errs, field.Invalid(paths[int32(n)], n, "provided port is already allocated"))
			continue
		}
		ip, err := netip.ParseAddr(k[strings.LastIndexByte(k, '/')+1:])
		if err == nil {
			errs = append(errs, field.Invalid(paths[ip], ip.String(), "provided IP is already allocated"))
		}
	}
	return errs
}

// noteTaken remembers the node ports among present keys, found taken by
// a write, so that the next picks avoid them.
func (a *serviceAllocator) noteTaken(present []string, taken bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range present {
		if p, ok := strings.CutPrefix(k, nodePortsPrefix); ok {
			if n, err := strconv.Atoi(p); err == nil {
				if taken {
					a.taken[int32(n)] = true
				} else {
					delete(a.taken, int32(n))
				}
			}
		}
	}
}

func keysOf(kvs []store.KeyValue) []string {
	keys := make([]string, len(kvs))
	for i, kv := range kvs {
		keys[i] = kv.Key
	}
	return keys
}

// createService writes a new Service with the cluster IP and node ports
// it asked for or is given, their keys in the same transaction. What it
// asked for and another Service holds is a 422; a pick another server
// took first since is picked again.
func (s *Server) createService(ctx context.Context, rs *resourceStore, svc *corev1.Service, dry bool) ([]byte, error) {
	a := s.alloc
	asked := svc.DeepCopy()
	for attempt := 0; ; attempt++ {
		if err := s.assign(svc); err != nil {
			return nil, err
		}
		want, paths := a.held(svc)
		askedHolds, _ := a.held(asked)
		if errs := a.checkAsked(askedHolds, paths); len(errs) > 0 {
			return nil, apierrors.NewInvalid(schemaGroupKind(api.Services), svc.Name, errs)
		}
		if dry {
			if errs := s.takenErrors(s.knownTaken(askedHolds), paths); len(errs) > 0 {
				return nil, apierrors.NewInvalid(schemaGroupKind(api.Services), svc.Name, errs)
			}
			return nil, nil
		}
		kvs, err := s.allocationKeys(ctx, svc, want)
		if err != nil {
			return nil, err
		}
		o, rev, present, err := rs.createAlong(ctx, svc, kvs)
		if err == nil {
			a.noteTaken(keysOf(kvs), true)
			return rs.createdJSON(ctx, o, rev)
		}
		if len(present) == 0 {
			return nil, err
		}
		a.noteTaken(present, true)
		var askedTaken []string
		for _, k := range present {
			if isAskedKey(k, askedHolds) {
				askedTaken = append(askedTaken, k)
			}
		}
		if len(askedTaken) > 0 {
			return nil, apierrors.NewInvalid(schemaGroupKind(api.Services), svc.Name, s.takenErrors(askedTaken, paths))
		}
		if attempt == allocationAttempts {
			return nil, apierrors.NewInternalError(fmt.Errorf("failed to allocate a serviceIP or nodePort: %d picks were taken by others", attempt+1))
		}
		// Pick again what was taken; keep what was asked.
		svc.Spec = *asked.Spec.DeepCopy()
	}
}

// isAskedKey reports whether key reserves one of asked's IPs or ports.
func isAskedKey(key string, asked holds) bool {
	if p, ok := strings.CutPrefix(key, nodePortsPrefix); ok {
		n, _ := strconv.Atoi(p)
		return slices.Contains(asked.ports, int32(n))
	}
	ip, err := netip.ParseAddr(key[strings.LastIndexByte(key, '/')+1:])
	return err == nil && slices.Contains(asked.ips, ip)
}

// knownTaken is the keys of h that this server knows are taken, which is
// what a dry run can tell without writing.
func (s *Server) knownTaken(h holds) []string {
	var out []string
	v := s.serving()
	for _, ip := range h.ips {
		if s.ipTaken(ip) {
			out = append(out, v.stores[api.IPAddresses].key("", ip.String()))
		}
	}
	s.alloc.mu.Lock()
	defer s.alloc.mu.Unlock()
	for _, p := range h.ports {
		if s.alloc.taken[p] {
			out = append(out, nodePortKey(p))
		}
	}
	return out
}

// reserveForUpdate gives svc, the next state of old, what it needs that
// old did not hold, creating their keys before the update is written. It
// returns what gives them back if the update is not written.
func (s *Server) reserveForUpdate(ctx context.Context, svc, old *corev1.Service, dry bool) (func(), error) {
	a := s.alloc
	asked := svc.DeepCopy()
	if err := s.assign(svc); err != nil {
		return nil, err
	}
	want, paths := a.held(svc)
	had, _ := a.held(old)
	askedHolds, _ := a.held(asked)
	gain := holds{ips: without(want.ips, had.ips), ports: without(want.ports, had.ports)}
	if errs := a.checkAsked(holds{ips: without(askedHolds.ips, had.ips), ports: without(askedHolds.ports, had.ports)}, paths); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schemaGroupKind(api.Services), svc.Name, errs)
	}
	if dry {
		if errs := s.takenErrors(s.knownTaken(gain), paths); len(errs) > 0 {
			return nil, apierrors.NewInvalid(schemaGroupKind(api.Services), svc.Name, errs)
		}
		return func() {}, nil
	}
	kvs, err := s.allocationKeys(ctx, svc, gain)
	if err != nil {
		return nil, err
	}
	var created []store.KeyValue
	release := func() { s.deleteKeys(context.WithoutCancel(ctx), svc, keysOf(created)) }
	for _, kv := range kvs {
		if _, err := s.store.Create(ctx, kv.Key, kv.Value); err != nil {
			release()
			if errors.Is(err, store.ErrExists) {
				a.noteTaken([]string{kv.Key}, true)
				// A pick that was taken meanwhile is refused as an asked
				// one: the client's retry picks again.
				return nil, apierrors.NewInvalid(schemaGroupKind(api.Services), svc.Name, s.takenErrors([]string{kv.Key}, paths))
			}
			return nil, storeOf(s, api.Services).storageError(err, svc.Name)
		}
		created = append(created, kv)
	}
	a.noteTaken(keysOf(created), true)
	return release, nil
}

func storeOf(s *Server, res *api.Resource) *resourceStore { return s.serving().stores[res] }

func without[T comparable](list, minus []T) []T {
	var out []T
	for _, x := range list {
		if !slices.Contains(minus, x) {
			out = append(out, x)
		}
	}
	return out
}

// releaseUpdated gives back what old held and svc, its next state, no
// longer does.
func (s *Server) releaseUpdated(ctx context.Context, svc, old *corev1.Service) {
	want, _ := s.alloc.held(svc)
	had, _ := s.alloc.held(old)
	s.releaseHolds(ctx, old, holds{ips: without(had.ips, want.ips), ports: without(had.ports, want.ports)})
}

// releaseService gives back everything a removed Service held.
func (s *Server) releaseService(ctx context.Context, obj api.Object) {
	svc, ok := obj.(*corev1.Service)
	if !ok || s.alloc == nil {
		return
	}
	h, _ := s.alloc.held(svc)
	s.releaseHolds(ctx, svc, h)
}

func (s *Server) releaseHolds(ctx context.Context, svc *corev1.Service, h holds) {
	keys := make([]string, 0, len(h.ips)+len(h.ports))
	rs := storeOf(s, api.IPAddresses)
	for _, ip := range h.ips {
		keys = append(keys, rs.key("", ip.String()))
	}
	for _, p := range h.ports {
		keys = append(keys, nodePortKey(p))
	}
	s.deleteKeys(context.WithoutCancel(ctx), svc, keys)
}

// deleteKeys deletes the allocation keys that are svc's: a key another
// Service holds now is left alone. A failure is left to repair.
func (s *Server) deleteKeys(ctx context.Context, svc *corev1.Service, keys []string) {
	ctx, cancel := context.WithTimeout(ctx, s.requestTimeout)
	defer cancel()
	for _, k := range keys {
		kv, err := s.store.Get(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err == nil && !ownedBy(kv, svc.Namespace, svc.Name) {
			continue
		}
		if err == nil {
			_, err = s.store.Delete(ctx, k, kv.Revision)
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
			s.log.Warn("releasing a service's allocation failed; repair will", "key", k, "service", svc.Namespace+"/"+svc.Name, "err", err)
			continue
		}
		s.alloc.noteTaken([]string{k}, false)
	}
}

// ownedBy reports whether an allocation key's value names the Service
// namespace/name.
func ownedBy(kv *store.KeyValue, namespace, name string) bool {
	ns, n, _, ok := ownerOf(kv)
	return ok && ns == namespace && n == name
}

// ownerOf reads an allocation key's Service and when it was allocated.
func ownerOf(kv *store.KeyValue) (namespace, name string, at time.Time, ok bool) {
	if strings.HasPrefix(kv.Key, nodePortsPrefix) {
		var o nodePortOwner
		if json.Unmarshal(kv.Value, &o) != nil {
			return "", "", time.Time{}, false
		}
		return o.Namespace, o.Name, o.Allocated, true
	}
	obj, err := decodeFromStorage(api.IPAddresses, kv.Value, kv.Revision)
	ip, _ := obj.(*networkingv1.IPAddress)
	if err != nil || ip == nil || ip.Spec.ParentRef == nil || ip.Spec.ParentRef.Resource != "services" {
		return "", "", time.Time{}, false
	}
	return ip.Spec.ParentRef.Namespace, ip.Spec.ParentRef.Name, ip.CreationTimestamp.Time, true
}
