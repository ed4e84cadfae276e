package endpoints

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/api"
)

// The pure part of the controller: which pods are endpoints of a service,
// at which address and ports, and how those are packed into subsets.

// podIsEndpoint reports whether pod belongs in a service's endpoints at
// all, by upstream's rules: it has an IP, it has not finished (Succeeded
// or Failed), and it is not being deleted, unless the service publishes
// not-ready addresses, which includes terminating pods.
func podIsEndpoint(pod *corev1.Pod, includeTerminating bool) bool {
	if api.IsPodTerminal(pod) {
		return false
	}
	if pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0 {
		return false
	}
	if !includeTerminating && pod.DeletionTimestamp != nil {
		return false
	}
	return true
}

// podAddress is pod's address for svc: its IP of the service's IP family,
// its node, its hostname when it asked for one under this service
// (spec.hostname with spec.subdomain naming the service), and a reference
// back to it.
func podAddress(svc *corev1.Service, pod *corev1.Pod) (corev1.EndpointAddress, error) {
	ip, err := podIPFor(svc, pod)
	if err != nil {
		return corev1.EndpointAddress{}, err
	}
	addr := corev1.EndpointAddress{
		IP: ip,
		TargetRef: &corev1.ObjectReference{
			Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		},
	}
	if pod.Spec.NodeName != "" {
		nodeName := pod.Spec.NodeName
		addr.NodeName = &nodeName
	}
	if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
		addr.Hostname = pod.Spec.Hostname
	}
	return addr, nil
}

// podIPFor picks the pod IP of the service's (first) IP family; a service
// that names none is IPv4, as every service in minictl is.
func podIPFor(svc *corev1.Service, pod *corev1.Pod) (string, error) {
	wantV6 := len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol
	candidates := make([]string, 0, len(pod.Status.PodIPs)+1)
	for _, ip := range pod.Status.PodIPs {
		candidates = append(candidates, ip.IP)
	}
	candidates = append(candidates, pod.Status.PodIP)
	for _, s := range candidates {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		if isV6 := ip.Is6() && !ip.Is4In6(); isV6 == wantV6 {
			return s, nil
		}
	}
	return "", fmt.Errorf("pod %s/%s has no IP of the service's family", pod.Namespace, pod.Name)
}

// findPort resolves a service port's targetPort on pod: a number is used
// as it is; a name is looked up among the ports of the pod's containers
// (and of its sidecars, init containers that keep running) with the same
// protocol.
func findPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, bool) {
	switch sp.TargetPort.Type {
	case intstr.Int:
		if sp.TargetPort.IntVal == 0 {
			return sp.Port, true
		}
		return sp.TargetPort.IntVal, true
	case intstr.String:
		name := sp.TargetPort.StrVal
		if name == "" {
			return sp.Port, true
		}
		protocol := cmp.Or(sp.Protocol, corev1.ProtocolTCP)
		for _, c := range pod.Spec.Containers {
			if p, ok := namedPort(c.Ports, name, protocol); ok {
				return p, true
			}
		}
		for _, c := range pod.Spec.InitContainers {
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				if p, ok := namedPort(c.Ports, name, protocol); ok {
					return p, true
				}
			}
		}
	}
	return 0, false
}

