package apiserver

import (
	"context"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
)

// reconcileKubernetesEndpointSlice keeps the kubernetes Service's
// EndpointSlice, which kube-apiserver writes itself beside the Endpoints
// (the Endpoints say skip-mirror, so that no controller copies them): a
// slice named kubernetes, labelled kubernetes.io/service-name=kubernetes,
// listing addr, ready, on the port named https. A server whose catalogue
// has no EndpointSlices, or that advertises an address no slice may hold
// (loopback, link-local), writes none.
func (s *Server) reconcileKubernetesEndpointSlice(ctx context.Context, addr netip.AddrPort) error {
	ip := addr.Addr()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() || ip.IsLinkLocalMulticast() {
		return nil
	}
	v := s.serving()
	rs, cache := v.stores[api.EndpointSlices], v.caches[api.EndpointSlices]
	if rs == nil || cache == nil {
		return nil
	}
	addrType := discoveryv1.AddressTypeIPv4
	if ip.Is6() && !ip.Is4In6() {
		addrType = discoveryv1.AddressTypeIPv6
	}
	ready := true
	name, port, protocol := "https", int32(addr.Port()), corev1.ProtocolTCP
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: kubernetesServiceName, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelServiceName: kubernetesServiceName},
		},
		AddressType: addrType,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &protocol}},
	}
	cached, _ := cache.get(rs.key(metav1.NamespaceDefault, kubernetesServiceName))
	if cached == nil {
		setTypeMeta(api.EndpointSlices, want)
		_, err := s.createObject(ctx, rs, want, createOptions{manager: "kube-apiserver"})
		if err != nil && !isAlreadyExists(err) {
			return err
		}
		return nil
	}
	cur := cached.object().(*discoveryv1.EndpointSlice)
	if cur.AddressType == want.AddressType && apiequality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) &&
		apiequality.Semantic.DeepEqual(cur.Ports, want.Ports) {
		return nil
	}
	if cur.AddressType != want.AddressType {
		// addressType is immutable: the slice of the other family goes,
		// and the next round creates this one.
		_, _, err := s.deleteObject(ctx, rs, metav1.NamespaceDefault, kubernetesServiceName, &metav1.DeleteOptions{})
		return err
	}
	_, err := s.updateObject(ctx, rs, metav1.NamespaceDefault, kubernetesServiceName, updateOptions{mode: modeMain, manager: "kube-apiserver"}, func(obj api.Object) (api.Object, error) {
		slice := obj.(*discoveryv1.EndpointSlice)
		slice.Endpoints, slice.Ports = want.Endpoints, want.Ports
		return slice, nil
	})
	return err
}
