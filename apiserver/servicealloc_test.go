package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
)

const ipAddressesPath = "/apis/networking.k8s.io/v1/ipaddresses"

func svcPath(ns, name string) string {
	p := "/api/v1/namespaces/" + ns + "/services"
	if name != "" {
		p += "/" + name
	}
	return p
}

// service is a Service of type typ with one TCP port.
func service(name string, typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Type: typ, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
}

// wantInvalidService checks a 422 whose message names field and says msg.
func wantInvalidService(t *testing.T, r *reply, field, msg string) {
	t.Helper()
	st := r.wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if !strings.Contains(st.Message, field) || !strings.Contains(st.Message, msg) {
		t.Errorf("message %q, want it to name %s and say %q", st.Message, field, msg)
	}
	if st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != field {
		t.Errorf("details %+v, want a cause at %s", st.Details, field)
	}
}

// ipAddressOf reads the IPAddress of ip, nil if there is none.
func ipAddressOf(t *testing.T, env *testenv.Env, ip string) *networkingv1.IPAddress {
	t.Helper()
	r := do(t, env, http.MethodGet, ipAddressesPath+"/"+ip, "", nil)
	if r.code == http.StatusNotFound {
		return nil
	}
	var out networkingv1.IPAddress
	r.want(t, http.StatusOK).into(t, &out)
	return &out
}

// TestServiceClusterIPs: a Service gets a free address of the range, one
// IPAddress naming it its parent says so, and concurrent creates never
// share one.
func TestServiceClusterIPs(t *testing.T) {
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{ServiceClusterIPRange: netip.MustParsePrefix("10.100.0.0/24")}})
	rng := netip.MustParsePrefix("10.100.0.0/24")

	const n = 60
	ips := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := do(t, env, http.MethodPost, svcPath("default", ""), "application/json", service(fmt.Sprintf("web-%d", i), ""))
			if r.code != http.StatusCreated {
				t.Errorf("create web-%d: %d %s", i, r.code, r.body)
				return
			}
			var svc corev1.Service
			r.into(t, &svc)
			ips[i] = svc.Spec.ClusterIP
		})
	}
	wg.Wait()
	seen := map[string]int{"10.100.0.1": -1} // the kubernetes Service's
	for i, ip := range ips {
		addr, err := netip.ParseAddr(ip)
		if err != nil || !rng.Contains(addr) || addr == rng.Addr() || addr == netip.MustParseAddr("10.100.0.255") {
			t.Errorf("web-%d has cluster IP %q, not a usable address of %s", i, ip, rng)
		}
		if j, dup := seen[ip]; dup {
			t.Errorf("web-%d and %d both have %s", i, j, ip)
		}
		seen[ip] = i
		ipa := ipAddressOf(t, env, ip)
		if ipa == nil {
			t.Errorf("no IPAddress for web-%d's %s", i, ip)
			continue
		}
		ref := ipa.Spec.ParentRef
		if ref == nil || ref.Resource != "services" || ref.Namespace != "default" || ref.Name != fmt.Sprintf("web-%d", i) ||
			ipa.Labels["ipaddress.kubernetes.io/managed-by"] != "ipallocator.k8s.io" || ipa.Labels["ipaddress.kubernetes.io/ip-family"] != "IPv4" {
			t.Errorf("IPAddress %s: parentRef %+v labels %v", ip, ref, ipa.Labels)
		}
	}

	// The kubernetes Service keeps the first address, and has its
	// IPAddress too; the default ServiceCIDR is the range.
	k := get[corev1.Service](t, env, svcPath("default", "kubernetes"))
	if k.Spec.ClusterIP != "10.100.0.1" || ipAddressOf(t, env, "10.100.0.1") == nil {
		t.Errorf("kubernetes Service at %q, IPAddress %v", k.Spec.ClusterIP, ipAddressOf(t, env, "10.100.0.1"))
	}
	cidr := get[networkingv1.ServiceCIDR](t, env, "/apis/networking.k8s.io/v1/servicecidrs/kubernetes")
	if len(cidr.Spec.CIDRs) != 1 || cidr.Spec.CIDRs[0] != "10.100.0.0/24" || len(cidr.Status.Conditions) != 1 ||
		cidr.Status.Conditions[0].Type != "Ready" || cidr.Status.Conditions[0].Status != metav1.ConditionTrue {
		t.Errorf("ServiceCIDR kubernetes: %+v %+v", cidr.Spec, cidr.Status)
	}
}

