package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/cloud/sim"
	"github.com/minictl/minictl/internal/testenv"
	"github.com/minictl/minictl/kubelet"
)

// TestNodeLivesOnItsMachine is up's wiring of one node to the cloud: the
// node's instance is created in its zone before the kubelet registers the
// Node, tainted uninitialized for the cloud-node controller, and deleting
// the instance ends the kubelet.
func TestNodeLivesOnItsMachine(t *testing.T) {
	env := testenv.Start(t)
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.New(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cf := clusterFlags{
		zones:             "a,b",
		cloud:             &upCloud{c: c, initializesNodes: true},
		heartbeatInterval: 100 * time.Millisecond, statusInterval: 200 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runNode(ctx, rc, "node-2", 2, cf, slog.New(slog.DiscardHandler)) }()

	nodes := client.For[*corev1.Node](rc)
	var node *corev1.Node
	deadline := time.Now().Add(15 * time.Second)
	for node == nil {
		if time.Now().After(deadline) {
			t.Fatal("node-2 never registered")
		}
		node, _ = nodes.Get(ctx, "", "node-2")
		time.Sleep(20 * time.Millisecond)
	}
	ins := c.Instances()
	if len(ins) != 1 || ins[0].Name != "node-2" || ins[0].Zone != "b" || ins[0].ProviderID != "sim://b/node-2" ||
		ins[0].Addresses[0] != (sim.Address{Type: "InternalIP", Address: "127.0.1.2"}) {
		t.Fatalf("instances %+v, want node-2's in zone b with InternalIP 127.0.1.2", ins)
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != kubelet.TaintExternalCloudProvider || node.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Fatalf("node-2's taints %+v, want only the uninitialized taint", node.Spec.Taints)
	}
	if node.Status.Addresses[0].Address != "127.0.1.2" {
		t.Fatalf("node-2's addresses %+v disagree with its machine's", node.Status.Addresses)
	}
	if _, ok := node.Labels[corev1.LabelTopologyZone]; ok {
		t.Fatal("the kubelet labelled the zone itself, though the cloud-node controller does it")
	}

	if err := c.DeleteInstance(ins[0].ID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("runNode after its machine is deleted: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the kubelet outlived its machine")
	}
}

// TestZonesWithoutCloud: with no cloud to say where a node is, the
// kubelets label their nodes' zone themselves, round-robin, and no one
// waits to initialize them.
func TestZonesWithoutCloud(t *testing.T) {
	for i, want := range []string{"a", "b", "c", "a"} {
		if got := zoneOf(splitList("a, b,c"), i+1); got != want {
			t.Errorf("node-%d in zone %q, want %q", i+1, got, want)
		}
	}
	if got := zoneOf(nil, 1); got != "" {
		t.Errorf("no zones: %q", got)
	}

	env := testenv.Start(t)
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cf := clusterFlags{zones: "a,b", heartbeatInterval: 100 * time.Millisecond, statusInterval: 200 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runNode(ctx, rc, "node-2", 2, cf, slog.New(slog.DiscardHandler)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runNode: %v", err)
		}
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		node, err := client.For[*corev1.Node](rc).Get(ctx, "", "node-2")
		if err == nil {
			if node.Labels[corev1.LabelTopologyZone] != "b" || len(node.Spec.Taints) != 0 {
				t.Fatalf("node-2: labels %v, taints %+v; want zone b and no taint", node.Labels, node.Spec.Taints)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node-2 never registered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Stop only once the kubelet is past its start, so that it stops cleanly.
	for {
		_, err := client.For[*coordinationv1.Lease](rc).Get(ctx, "kube-node-lease", "node-2")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node-2's lease never appeared: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCloudFlagsRefuse: up refuses, before anything starts, a cloud it
// cannot run.
func TestCloudFlagsRefuse(t *testing.T) {
	for _, tc := range []struct {
		f    cloudFlags
		says string
	}{
		{cloudFlags{provider: "aws", listen: "127.0.0.1:0"}, `unknown cloud provider "aws"`},
		{cloudFlags{provider: "sim", listen: "0.0.0.0:8090"}, "loopback addresses only"},
		{cloudFlags{provider: "sim", listen: "127.0.0.1:0", zones: "a,Zone_B"}, `--zones: "Zone_B"`},
	} {
		if _, err := tc.f.open(false, "", slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: %v, want an error saying %q", tc.f, err, tc.says)
		}
	}
	u, err := (&cloudFlags{provider: ""}).open(false, "", nil)
	if u != nil || err != nil {
		t.Errorf(`--cloud-provider "": %v %v, want no cloud`, u, err)
	}
}

// TestCloudPortTaken: the default port taken, up's cloud takes a free one
// and says so; a port asked for that is taken is an error.
func TestCloudPortTaken(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	f := cloudFlags{provider: "sim", listen: busy.Addr().String()}
	u, err := f.open(false, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- u.c.Serve(ctx, u.ln) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	if u.url == "http://"+busy.Addr().String() || !strings.Contains(u.banner(), busy.Addr().String()+" was taken") {
		t.Errorf("banner %q", u.banner())
	}
	p, err := u.provider()
	if err != nil {
		t.Fatal(err)
	}
	u.c.CreateInstance(sim.InstanceSpec{Name: "node-1"})
	iv, _ := p.InstancesV2()
	if ok, err := iv.InstanceExists(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}); err != nil || !ok {
		t.Errorf("the provider does not reach up's cloud: %v %v", ok, err)
	}
	if _, err := f.open(true, "", nil); err == nil {
		t.Error("an explicit --cloud-listen that is taken is not an error")
	}
}

// TestMachinesJoin is the cloud as the source of machines: up's nodes get
// their instances, an instance created later through the cloud's HTTP API
// boots and its kubelet registers a Ready node with an address of its own,
// and a deleted instance's kubelet stops for good.
func TestMachinesJoin(t *testing.T) {
	env := testenv.Start(t)
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.New(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	cf := clusterFlags{
		nodes:             1,
		cloud:             &upCloud{c: c},
		heartbeatInterval: 100 * time.Millisecond, statusInterval: 200 * time.Millisecond,
	}
	connect := func(string, ...string) (*client.RESTClient, error) { return rc, nil }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runMachines(ctx, connect, cf, slog.New(slog.DiscardHandler)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runMachines: %v", err)
		}
	}()
	nodes := client.For[*corev1.Node](rc)
	waitReady := func(name string) *corev1.Node {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if n, err := nodes.Get(ctx, "", name); err == nil {
				for _, cond := range n.Status.Conditions {
					if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
						return n
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never became Ready", name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if n := waitReady("node-1"); n.Status.Addresses[0].Address != "127.0.1.1" {
		t.Fatalf("node-1's addresses %+v, want 127.0.1.1 first", n.Status.Addresses)
	}

	resp, err := http.Post(srv.URL+"/v1/instances", "application/json", strings.NewReader(`{"name":"worker-a"}`))
	if err != nil {
		t.Fatal(err)
	}
	var in sim.Instance
	err = json.NewDecoder(resp.Body).Decode(&in)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/instances: %s, %v", resp.Status, err)
	}
	n := waitReady("worker-a")
	if n.Status.Addresses[0].Address != "127.0.1.2" {
		t.Fatalf("worker-a's addresses %+v, want the free 127.0.1.2 first", n.Status.Addresses)
	}

	// Once its machine is deleted, worker-a's kubelet falls silent while
	// node-1's goes on, and nothing registers worker-a again.
	leases := client.For[*coordinationv1.Lease](rc)
	// heartbeats waits for node-1 to renew its lease n times: time enough
	// for any kubelet still running to have done something.
	heartbeats := func(n int) {
		t.Helper()
		var last time.Time
		deadline := time.Now().Add(30 * time.Second)
		for seen := -1; seen < n; time.Sleep(20 * time.Millisecond) {
			if l, err := leases.Get(ctx, "kube-node-lease", "node-1"); err == nil && l.Spec.RenewTime.After(last) {
				last, seen = l.Spec.RenewTime.Time, seen+1
			}
			if time.Now().After(deadline) {
				t.Fatal("node-1 stopped renewing its lease")
			}
		}
	}
	renewed := func(name string) time.Time {
		t.Helper()
		l, err := leases.Get(ctx, "kube-node-lease", name)
		if err != nil {
			t.Fatal(err)
		}
		return l.Spec.RenewTime.Time
	}
	heartbeats(1)
	if err := c.DeleteInstance(in.ID); err != nil {
		t.Fatal(err)
	}
	heartbeats(2)
	before := renewed("worker-a")
	heartbeats(5)
	if after := renewed("worker-a"); !after.Equal(before) {
		t.Fatalf("worker-a renewed its lease (%v → %v) after its machine was deleted", before, after)
	}
	if err := nodes.Delete(ctx, "", "worker-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	heartbeats(3)
	if _, err := nodes.Get(ctx, "", "worker-a"); err == nil {
		t.Fatal("worker-a registered again after its machine was deleted")
	}
}
