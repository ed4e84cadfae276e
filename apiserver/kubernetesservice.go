package apiserver

import (
	"context"
	"net"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/api"
)

// The kubernetes Service. kube-apiserver publishes itself inside the
// cluster: a Service named kubernetes in the default namespace, whose
// cluster IP is the first address of the service range (10.96.0.1 by
// default) and whose port 443, named https, leads to the API server; its
// Endpoints name the address the API server advertises. In-cluster clients
// find the API server through it (KUBERNETES_SERVICE_HOST), and tools and
// test frameworks look it up before anything else. Like kube-apiserver,
// every minictl API server makes sure both exist and say where it is,
// every kubernetesServiceInterval, so a deleted or edited one comes back.
//
// The EndpointSlice of the same name (kubernetesslice.go) says the same
// for readers of slices.
//
// Every minictl API server of one cluster runs on the same machine, so
// they advertise one address: the Endpoints have one, and an API server
// finding its address listed leaves the Endpoints (and the Service's
// target port) as they are, rather than taking turns with the others over
// the port, which each has its own of.
//
// The port is the one the API server listens on (minictl's plain listener,
// until it has a secure port of its own); the address is the listener's,
// or, when it listens on loopback or every interface, this machine's
// address as kube-apiserver chooses it (--advertise-address overrides).

const (
	kubernetesServiceName     = "kubernetes"
	kubernetesServiceInterval = 10 * time.Second
)

// DefaultServiceClusterIPRange is kube-apiserver's
// --service-cluster-ip-range default, the range cluster IPs come from.
var DefaultServiceClusterIPRange = netip.MustParsePrefix("10.96.0.0/12")

// kubernetesServiceIP is the cluster IP of the kubernetes Service: the
// first address of the service range.
func kubernetesServiceIP(serviceRange netip.Prefix) netip.Addr {
	return serviceRange.Masked().Addr().Next()
}

// advertisedAddress is where this server tells the cluster it is: the
// configured address if any, else ln's, and for a loopback or unspecified
// listener the first global unicast IPv4 address of an interface that is
// up (loopback itself when the machine has none).
func advertisedAddress(configured netip.Addr, ln net.Addr) netip.AddrPort {
	ap, err := netip.ParseAddrPort(ln.String())
	if err != nil {
		return netip.AddrPort{}
	}
	if configured.IsValid() {
		return netip.AddrPortFrom(configured, ap.Port())
	}
	ip := ap.Addr().Unmap()
	if !ip.IsLoopback() && !ip.IsUnspecified() {
		return netip.AddrPortFrom(ip, ap.Port())
	}
	if host, ok := hostAddress(); ok {
		return netip.AddrPortFrom(host, ap.Port())
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), ap.Port())
}

// hostAddress is the first global unicast IPv4 address of an interface
// that is up and not loopback.
func hostAddress() (netip.Addr, bool) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return netip.Addr{}, false
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			prefix, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			if ip := prefix.Addr(); ip.Is4() && ip.IsGlobalUnicast() {
				return ip, true
			}
		}
	}
	return netip.Addr{}, false
}

// publishKubernetesService creates the kubernetes Service and Endpoints
// once Serve has a listener, retrying while etcd fails, so that they exist
// before the server is ready; false if ctx ended first.
func (s *Server) publishKubernetesService(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-s.listening:
	}
	return s.retry(ctx, "creating the kubernetes service", s.reconcileKubernetesService)
}

// keepKubernetesService puts the kubernetes Service and Endpoints back
// every kubernetesServiceInterval, until ctx ends.
func (s *Server) keepKubernetesService(ctx context.Context) {
	t := time.NewTicker(kubernetesServiceInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.reconcileKubernetesService(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("reconciling the kubernetes service failed; retrying", "err", err, "every", kubernetesServiceInterval)
		}
	}
}