// TestServiceAskedClusterIP: an asked address is given if it is free, and
// refused in kube-apiserver's words if it is taken or outside the range;
// a refused Service is not created and takes nothing.
func TestServiceAskedClusterIP(t *testing.T) {
	env := testenv.Start(t)
	dns := service("dns", "")
	dns.Spec.ClusterIP = "10.96.0.10"
	if got := create[corev1.Service](t, env, svcPath("default", ""), dns); got.Spec.ClusterIP != "10.96.0.10" || len(got.Spec.ClusterIPs) != 1 {
		t.Fatalf("asked 10.96.0.10, got %q %v", got.Spec.ClusterIP, got.Spec.ClusterIPs)
	}

	again := service("dns2", "")
	again.Spec.ClusterIPs = []string{"10.96.0.10"}
	wantInvalidService(t, do(t, env, http.MethodPost, svcPath("default", ""), "application/json", again), "spec.clusterIPs[0]", "provided IP is already allocated")

	outside := service("outside", "")
	outside.Spec.ClusterIP = "192.168.0.10"
	wantInvalidService(t, do(t, env, http.MethodPost, svcPath("default", ""), "application/json", outside), "spec.clusterIPs[0]",
		"provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/12")
	for _, name := range []string{"dns2", "outside"} {
		do(t, env, http.MethodGet, svcPath("default", name), "", nil).want(t, http.StatusNotFound)
	}
	if ipAddressOf(t, env, "192.168.0.10") != nil {
		t.Error("the refused Service left an IPAddress")
	}

	// Immutable once set.
	cur := get[corev1.Service](t, env, svcPath("default", "dns"))
	cur.Spec.ClusterIP, cur.Spec.ClusterIPs = "10.96.0.11", []string{"10.96.0.11"}
	wantInvalidService(t, do(t, env, http.MethodPut, svcPath("default", "dns"), "application/json", cur), "spec.clusterIP", "field is immutable")

	// Deleted, its address is free to ask for again.
	do(t, env, http.MethodDelete, svcPath("default", "dns"), "", nil).want(t, http.StatusOK)
	if ipAddressOf(t, env, "10.96.0.10") != nil {
		t.Error("the deleted Service's IPAddress is still there")
	}
	if got := create[corev1.Service](t, env, svcPath("default", ""), again); got.Spec.ClusterIP != "10.96.0.10" {
		t.Errorf("asked the released 10.96.0.10, got %q", got.Spec.ClusterIP)
	}

	// Single-stack IPv4: IPv6 and dual-stack are refused as kube refuses
	// them on such a cluster.
	v6 := service("v6", "")
	v6.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	wantInvalidService(t, do(t, env, http.MethodPost, svcPath("default", ""), "application/json", v6), "spec.ipFamilies[0]", "not configured on this cluster")
	dual := service("dual", "")
	dual.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicyRequireDualStack)
	wantInvalidService(t, do(t, env, http.MethodPost, svcPath("default", ""), "application/json", dual), "spec.ipFamilyPolicy", "this cluster is not configured for dual-stack services")
}

