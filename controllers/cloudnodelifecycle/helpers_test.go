package cloudnodelifecycle

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/cloud/sim"
	"github.com/minictl/minictl/cloud/simtest"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// These tests run the controller against a real API server on a real etcd
// and the simulated cloud's HTTP API on a loopback port, through the "sim"
// provider, with a short monitor period on the real clock. The test plays
// the kubelets: it creates Nodes for machines and writes their Ready
// condition.

const period = 50 * time.Millisecond

type fixture struct {
	t        *testing.T
	env      *controllertest.Env
	nodes    *client.Client[*corev1.Node]
	cloud    *sim.Client
	recorder *record.FakeRecorder
	ctrl     *Controller
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := controllertest.Start(t)
	return &fixture{
		t: t, env: env,
		nodes:    client.For[*corev1.Node](env.Client),
		cloud:    simtest.Start(t),
		recorder: &record.FakeRecorder{},
	}
}

// run starts the controller; it stops when the test ends.
func (f *fixture) run() {
	f.t.Helper()
	c, err := New(Options{
		Common:            controller.Common{Client: f.env.Client, Informers: f.env.Informers, Recorder: f.recorder},
		Cloud:             sim.NewProvider(f.cloud),
		NodeMonitorPeriod: period,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.ctrl = c
	controllertest.Run(f.t, f.env.Informers, 1, c)
}

// passes waits until the controller has made n more passes, each of which
// began after the call: whatever the cache held at the call, they saw.
func (f *fixture) passes(n int64) {
	f.t.Helper()
	target := f.ctrl.passes.Load() + n + 1
	controllertest.Eventually(f.t, fmt.Sprintf("%d monitor passes", n), func() (bool, string) {
		return f.ctrl.passes.Load() >= target, ""
	})
}

// machine creates a machine in the cloud and the Node its kubelet
// registers, with its provider ID and Ready condition ready.
func (f *fixture) machine(name string, ready corev1.ConditionStatus) *sim.Instance {
	f.t.Helper()
	in, err := f.cloud.CreateInstance(context.Background(), sim.InstanceSpec{Name: name})
	if err != nil {
		f.t.Fatal(err)
	}
	node, err := f.nodes.Create(context.Background(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{ProviderID: in.ProviderID},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.setReady(node.Name, ready)
	return in
}

// setReady writes Node name's Ready condition and waits until the
// controller's cache has it.
func (f *fixture) setReady(name string, status corev1.ConditionStatus) {
	f.t.Helper()
	node := f.get(name)
	now := metav1.Now()
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "Test", LastHeartbeatTime: now, LastTransitionTime: now}}
	out, err := f.nodes.UpdateStatus(context.Background(), node)
	if err != nil {
		f.t.Fatal(err)
	}
	if f.ctrl == nil {
		return
	}
	controllertest.Eventually(f.t, "the controller to see "+name+"'s Ready "+string(status), func() (bool, string) {
		got, err := f.ctrl.lister.Get("", name)
		return err == nil && rvAtLeast(got.ResourceVersion, out.ResourceVersion), ""
	})
}

// rvAtLeast reports whether resourceVersion a is b or later: the
// controller may have written the Node again since.
func rvAtLeast(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x >= y
}

func (f *fixture) get(name string) *corev1.Node {
	f.t.Helper()
	node, err := f.nodes.Get(context.Background(), "", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return node
}

func (f *fixture) exists(name string) bool {
	f.t.Helper()
	_, err := f.nodes.Get(context.Background(), "", name)
	if client.IsNotFound(err) {
		return false
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return true
}

func (f *fixture) shutdownTainted(name string) bool {
	f.t.Helper()
	return hasTaint(f.get(name), shutdownTaint)
}
