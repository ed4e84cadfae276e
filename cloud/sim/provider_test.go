package sim

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/cloud"
)

func node(name, providerID string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
}

func TestProviderLoadBalancer(t *testing.T) {
	_, cl := start(t, Options{})
	ctx := context.Background()
	p := NewProvider(cl)
	lbs, _ := p.LoadBalancer()
	n1 := mustCreate(t, cl, InstanceSpec{Name: "node-1"})
	mustCreate(t, cl, InstanceSpec{Name: "node-2"})
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "8d9a3f1c-2b4e-4f60-9a7d-0c1e2f3a4b5c"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080},
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053},
		}},
	}
	name := lbs.GetLoadBalancerName(ctx, "kubernetes", svc)
	if name != "a8d9a3f1c2b4e4f609a7d0c1e2f3a4b5" {
		t.Fatalf("name %q, want kube's default: a + the UID without dashes, 32 characters", name)
	}
	if st, exists, err := lbs.GetLoadBalancer(ctx, "kubernetes", svc); err != nil || exists || st != nil {
		t.Fatalf("before ensure: %v %v %v", st, exists, err)
	}

	// node-3 has no machine: it cannot be a backend.
	nodes := []*corev1.Node{node("node-1", n1.ProviderID), node("node-2", ""), node("node-3", "")}
	st, err := lbs.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
	if err != nil || len(st.Ingress) != 1 || st.Ingress[0].IP != "192.0.2.1" || *st.Ingress[0].IPMode != corev1.LoadBalancerIPModeVIP {
		t.Fatalf("ensure: %+v %v", st, err)
	}
	lb, err := cl.GetLoadBalancer(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(lb.Backends, ",") != "node-1,node-2" || len(lb.Listeners) != 2 ||
		lb.Listeners[1] != (Listener{Protocol: "UDP", Port: 53, NodePort: 30053}) ||
		lb.Tags[TagService] != "default/web" || lb.Tags[TagCluster] != "kubernetes" || lb.Tags[TagServiceUID] != string(svc.UID) {
		t.Fatalf("the cloud's load balancer: %+v", lb)
	}

	if err := lbs.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes[1:]); err != nil {
		t.Fatal(err)
	}
	if lb, _ := cl.GetLoadBalancer(ctx, name); strings.Join(lb.Backends, ",") != "node-2" || len(lb.Listeners) != 2 || lb.IP != "192.0.2.1" {
		t.Fatalf("after update: %+v", lb)
	}
	if st, exists, err := lbs.GetLoadBalancer(ctx, "kubernetes", svc); err != nil || !exists || st.Ingress[0].IP != "192.0.2.1" {
		t.Fatalf("get: %+v %v %v", st, exists, err)
	}

	if err := lbs.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.GetLoadBalancer(ctx, name); !IsNotFound(err) {
		t.Fatalf("after delete: %v", err)
	}
	if err := lbs.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc); err != nil {
		t.Fatalf("deleting a deleted load balancer: %v", err)
	}
	if err := lbs.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes); !IsNotFound(err) {
		t.Fatalf("updating a missing load balancer: %v", err)
	}

	// An invalid Service (a port the cloud cannot listen on) is the
	// cloud's 422, passed on.
	svc.Spec.Ports[0].Protocol = "HTTP"
	if _, err := lbs.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); !IsInvalid(err) {
		t.Fatalf("ensure with a bad protocol: %v", err)
	}
}

func TestProviderInstances(t *testing.T) {
	c, cl := start(t, Options{})
	ctx := context.Background()
	p := NewProvider(cl)
	iv, _ := p.InstancesV2()
	zones, _ := p.Zones()
	in := mustCreate(t, cl, InstanceSpec{Name: "node-1", Zone: "b", InstanceType: "sim.medium",
		Addresses: []Address{{Type: "InternalIP", Address: "127.0.1.1"}, {Type: "Hostname", Address: "node-1"}}})

	for _, n := range []*corev1.Node{node("node-1", ""), node("node-1", in.ProviderID)} {
		if ok, err := iv.InstanceExists(ctx, n); err != nil || !ok {
			t.Fatalf("exists(%q): %v %v", n.Spec.ProviderID, ok, err)
		}
		if down, err := iv.InstanceShutdown(ctx, n); err != nil || down {
			t.Fatalf("shutdown(%q) of a running machine: %v %v", n.Spec.ProviderID, down, err)
		}
		md, err := iv.InstanceMetadata(ctx, n)
		if err != nil || md.ProviderID != "sim://b/node-1" || md.InstanceType != "sim.medium" || md.Zone != "b" || md.Region != "sim" ||
			len(md.NodeAddresses) != 2 || md.NodeAddresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.0.1.1"}) {
			t.Fatalf("metadata: %+v %v", md, err)
		}
	}
	if z, err := zones.GetZoneByProviderID(ctx, in.ProviderID); err != nil || z != (cloud.Zone{FailureDomain: "b", Region: "sim"}) {
		t.Fatalf("zone by provider ID: %+v %v", z, err)
	}
	if z, err := zones.GetZoneByNodeName(ctx, "node-1"); err != nil || z.FailureDomain != "b" {
		t.Fatalf("zone by node name: %+v %v", z, err)
	}

	if _, err := cl.StopInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	n := node("node-1", in.ProviderID)
	if ok, err := iv.InstanceExists(ctx, n); err != nil || !ok {
		t.Fatalf("a stopped machine exists: %v %v", ok, err)
	}
	if down, err := iv.InstanceShutdown(ctx, n); err != nil || !down {
		t.Fatalf("a stopped machine is shut down: %v %v", down, err)
	}

	if err := cl.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	// A new machine of the same name is not the node's machine: the
	// provider ID says which one the node was made on.
	if _, err := c.CreateInstance(InstanceSpec{Name: "node-1", Zone: "c"}); err != nil {
		t.Fatal(err)
	}
	if ok, err := iv.InstanceExists(ctx, n); err != nil || ok {
		t.Fatalf("a deleted machine: exists %v %v", ok, err)
	}
	if _, err := iv.InstanceShutdown(ctx, n); !errors.Is(err, cloud.InstanceNotFound) {
		t.Fatalf("shutdown of a deleted machine: %v", err)
	}
	if _, err := iv.InstanceMetadata(ctx, n); !errors.Is(err, cloud.InstanceNotFound) {
		t.Fatalf("metadata of a deleted machine: %v", err)
	}
	// A node of another cloud is not declared gone.
	if ok, err := iv.InstanceExists(ctx, node("node-1", "aws:///us-east-1a/i-0abc")); err == nil || ok {
		t.Fatalf("a foreign provider ID: exists %v, err %v; want an error", ok, err)
	}
	if _, err := zones.GetZoneByNodeName(ctx, "node-9"); !errors.Is(err, cloud.InstanceNotFound) {
		t.Fatalf("zone of an unknown node: %v", err)
	}
}

