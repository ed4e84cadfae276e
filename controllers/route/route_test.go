package route

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

type harness struct {
	t        *testing.T
	ctx      context.Context
	nodes    *client.Client[*corev1.Node]
	cloud    *sim.Client
	recorder *record.FakeRecorder
}

func start(t *testing.T) *harness {
	t.Helper()
	env := controllertest.Start(t)
	cl := simtest.Start(t)
	rec := &record.FakeRecorder{}
	c, err := New(Options{
		Common: controller.Common{Client: env.Client, Informers: env.Informers, Recorder: rec, Logger: controllertest.Logger(t)},
		Cloud:  sim.NewProvider(cl), ClusterName: "kubernetes", ClusterCIDRs: "10.244.0.0/16",
		Period: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 4, c)
	return &harness{t: t, ctx: context.Background(), nodes: client.For[*corev1.Node](env.Client), cloud: cl, recorder: rec}
}

// addNode starts the node's machine and registers the Node with podCIDR.
func (h *harness) addNode(name, podCIDR string) *corev1.Node {
	h.t.Helper()
	if _, err := h.cloud.CreateInstance(h.ctx, sim.InstanceSpec{Name: name}); err != nil {
		h.t.Fatal(err)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if podCIDR != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDR, []string{podCIDR}
	}
	n, err := h.nodes.Create(h.ctx, n)
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// routes are the cloud's routes as "cidr→target", sorted.
func (h *harness) routes() ([]string, error) {
	all, err := h.cloud.ListRoutes(h.ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range all {
		s := r.DestinationCIDR + "→" + r.Target
		if r.Blackhole {
			s += "(blackhole)"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
}

func (h *harness) waitRoutes(want ...string) {
	h.t.Helper()
	controllertest.Eventually(h.t, "routes "+strings.Join(want, " "), func() (bool, string) {
		got, err := h.routes()
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(got, want), fmt.Sprintf("routes %v", got)
	})
}

func (h *harness) waitNetwork(name string, status corev1.ConditionStatus, reason string) {
	h.t.Helper()
	controllertest.Eventually(h.t, name+" NetworkUnavailable "+string(status), func() (bool, string) {
		n, err := h.nodes.Get(h.ctx, "", name)
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeNetworkUnavailable {
				return c.Status == status && c.Reason == reason, fmt.Sprintf("%s %s", c.Status, c.Reason)
			}
		}
		return false, "no NetworkUnavailable condition"
	})
}

func TestEveryNodeGetsItsRoute(t *testing.T) {
	h := start(t)
	h.addNode("node-1", "10.244.0.0/24")
	h.addNode("node-2", "10.244.1.0/24")
	h.waitRoutes("10.244.0.0/24→node-1", "10.244.1.0/24→node-2")
	h.waitNetwork("node-1", corev1.ConditionFalse, ReasonRouteCreated)
	h.waitNetwork("node-2", corev1.ConditionFalse, ReasonRouteCreated)

	// The route is named for the node's UID.
	n1, err := h.nodes.Get(h.ctx, "", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	all, err := h.cloud.ListRoutes(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := sim.RouteName("kubernetes", string(n1.UID))
	if !slices.ContainsFunc(all, func(r sim.Route) bool { return r.Name == want && r.Target == "node-1" }) {
		t.Fatalf("no route named %s for node-1 in %+v", want, all)
	}

	// A node without a pod CIDR yet gets no route and no condition;
	// once it has one, it gets both.
	h.addNode("node-3", "")
	h.waitRoutes("10.244.0.0/24→node-1", "10.244.1.0/24→node-2")
	n3, err := h.nodes.Get(h.ctx, "", "node-3")
	if err != nil {
		t.Fatal(err)
	}
	n3.Spec.PodCIDR, n3.Spec.PodCIDRs = "10.244.2.0/24", []string{"10.244.2.0/24"}
	if _, err := h.nodes.Update(h.ctx, n3); err != nil {
		t.Fatal(err)
	}
	h.waitRoutes("10.244.0.0/24→node-1", "10.244.1.0/24→node-2", "10.244.2.0/24→node-3")
	h.waitNetwork("node-3", corev1.ConditionFalse, ReasonRouteCreated)
}

func TestRoutesOfGoneNodesAndBlackholesAreDeleted(t *testing.T) {
	h := start(t)
	h.addNode("node-1", "10.244.0.0/24")
	h.addNode("node-2", "10.244.1.0/24")
	// A route outside the cluster CIDR is not the cluster's to delete,
	// even though no node wants it.
	if _, err := h.cloud.PutRoute(h.ctx, "vpn", sim.RouteSpec{
		DestinationCIDR: "192.168.0.0/24", Target: "node-1", Tags: map[string]string{sim.TagCluster: "kubernetes"},
	}); err != nil {
		t.Fatal(err)
	}
	h.waitRoutes("10.244.0.0/24→node-1", "10.244.1.0/24→node-2", "192.168.0.0/24→node-1")

	// The Node goes: its route goes.
	if err := h.nodes.Delete(h.ctx, "", "node-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitRoutes("10.244.0.0/24→node-1", "192.168.0.0/24→node-1")

	// The machine goes while its Node stays: the cloud marks the route a
	// blackhole, and the controller deletes it.
	in, err := h.cloud.InstanceByName(h.ctx, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cloud.DeleteInstance(h.ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the blackhole route of node-1 deleted", func() (bool, string) {
		got, err := h.routes()
		if err != nil {
			return false, err.Error()
		}
		return !slices.Contains(got, "10.244.0.0/24→node-1(blackhole)") && !slices.Contains(got, "10.244.0.0/24→node-1"), fmt.Sprint(got)
	})
}

func TestFailedRouteMarksTheNetworkUnavailable(t *testing.T) {
	h := start(t)
	// A Node whose machine the cloud does not know: its route cannot be
	// created.
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"}}}
	if _, err := h.nodes.Create(h.ctx, n); err != nil {
		t.Fatal(err)
	}
	h.waitNetwork("node-1", corev1.ConditionTrue, ReasonNoRouteCreated)
	controllertest.Eventually(t, "a FailedToCreateRoute event", func() (bool, string) {
		return len(h.recorder.WithReason("FailedToCreateRoute")) > 0, fmt.Sprint(h.recorder.Events())
	})
	h.waitRoutes()

	// The machine comes up: the next period creates the route.
	if _, err := h.cloud.CreateInstance(h.ctx, sim.InstanceSpec{Name: "node-1"}); err != nil {
		t.Fatal(err)
	}
	h.waitRoutes("10.244.0.0/24→node-1")
	h.waitNetwork("node-1", corev1.ConditionFalse, ReasonRouteCreated)
}