// TestServiceWithoutClusterIP: a headless Service and an ExternalName get
// no address; turning a Service into an ExternalName gives its address
// back, and turning it back takes a new one.
func TestServiceWithoutClusterIP(t *testing.T) {
	env := testenv.Start(t)
	headless := service("headless", "")
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	if got := create[corev1.Service](t, env, svcPath("default", ""), headless); got.Spec.ClusterIP != "None" {
		t.Errorf("headless: clusterIP %q", got.Spec.ClusterIP)
	}
	ext := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"},
	}
	if got := create[corev1.Service](t, env, svcPath("default", ""), ext); got.Spec.ClusterIP != "" || len(got.Spec.ClusterIPs) != 0 {
		t.Errorf("ExternalName: clusterIPs %v", got.Spec.ClusterIPs)
	}

	web := create[corev1.Service](t, env, svcPath("default", ""), service("web", ""))
	ip := web.Spec.ClusterIP
	web.Spec.Type, web.Spec.ExternalName = corev1.ServiceTypeExternalName, "example.com"
	changed := update[corev1.Service](t, env, svcPath("default", "web"), web)
	if changed.Spec.ClusterIP != "" || ipAddressOf(t, env, ip) != nil {
		t.Errorf("turned ExternalName: clusterIP %q, IPAddress of %s %v", changed.Spec.ClusterIP, ip, ipAddressOf(t, env, ip))
	}
	changed.Spec.Type, changed.Spec.ExternalName = corev1.ServiceTypeClusterIP, ""
	back := update[corev1.Service](t, env, svcPath("default", "web"), changed)
	if back.Spec.ClusterIP == "" || ipAddressOf(t, env, back.Spec.ClusterIP) == nil {
		t.Errorf("turned ClusterIP again: clusterIP %q without its IPAddress", back.Spec.ClusterIP)
	}
}

// TestServiceNodePorts: NodePort and LoadBalancer Services get node
// ports of the range, an asked one if it is free, kept across updates
// and given back when the type no longer needs them.
func TestServiceNodePorts(t *testing.T) {
	env := testenv.Start(t)
	asked := service("asked", corev1.ServiceTypeNodePort)
	asked.Spec.Ports[0].NodePort = 30080
	if got := create[corev1.Service](t, env, svcPath("default", ""), asked); got.Spec.Ports[0].NodePort != 30080 {
		t.Fatalf("asked 30080, got %d", got.Spec.Ports[0].NodePort)
	}
	taken := service("taken", corev1.ServiceTypeNodePort)
	taken.Spec.Ports[0].NodePort = 30080
	wantInvalidService(t, do(t, env, http.MethodPost, svcPath("default", ""), "application/json", taken), "spec.ports[0].nodePort", "provided port is already allocated")
	outside := service("outside", corev1.ServiceTypeNodePort)
	outside.Spec.Ports[0].NodePort = 8080
	wantInvalidService(t, do(t, env, http.MethodPost, svcPath("default", ""), "application/json", outside), "spec.ports[0].nodePort",
		"provided port is not in the valid range. The range of valid ports is 30000-32767")

	lb := service("lb", corev1.ServiceTypeLoadBalancer)
	lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	lb.Spec.Ports = append(lb.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443})
	got := create[corev1.Service](t, env, svcPath("default", ""), lb)
	ports := map[int32]bool{30080: true}
	for _, p := range append([]int32{got.Spec.Ports[0].NodePort, got.Spec.Ports[1].NodePort}, got.Spec.HealthCheckNodePort) {
		if p < 30000 || p > 32767 || ports[p] {
			t.Errorf("LoadBalancer node ports %v and health check port %d: %d is out of range or given twice", got.Spec.Ports, got.Spec.HealthCheckNodePort, p)
		}
		ports[p] = true
	}
	noPorts := service("lb-no-ports", corev1.ServiceTypeLoadBalancer)
	noPorts.Spec.AllocateLoadBalancerNodePorts = ptr(false)
	if got := create[corev1.Service](t, env, svcPath("default", ""), noPorts); got.Spec.Ports[0].NodePort != 0 {
		t.Errorf("allocateLoadBalancerNodePorts false: node port %d", got.Spec.Ports[0].NodePort)
	}

	// An update that leaves the node ports out keeps them.
	kept := get[corev1.Service](t, env, svcPath("default", "lb"))
	kept.Spec.Ports[0].NodePort, kept.Spec.Ports[1].NodePort, kept.Spec.HealthCheckNodePort = 0, 0, 0
	kept.Spec.Selector = map[string]string{"app": "other"}
	if u := update[corev1.Service](t, env, svcPath("default", "lb"), kept); u.Spec.Ports[0].NodePort != got.Spec.Ports[0].NodePort ||
		u.Spec.Ports[1].NodePort != got.Spec.Ports[1].NodePort || u.Spec.HealthCheckNodePort != got.Spec.HealthCheckNodePort {
		t.Errorf("after an update without them: %v %d, want %v %d", u.Spec.Ports, u.Spec.HealthCheckNodePort, got.Spec.Ports, got.Spec.HealthCheckNodePort)
	}

	// Turned ClusterIP, "asked" gives 30080 back, and another may have it.
	cur := get[corev1.Service](t, env, svcPath("default", "asked"))
	cur.Spec.Type = corev1.ServiceTypeClusterIP
	if u := update[corev1.Service](t, env, svcPath("default", "asked"), cur); u.Spec.Ports[0].NodePort != 0 || u.Spec.ExternalTrafficPolicy != "" {
		t.Errorf("turned ClusterIP: node port %d, externalTrafficPolicy %q", u.Spec.Ports[0].NodePort, u.Spec.ExternalTrafficPolicy)
	}
	if got := create[corev1.Service](t, env, svcPath("default", ""), taken); got.Spec.Ports[0].NodePort != 30080 {
		t.Errorf("asked the released 30080, got %d", got.Spec.Ports[0].NodePort)
	}
	// Deleted, "taken" gives it back too.
	do(t, env, http.MethodDelete, svcPath("default", "taken"), "", nil).want(t, http.StatusOK)
	asked.Name = "asked-again"
	create[corev1.Service](t, env, svcPath("default", ""), asked)
}