// reconcileKubernetesService makes the kubernetes Service and Endpoints
// say that the API server is where it advertises itself, within one
// request timeout. It reads the watch caches, and writes only what is
// missing or wrong.
func (s *Server) reconcileKubernetesService(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.requestTimeout)
	defer cancel()
	addr := s.advertised
	ports := []corev1.ServicePort{{
		Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(int32(addr.Port())),
	}}
	v := s.serving()
	rs := v.stores[api.Services]
	cached, _ := v.caches[api.Services].get(rs.key(metav1.NamespaceDefault, kubernetesServiceName))
	switch {
	case cached == nil:
		ip := kubernetesServiceIP(s.serviceRange).String()
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{
				Name: kubernetesServiceName, Namespace: metav1.NamespaceDefault,
				Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"},
			},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
				Ports: ports, SessionAffinity: corev1.ServiceAffinityNone,
			},
		}
		setTypeMeta(api.Services, svc)
		if _, err := s.createObject(ctx, rs, svc, createOptions{manager: "kube-apiserver"}); err != nil && !isAlreadyExists(err) {
			return err
		}
	case !servesHTTPS(cached.object().(*corev1.Service)):
		_, err := s.updateObject(ctx, rs, metav1.NamespaceDefault, kubernetesServiceName, updateOptions{mode: modeMain, manager: "kube-apiserver"}, func(cur api.Object) (api.Object, error) {
			cur.(*corev1.Service).Spec.Ports = ports
			return cur, nil
		})
		if err != nil {
			return err
		}
	}
	if err := s.reconcileKubernetesEndpoints(ctx, addr); err != nil {
		return err
	}
	// The slice is for readers of slices; a failure to write it must not
	// keep the server from being ready, and the next round tries again.
	if err := s.reconcileKubernetesEndpointSlice(ctx, addr); err != nil && ctx.Err() == nil {
		s.log.Warn("writing the kubernetes EndpointSlice failed; retrying", "err", err, "every", kubernetesServiceInterval)
	}
	return nil
}

// reconcileKubernetesEndpoints lists addr in the kubernetes Endpoints,
// unless it is listed already.
func (s *Server) reconcileKubernetesEndpoints(ctx context.Context, addr netip.AddrPort) error {
	ip := addr.Addr().String()
	want := []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: ip}},
		Ports:     []corev1.EndpointPort{{Name: "https", Port: int32(addr.Port()), Protocol: corev1.ProtocolTCP}},
	}}
	v := s.serving()
	rs := v.stores[api.Endpoints]
	cached, _ := v.caches[api.Endpoints].get(rs.key(metav1.NamespaceDefault, kubernetesServiceName))
	if cached == nil {
		ep := &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{
				Name: kubernetesServiceName, Namespace: metav1.NamespaceDefault,
				// The Endpoints are the API server's, not a copy for
				// EndpointSlices to mirror, as kube-apiserver marks them.
				Labels: map[string]string{"endpointslice.kubernetes.io/skip-mirror": "true"},
			},
			Subsets: want,
		}
		setTypeMeta(api.Endpoints, ep)
		_, err := s.createObject(ctx, rs, ep, createOptions{manager: "kube-apiserver"})
		if err != nil && !isAlreadyExists(err) {
			return err
		}
		return nil
	}
	if listsAddress(cached.object().(*corev1.Endpoints), ip) {
		return nil
	}
	_, err := s.updateObject(ctx, rs, metav1.NamespaceDefault, kubernetesServiceName, updateOptions{mode: modeMain, manager: "kube-apiserver"}, func(cur api.Object) (api.Object, error) {
		cur.(*corev1.Endpoints).Subsets = want
		return cur, nil
	})
	return err
}

// servesHTTPS reports whether svc has the kubernetes Service's one port:
// 443, named https. Its target port is the one of the API server that
// created or last repaired it, as its Endpoints' port is (see
// listsAddress), which the others leave alone.
func servesHTTPS(svc *corev1.Service) bool {
	p := svc.Spec.Ports
	return len(p) == 1 && p[0].Name == "https" && p[0].Port == 443 && p[0].Protocol == corev1.ProtocolTCP
}

// listsAddress reports whether ep has ip among its ready addresses, on a
// port named https.
func listsAddress(ep *corev1.Endpoints, ip string) bool {
	for _, ss := range ep.Subsets {
		https := false
		for _, p := range ss.Ports {
			https = https || p.Name == "https"
		}
		for _, a := range ss.Addresses {
			if a.IP == ip && https {
				return true
			}
		}
	}
	return false
}
