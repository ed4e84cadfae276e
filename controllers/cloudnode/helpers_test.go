package cloudnode

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/cloud/sim"
	"github.com/minictl/minictl/cloud/simtest"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// These tests run the controller against a real API server on a real etcd
// and the simulated cloud's HTTP API on a loopback port, through the "sim"
// provider: the test creates machines with the cloud's client, and Nodes
// as their kubelets would register them.

type fixture struct {
	t        *testing.T
	env      *controllertest.Env
	nodes    *client.Client[*corev1.Node]
	cloud    *sim.Client
	recorder *record.FakeRecorder
	ctrl     *Controller
	// refreshes receives a value after each address refresh.
	refreshes chan struct{}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := controllertest.Start(t)
	return &fixture{
		t: t, env: env,
		nodes:     client.For[*corev1.Node](env.Client),
		cloud:     simtest.Start(t),
		recorder:  &record.FakeRecorder{},
		refreshes: make(chan struct{}, 100),
	}
}

// run starts the controller with opts (Common and Cloud are filled in) on
// clk (nil: the real clock); it stops when the test ends.
func (f *fixture) run(opts Options, clk clock.Clock) {
	f.t.Helper()
	opts.Common = controller.Common{Client: f.env.Client, Informers: f.env.Informers, Recorder: f.recorder, Clock: clk}
	opts.Cloud = sim.NewProvider(f.cloud)
	c, err := New(opts)
	if err != nil {
		f.t.Fatal(err)
	}
	c.refreshes = func() { f.refreshes <- struct{}{} }
	f.ctrl = c
	controllertest.Run(f.t, f.env.Informers, 1, c)
}

// waitRefresh waits for the next address refresh to finish.
func (f *fixture) waitRefresh() {
	f.t.Helper()
	select {
	case <-f.refreshes:
	case <-time.After(30 * time.Second):
		f.t.Fatal("timed out waiting for an address refresh")
	}
}

func (f *fixture) machine(spec sim.InstanceSpec) *sim.Instance {
	f.t.Helper()
	in, err := f.cloud.CreateInstance(context.Background(), spec)
	if err != nil {
		f.t.Fatal(err)
	}
	return in
}

// register creates a Node as a kubelet of a cluster with an external cloud
// provider does: tainted uninitialized (with extra taints), and reporting
// its hostname and the address it guessed.
func (f *fixture) register(name, providerID string, uninitialized bool, labels map[string]string, addrs ...corev1.NodeAddress) *corev1.Node {
	f.t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
	}
	if uninitialized {
		node.Spec.Taints = []corev1.Taint{{Key: TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	out, err := f.nodes.Create(context.Background(), node)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(addrs) == 0 {
		return out
	}
	out.Status.Addresses = addrs
	out, err = f.nodes.UpdateStatus(context.Background(), out)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) get(name string) *corev1.Node {
	f.t.Helper()
	node, err := f.nodes.Get(context.Background(), "", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return node
}

// waitNode waits until Node name satisfies cond, which says why not.
func (f *fixture) waitNode(name, what string, cond func(*corev1.Node) (bool, string)) *corev1.Node {
	f.t.Helper()
	var last *corev1.Node
	controllertest.Eventually(f.t, what, func() (bool, string) {
		last = f.get(name)
		return cond(last)
	})
	return last
}

func addr(typ corev1.NodeAddressType, a string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: typ, Address: a}
}

func sameAddresses(got, want []corev1.NodeAddress) bool { return slices.Equal(got, want) }