// TestServiceDryRunAllocatesNothing: a dry-run create shows an address
// but takes none.
func TestServiceDryRunAllocatesNothing(t *testing.T) {
	env := testenv.Start(t)
	dry := service("dry", corev1.ServiceTypeNodePort)
	dry.Spec.ClusterIP = "10.96.0.50"
	dry.Spec.Ports[0].NodePort = 30050
	var got corev1.Service
	do(t, env, http.MethodPost, svcPath("default", "")+"?dryRun=All", "application/json", dry).want(t, http.StatusCreated).into(t, &got)
	if got.Spec.ClusterIP != "10.96.0.50" || got.Spec.Ports[0].NodePort != 30050 {
		t.Errorf("dry run answered %q %v", got.Spec.ClusterIP, got.Spec.Ports)
	}
	if ipAddressOf(t, env, "10.96.0.50") != nil {
		t.Error("the dry run made an IPAddress")
	}
	dry.Name = "real"
	real := create[corev1.Service](t, env, svcPath("default", ""), dry)
	if real.Spec.ClusterIP != "10.96.0.50" || real.Spec.Ports[0].NodePort != 30050 {
		t.Errorf("after the dry run, asked for the same: %q %v", real.Spec.ClusterIP, real.Spec.Ports)
	}
	// A dry run of a taken one is refused like the real thing.
	dry.Name = "dry2"
	r := do(t, env, http.MethodPost, svcPath("default", "")+"?dryRun=All", "application/json", dry)
	wantInvalidService(t, r, "spec.clusterIPs[0]", "provided IP is already allocated")
}