func TestProviderRoutes(t *testing.T) {
	_, cl := start(t, Options{})
	ctx := context.Background()
	p := NewProvider(cl)
	routes, _ := p.Routes()
	n1 := mustCreate(t, cl, InstanceSpec{Name: "node-1"})
	mustCreate(t, cl, InstanceSpec{Name: "node-2"})
	uid := "0f5c2a8e-7d41-4b3a-9e6f-2c8d1b0a7e55"
	if err := routes.CreateRoute(ctx, "kubernetes", uid, &cloud.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24"}); err != nil {
		t.Fatal(err)
	}
	if err := routes.CreateRoute(ctx, "other", "x", &cloud.Route{TargetNode: "node-2", DestinationCIDR: "10.99.0.0/24"}); err != nil {
		t.Fatal(err)
	}
	got, err := routes.ListRoutes(ctx, "kubernetes")
	if err != nil || len(got) != 1 {
		t.Fatalf("list: %+v %v", got, err)
	}
	want := cloud.Route{Name: "kubernetes-" + uid, TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24"}
	if *got[0] != want {
		t.Fatalf("route %+v, want %+v", *got[0], want)
	}
	if err := cl.DeleteInstance(ctx, n1.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := routes.ListRoutes(ctx, "kubernetes"); len(got) != 1 || !got[0].Blackhole {
		t.Fatalf("after the target machine is deleted: %+v", got)
	}
	if err := routes.CreateRoute(ctx, "kubernetes", "y", &cloud.Route{TargetNode: "node-1", DestinationCIDR: "10.244.3.0/24"}); !IsInvalid(err) {
		t.Fatalf("a route to a missing machine: %v", err)
	}
	for range 2 {
		if err := routes.DeleteRoute(ctx, "kubernetes", got[0]); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := routes.ListRoutes(ctx, "kubernetes"); len(got) != 0 {
		t.Fatalf("after delete: %+v", got)
	}
}

func TestProviderSeesFaults(t *testing.T) {
	_, cl := start(t, Options{})
	ctx := context.Background()
	p := NewProvider(cl)
	if _, err := cl.SetFaults(ctx, Faults{Mode: FaultUnavailable, Duration: "1h"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.InstanceExists(ctx, node("node-1", "")); !IsUnavailable(err) {
		t.Fatalf("exists during an outage: %v, want the cloud's 503 and no answer", err)
	}
	if _, _, err := p.GetLoadBalancer(ctx, "kubernetes", &corev1.Service{}); !IsUnavailable(err) {
		t.Fatalf("get load balancer during an outage: %v", err)
	}
}

func TestProviderFromConfig(t *testing.T) {
	_, cl := start(t, Options{})
	dir := t.TempDir()
	good := filepath.Join(dir, "cloud.yaml")
	if err := WriteConfig(good, cl.URL()); err != nil {
		t.Fatal(err)
	}
	iface, err := cloud.New("sim", good)
	if err != nil {
		t.Fatal(err)
	}
	if iface.ProviderName() != "sim" {
		t.Fatalf("provider name %q", iface.ProviderName())
	}
	mustCreate(t, cl, InstanceSpec{Name: "node-1"})
	iv, _ := iface.InstancesV2()
	if ok, err := iv.InstanceExists(context.Background(), node("node-1", "")); err != nil || !ok {
		t.Fatalf("the provider from the config does not see the cloud: %v %v", ok, err)
	}

	if cfg, err := ReadConfig(""); err != nil || cfg.URL != DefaultURL {
		t.Fatalf("no config: %+v %v", cfg, err)
	}
	for body, says := range map[string]string{
		"timeout: 5s\n":               "url: Required value",
		"url: http://x\nzone: a\n":    `unknown field "zone"`,
		"url: http://x\ntimeout: 5\n": "not a duration",
		"url: ftp://127.0.0.1:8090\n": "not an http(s) URL",
		"url: [\n":                    "cloud config",
	} {
		f := filepath.Join(dir, "bad.yaml")
		os.WriteFile(f, []byte(body), 0o600)
		if _, err := cloud.New("sim", f); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("config %q: %v, want an error saying %q", body, err, says)
		}
	}
	if _, err := cloud.New("sim", filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("a missing config file is not an error")
	}
}
