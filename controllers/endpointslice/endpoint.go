package endpointslice

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/api"
)

// The pure part of the controller: which pods are endpoints of a service,
// what each endpoint says, and which ports it serves.

// podIsEndpoint reports whether pod belongs in a service's slices at all:
// it has an IP and has not finished. A pod being deleted stays, with
// terminating=true, so that whoever routes can drain it.
func podIsEndpoint(pod *corev1.Pod) bool {
	if api.IsPodTerminal(pod) {
		return false
	}
	return pod.Status.PodIP != "" || len(pod.Status.PodIPs) > 0
}

// addressTypes are the address types svc gets slices of: one per IP
// family it asks for. A service that names none (written before families
// existed) has the family of its cluster IP, IPv4 when it has none.
func addressTypes(svc *corev1.Service) []discoveryv1.AddressType {
	var out []discoveryv1.AddressType
	for _, f := range svc.Spec.IPFamilies {
		switch f {
		case corev1.IPv4Protocol:
			out = append(out, discoveryv1.AddressTypeIPv4)
		case corev1.IPv6Protocol:
			out = append(out, discoveryv1.AddressTypeIPv6)
		}
	}
	if len(out) > 0 {
		return out
	}
	if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil && ip.Is6() && !ip.Is4In6() {
		return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv6}
	}
	return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}
}

// podAddresses are pod's IPs of addrType.
func podAddresses(pod *corev1.Pod, addrType discoveryv1.AddressType) []string {
	ips := make([]string, 0, len(pod.Status.PodIPs))
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = append(ips, pod.Status.PodIP)
	}
	var out []string
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		v6 := ip.Is6() && !ip.Is4In6()
		if v6 == (addrType == discoveryv1.AddressTypeIPv6) {
			out = append(out, s)
		}
	}
	return out
}

// podToEndpoint is pod as an endpoint of svc, by kube's rules:
//
//   - serving is the pod's readiness, whether or not it is terminating;
//   - terminating is whether it is being deleted;
//   - ready is serving and not terminating, or always true when the
//     service publishes not-ready addresses;
//
// with the pod's node, the node's zone (topology.kubernetes.io/zone; node
// may be nil), its hostname when it asked for one under this service, and
// a reference back to it.
func podToEndpoint(pod *corev1.Pod, node *corev1.Node, svc *corev1.Service, addrType discoveryv1.AddressType) discoveryv1.Endpoint {
	serving := api.PodIsReady(pod)
	terminating := pod.DeletionTimestamp != nil
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := discoveryv1.Endpoint{
		Addresses: podAddresses(pod, addrType),
		Conditions: discoveryv1.EndpointConditions{
			Ready: &ready, Serving: &serving, Terminating: &terminating,
		},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
	}
	// The endpoint's strings are its own, not pointers into the cached
	// pod: those would keep that version of the pod alive, and a write
	// through them would change the cache.
	if pod.Spec.NodeName != "" {
		nodeName := pod.Spec.NodeName
		ep.NodeName = &nodeName
	}
	if node != nil && node.Labels[corev1.LabelTopologyZone] != "" {
		zone := node.Labels[corev1.LabelTopologyZone]
		ep.Zone = &zone
	}
	if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
		hostname := pod.Spec.Hostname
		ep.Hostname = &hostname
	}
	return ep
}

// endpointPorts are the ports pod serves for svc: each service port whose
// targetPort the pod has (a named one is looked up in its containers), in
// the service's order. A headless service may have no ports.
func endpointPorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	out := []discoveryv1.EndpointPort{}
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		port, ok := findPort(pod, sp)
		if !ok {
			continue // the pod does not serve this port
		}
		name, protocol := sp.Name, cmp.Or(sp.Protocol, corev1.ProtocolTCP)
		out = append(out, discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &protocol, AppProtocol: sp.AppProtocol})
	}
	return out
}

// findPort resolves a service port's targetPort on pod: a number is used
// as it is (none: the service port); a name is looked up among the ports of
// the pod's containers, and of its sidecars, with the same protocol.
func findPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, bool) {
	tp := sp.TargetPort
	if tp.Type == intstr.Int {
		return cmp.Or(tp.IntVal, sp.Port), true
	}
	if tp.StrVal == "" {
		return sp.Port, true
	}
	protocol := cmp.Or(sp.Protocol, corev1.ProtocolTCP)
	containers := slices.Clone(pod.Spec.Containers)
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers, c)
		}
	}
	for _, c := range containers {
		for _, p := range c.Ports {
			if p.Name == tp.StrVal && cmp.Or(p.Protocol, corev1.ProtocolTCP) == protocol {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// portsKey names a set of ports, whatever their order: the endpoints of
// one key share slices.
func portsKey(ports []discoveryv1.EndpointPort) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		parts = append(parts, fmt.Sprintf("%s/%d/%s/%s", deref(p.Name), deref(p.Port), deref(p.Protocol), deref(p.AppProtocol)))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// endpointKey is an endpoint's identity: its addresses, hostname and pod.
// Two endpoints of one key are the same endpoint, perhaps in another state.
func endpointKey(ep *discoveryv1.Endpoint) string {
	addrs := slices.Clone(ep.Addresses)
	slices.Sort(addrs)
	var ref string
	if ep.TargetRef != nil {
		ref = ep.TargetRef.Namespace + "/" + ep.TargetRef.Name
	}
	return strings.Join(addrs, ",") + "|" + deref(ep.Hostname) + "|" + ref
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// endpointSet is a set of endpoints by endpointKey, taken in a stable order
// (the order they were added), so that the same pods pack the same way.
type endpointSet struct {
	byKey map[string]*discoveryv1.Endpoint
	order []string
}

func newEndpointSet() *endpointSet {
	return &endpointSet{byKey: map[string]*discoveryv1.Endpoint{}}
}

func (s *endpointSet) insert(ep *discoveryv1.Endpoint) {
	k := endpointKey(ep)
	if _, ok := s.byKey[k]; !ok {
		s.order = append(s.order, k)
	}
	s.byKey[k] = ep
}

func (s *endpointSet) get(ep *discoveryv1.Endpoint) *discoveryv1.Endpoint {
	return s.byKey[endpointKey(ep)]
}

func (s *endpointSet) remove(ep *discoveryv1.Endpoint) { delete(s.byKey, endpointKey(ep)) }

func (s *endpointSet) len() int { return len(s.byKey) }

// pop takes the first endpoint still in the set; ok is false when empty.
func (s *endpointSet) pop() (discoveryv1.Endpoint, bool) {
	for len(s.order) > 0 {
		k := s.order[0]
		s.order = s.order[1:]
		if ep, ok := s.byKey[k]; ok {
			delete(s.byKey, k)
			return *ep, true
		}
	}
	return discoveryv1.Endpoint{}, false
}