func namedPort(ports []corev1.ContainerPort, name string, protocol corev1.Protocol) (int32, bool) {
	for _, p := range ports {
		if p.Name == name && cmp.Or(p.Protocol, corev1.ProtocolTCP) == protocol {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// addrKey tells addresses apart: the same IP may belong to two pods (host
// network), and is then two endpoints.
type addrKey struct {
	ip  string
	uid types.UID
}

func keyOf(a *corev1.EndpointAddress) addrKey {
	k := addrKey{ip: a.IP}
	if a.TargetRef != nil {
		k.uid = a.TargetRef.UID
	}
	return k
}

// portKey is an EndpointPort as a comparable value. noPorts is the port
// of headless services without ports, whose addresses carry none.
type portKey struct {
	name        string
	port        int32
	protocol    corev1.Protocol
	appProtocol string
}

var noPorts = portKey{port: -1}

func keyOfPort(p corev1.EndpointPort) portKey {
	k := portKey{name: p.Name, port: p.Port, protocol: p.Protocol}
	if p.AppProtocol != nil {
		k.appProtocol = *p.AppProtocol
	}
	return k
}

// subsetBuilder collects (address, port, ready) triples and packs them
// into the fewest subsets: each subset is one set of addresses with every
// port all of them serve, the shape upstream's RepackSubsets gives. The
// result is sorted, so that the same pods always give the same subsets and
// an unchanged service writes nothing.
type subsetBuilder struct {
	addrs map[addrKey]corev1.EndpointAddress
	ports map[portKey]corev1.EndpointPort
	// byPort holds, for each port, its addresses and whether each is
	// ready there.
	byPort map[portKey]map[addrKey]bool
}

func newSubsetBuilder() *subsetBuilder {
	return &subsetBuilder{
		addrs:  map[addrKey]corev1.EndpointAddress{},
		ports:  map[portKey]corev1.EndpointPort{},
		byPort: map[portKey]map[addrKey]bool{},
	}
}

// add records that addr serves port (nil: a headless service without
// ports), ready or not. An address both ready and not ready on one port
// counts as ready.
func (b *subsetBuilder) add(addr corev1.EndpointAddress, port *corev1.EndpointPort, ready bool) {
	ak := keyOf(&addr)
	if _, ok := b.addrs[ak]; !ok {
		b.addrs[ak] = addr
	}
	pk := noPorts
	if port != nil {
		pk = keyOfPort(*port)
		b.ports[pk] = *port
	}
	set := b.byPort[pk]
	if set == nil {
		set = map[addrKey]bool{}
		b.byPort[pk] = set
	}
	set[ak] = set[ak] || ready
}

// subsets packs what was added. It also returns how many distinct
// addresses are ready and how many are not (an address ready on one port
// and not on another counts as ready).
func (b *subsetBuilder) subsets() (subsets []corev1.EndpointSubset, ready, notReady int) {
	type group struct {
		members map[addrKey]bool
		ports   []corev1.EndpointPort
	}
	groups := map[string]*group{} // signature of a set of (address, ready) → its ports
	for pk, members := range b.byPort {
		sig := signature(members)
		g := groups[sig]
		if g == nil {
			g = &group{members: members}
			groups[sig] = g
		}
		if pk != noPorts {
			g.ports = append(g.ports, b.ports[pk])
		}
	}

	sigs := make([]string, 0, len(groups))
	for sig := range groups {
		sigs = append(sigs, sig)
	}
	slices.Sort(sigs)
	readyAddrs := map[addrKey]bool{}
	for _, sig := range sigs {
		g := groups[sig]
		var ss corev1.EndpointSubset
		for ak, isReady := range g.members {
			if isReady {
				ss.Addresses = append(ss.Addresses, b.addrs[ak])
			} else {
				ss.NotReadyAddresses = append(ss.NotReadyAddresses, b.addrs[ak])
			}
			readyAddrs[ak] = readyAddrs[ak] || isReady
		}
		slices.SortFunc(ss.Addresses, compareAddresses)
		slices.SortFunc(ss.NotReadyAddresses, compareAddresses)
		slices.SortFunc(g.ports, comparePorts)
		ss.Ports = g.ports
		subsets = append(subsets, ss)
	}
	for _, r := range readyAddrs {
		if r {
			ready++
		} else {
			notReady++
		}
	}
	return subsets, ready, notReady
}

// signature names a set of (address, ready) pairs, so that ports served by
// exactly the same set land in one subset. Sorted, it also orders subsets.
func signature(members map[addrKey]bool) string {
	parts := make([]string, 0, len(members))
	for ak, ready := range members {
		parts = append(parts, fmt.Sprintf("%s/%s/%t", ak.ip, ak.uid, ready))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func compareAddresses(a, b corev1.EndpointAddress) int {
	ka, kb := keyOf(&a), keyOf(&b)
	return cmp.Or(cmp.Compare(ka.ip, kb.ip), cmp.Compare(ka.uid, kb.uid))
}

func comparePorts(a, b corev1.EndpointPort) int {
	ka, kb := keyOfPort(a), keyOfPort(b)
	return cmp.Or(cmp.Compare(ka.name, kb.name), cmp.Compare(ka.port, kb.port),
		cmp.Compare(ka.protocol, kb.protocol), cmp.Compare(ka.appProtocol, kb.appProtocol))
}

// desiredSubsets computes a service's subsets from the pods its selector
// matches. A pod whose named targetPort it does not declare is left out of
// that port (and only that port). Ready pods are addresses; the others are
// notReadyAddresses, unless the service publishes not-ready addresses.
func desiredSubsets(svc *corev1.Service, pods []*corev1.Pod) (subsets []corev1.EndpointSubset, ready, notReady int) {
	publishNotReady := svc.Spec.PublishNotReadyAddresses
	b := newSubsetBuilder()
	for _, pod := range pods {
		if !podIsEndpoint(pod, publishNotReady) {
			continue
		}
		addr, err := podAddress(svc, pod)
		if err != nil {
			continue // no IP this service can reach it at
		}
		isReady := publishNotReady || api.PodIsReady(pod)
		if len(svc.Spec.Ports) == 0 {
			// Only a headless service may have no ports; its addresses
			// then carry none.
			if svc.Spec.ClusterIP == corev1.ClusterIPNone {
				b.add(addr, nil, isReady)
			}
			continue
		}
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			port, ok := findPort(pod, sp)
			if !ok {
				continue
			}
			b.add(addr, &corev1.EndpointPort{
				Name: sp.Name, Port: port, Protocol: cmp.Or(sp.Protocol, corev1.ProtocolTCP), AppProtocol: sp.AppProtocol,
			}, isReady)
		}
	}
	return b.subsets()
}