// TestServiceAllocationRepair: a restarted server puts back the
// IPAddress and node port of a Service that lost them, and deletes an
// IPAddress whose Service is gone.
func TestServiceAllocationRepair(t *testing.T) {
	env := testenv.Start(t)
	svc := service("web", corev1.ServiceTypeNodePort)
	svc.Spec.ClusterIP, svc.Spec.Ports[0].NodePort = "10.96.0.20", 30020
	create[corev1.Service](t, env, svcPath("default", ""), svc)
	ctx := context.Background()

	// Lost: the IPAddress and the node port's key, deleted behind the
	// server's back.
	for _, key := range []string{"/registry/networking.k8s.io/ipaddresses/10.96.0.20", "/registry/ranges/servicenodeports/30020"} {
		if _, err := env.Store.Delete(ctx, key, 0); err != nil {
			t.Fatalf("delete %s: %v", key, err)
		}
	}
	// An orphan: an IPAddress the allocator made an hour ago for a
	// Service that is gone.
	orphan := networkingv1.IPAddress{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IPAddress"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "10.96.0.30", UID: "0000-orphan", CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour)),
			Labels: map[string]string{"ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io", "ipaddress.kubernetes.io/ip-family": "IPv4"},
		},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "gone"}},
	}
	data, _ := json.Marshal(orphan)
	if _, err := env.Store.Create(ctx, "/registry/networking.k8s.io/ipaddresses/10.96.0.30", data); err != nil {
		t.Fatal(err)
	}
	// Without repair, the lost port could be handed out twice.
	taken := service("taken", corev1.ServiceTypeNodePort)
	taken.Spec.Ports[0].NodePort = 30020

	env.RestartServer()
	if ipAddressOf(t, env, "10.96.0.20") == nil {
		t.Error("the lost IPAddress of web was not put back")
	}
	if ipAddressOf(t, env, "10.96.0.30") != nil {
		t.Error("the orphan IPAddress is still there")
	}
	wantInvalidService(t, do(t, env, http.MethodPost, svcPath("default", ""), "application/json", taken), "spec.ports[0].nodePort", "provided port is already allocated")
	// A repaired address can no more be asked for.
	again := service("again", "")
	again.Spec.ClusterIP = "10.96.0.20"
	wantInvalidService(t, do(t, env, http.MethodPost, svcPath("default", ""), "application/json", again), "spec.clusterIPs[0]", "provided IP is already allocated")
}

// TestServiceValidation: what ValidateService refuses, each a 422 at its
// field, creating nothing.
func TestServiceValidation(t *testing.T) {
	env := testenv.Start(t)
	tests := []struct {
		name  string
		edit  func(*corev1.Service)
		field string
		msg   string
	}{
		{"duplicate port", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "again", Port: 80})
		}, "spec.ports[1]", "Duplicate value"},
		{"unnamed second port", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: 81})
		}, "spec.ports[1].name", "Required value"},
		{"invalid IP", func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.300" }, "spec.clusterIP", "must be a valid IP address"},
		{"ExternalName without a name", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }, "spec.externalName", "Required value"},
		{"node port on a ClusterIP Service", func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30001 }, "spec.ports[0].nodePort", "may not be used when `type` is 'ClusterIP'"},
		{"health check port on a ClusterIP Service", func(s *corev1.Service) { s.Spec.HealthCheckNodePort = 30001 }, "spec.healthCheckNodePort", "may only be set when `type` is 'LoadBalancer'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := service("bad", "")
			tt.edit(svc)
			wantInvalidService(t, do(t, env, http.MethodPost, svcPath("default", ""), "application/json", svc), tt.field, tt.msg)
			do(t, env, http.MethodGet, svcPath("default", "bad"), "", nil).want(t, http.StatusNotFound)
		})
	}
	var l networkingv1.IPAddressList
	do(t, env, http.MethodGet, ipAddressesPath, "", nil).want(t, http.StatusOK).into(t, &l)
	if len(l.Items) != 1 || l.Items[0].Name != "10.96.0.1" {
		t.Errorf("IPAddresses after refused creates: %v, want only the kubernetes Service's", names(l.Items, func(i *networkingv1.IPAddress) string { return i.Name }))
	}
}
