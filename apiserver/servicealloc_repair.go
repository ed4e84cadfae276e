package apiserver

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/store"
)

// startServiceAllocation makes the default ServiceCIDR and repairs the
// allocations once, before the server is ready, retrying while etcd
// fails; false if ctx ended first.
func (s *Server) startServiceAllocation(ctx context.Context) bool {
	if !s.allocating() {
		return true
	}
	return s.retry(ctx, "creating the default ServiceCIDR", s.ensureServiceCIDR) &&
		s.retry(ctx, "repairing the service IP and node port allocations", s.repairServiceAllocations)
}

// keepServiceAllocations repairs the allocations every
// serviceRepairInterval, until ctx ends.
func (s *Server) keepServiceAllocations(ctx context.Context) {
	if !s.allocating() {
		return
	}
	t := time.NewTicker(serviceRepairInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.repairServiceAllocations(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("repairing the service allocations failed; retrying", "err", err, "every", serviceRepairInterval)
		}
	}
}

// ensureServiceCIDR creates the ServiceCIDR named kubernetes, the range
// of --service-cluster-ip-range, Ready, as kube-apiserver's default
// ServiceCIDR controller does.
func (s *Server) ensureServiceCIDR(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.requestTimeout)
	defer cancel()
	rs := storeOf(s, api.ServiceCIDRs)
	c := &networkingv1.ServiceCIDR{}
	c.Name = api.DefaultServiceCIDRName
	c.Spec.CIDRs = []string{s.alloc.ips.String()}
	setTypeMeta(api.ServiceCIDRs, c)
	if _, err := s.createObject(ctx, rs, c, createOptions{manager: "kube-apiserver"}); err != nil && !isAlreadyExists(err) {
		return err
	}
	_, err := s.updateObject(ctx, rs, "", api.DefaultServiceCIDRName, updateOptions{mode: modeStatus, manager: "kube-apiserver"}, func(cur api.Object) (api.Object, error) {
		c := cur.(*networkingv1.ServiceCIDR)
		for _, cond := range c.Status.Conditions {
			if cond.Type == networkingv1.ServiceCIDRConditionReady && cond.Status == metav1.ConditionTrue {
				return c, nil
			}
		}
		c.Status.Conditions = []metav1.Condition{{
			Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue,
			Reason: "ServiceCIDRReady", LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second)),
			ObservedGeneration: c.Generation,
		}}
		return c, nil
	})
	return err
}

// repairServiceAllocations makes the allocation keys say what the
// Services hold: a Service's IP or port without its key gets one (unless
// another Service's key has it: both then hold it, which is logged, as
// kube-apiserver records an Event), and a key older than the grace
// whose Service is gone or no longer holds it is deleted, once etcd
// confirms what the cache says. The node ports this server knows are
// taken become the keys found.
func (s *Server) repairServiceAllocations(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 4*s.requestTimeout)
	defer cancel()
	a := s.alloc
	v := s.serving()
	svcStore, ipStore := v.stores[api.Services], v.stores[api.IPAddresses]
	ipList, err := s.store.List(ctx, ipStore.prefix, store.ListOptions{})
	if err != nil {
		return err
	}
	portList, err := s.store.List(ctx, nodePortsPrefix, store.ListOptions{Revision: ipList.Revision})
	if err != nil {
		return err
	}
	keys := map[string]*store.KeyValue{}
	for _, l := range []*store.ListResult{ipList, portList} {
		for i := range l.Items {
			keys[l.Items[i].Key] = &l.Items[i]
		}
	}
	taken := map[int32]bool{}
	for _, kv := range portList.Items {
		if n, err := strconv.Atoi(strings.TrimPrefix(kv.Key, nodePortsPrefix)); err == nil {
			taken[int32(n)] = true
		}
	}

	// Every Service's IPs and ports have their keys.
	services, _ := v.caches[api.Services].list(&filter{})
	held := map[string]string{} // key → the Service holding it, namespace/name
	var errs []error
	for _, o := range services {
		svc := o.object().(*corev1.Service)
		h, _ := a.held(svc)
		h.ips = inRange(h.ips, a.ips)
		kvs, err := s.allocationKeys(ctx, svc, h)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			held[kv.Key] = svc.Namespace + "/" + svc.Name
			if have, ok := keys[kv.Key]; ok {
				if !ownedBy(have, svc.Namespace, svc.Name) {
					s.log.Warn("a cluster IP or node port is held by two services", "key", kv.Key, "service", svc.Namespace+"/"+svc.Name)
				}
				continue
			}
			if !a.ports.Contains(portOf(kv.Key)) && strings.HasPrefix(kv.Key, nodePortsPrefix) {
				continue // outside the range (the flag changed): nothing to keep
			}
			switch _, err := s.store.Create(ctx, kv.Key, kv.Value); {
			case err == nil:
				s.log.Info("repaired a service's allocation", "key", kv.Key, "service", svc.Namespace+"/"+svc.Name)
				if strings.HasPrefix(kv.Key, nodePortsPrefix) {
					taken[int32(portOf(kv.Key))] = true
				}
			case !errors.Is(err, store.ErrExists):
				errs = append(errs, err)
			}
		}
	}

	// Every key belongs to a Service that holds it.
	now := time.Now()
	for key, kv := range keys {
		if _, ok := held[key]; ok {
			continue
		}
		ns, name, at, ok := ownerOf(kv)
		if !ok || now.Sub(at) < a.grace {
			continue // not ours to judge (an IPAddress a client made), or too young
		}
		if !strings.HasPrefix(key, nodePortsPrefix) && !managedByAllocator(ipStore, kv) {
			continue
		}
		if holdsKey(ctx, svcStore, ns, name, key, a) {
			continue // the cache was behind
		}
		switch _, err := s.store.Delete(ctx, key, kv.Revision); {
		case err == nil:
			s.log.Info("released an allocation whose service is gone or holds it no more", "key", key, "service", ns+"/"+name)
			delete(taken, int32(portOf(key)))
		case !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict):
			errs = append(errs, err)
		}
	}
	a.mu.Lock()
	a.taken = taken
	a.mu.Unlock()
	return errors.Join(errs...)
}

// holdsKey asks etcd whether the Service namespace/name holds key now.
func holdsKey(ctx context.Context, svcStore *resourceStore, namespace, name, key string, a *serviceAllocator) bool {
	obj, err := svcStore.get(ctx, namespace, name)
	if err != nil {
		return false // gone (or unreadable: the next repair decides)
	}
	h, _ := a.held(obj.(*corev1.Service))
	for _, ip := range h.ips {
		if strings.HasSuffix(key, "/"+ip.String()) && !strings.HasPrefix(key, nodePortsPrefix) {
			return true
		}
	}
	for _, p := range h.ports {
		if key == nodePortKey(p) {
			return true
		}
	}
	return false
}

// managedByAllocator reports whether an IPAddress is one the allocator
// made, which repair may delete; one a client made is the client's.
func managedByAllocator(ipStore *resourceStore, kv *store.KeyValue) bool {
	obj, err := decodeFromStorage(ipStore.res, kv.Value, kv.Revision)
	return err == nil && obj.GetLabels()[api.LabelIPAddressManagedBy] == api.IPAllocatorManager
}

func portOf(key string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(key, nodePortsPrefix))
	return n
}

func inRange(ips []netip.Addr, r netip.Prefix) []netip.Addr {
	var out []netip.Addr
	for _, ip := range ips {
		if r.Contains(ip) {
			out = append(out, ip)
		}
	}
	return out
}
