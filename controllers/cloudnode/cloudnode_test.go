package cloudnode

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/cloud/sim"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// A Node registered with the uninitialized taint gets its machine's
// provider ID, zone, region and instance type (GA and beta labels) and
// addresses, keeps the hostname the kubelet reported and its other
// taints, and loses the uninitialized taint.
func TestTaintedNodeIsInitializedFromTheCloud(t *testing.T) {
	f := newFixture(t)
	f.machine(sim.InstanceSpec{Name: "node-1", Zone: "zone-b", Region: "region-x", InstanceType: "sim.large",
		Addresses: []sim.Address{{Type: "InternalIP", Address: "10.0.0.5"}, {Type: "ExternalIP", Address: "203.0.113.5"}}})
	node := f.register("node-1", "", true, map[string]string{"team": "web"},
		addr(corev1.NodeHostName, "node-1.local"), addr(corev1.NodeInternalIP, "127.0.0.1"))
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule})
	if _, err := f.nodes.Update(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	f.run(Options{}, nil)

	got := f.waitNode("node-1", "node-1 initialized", func(n *corev1.Node) (bool, string) {
		return !hasCloudTaint(n) && len(n.Status.Addresses) == 3, fmt.Sprintf("taints %v, addresses %v", n.Spec.Taints, n.Status.Addresses)
	})
	if got.Spec.ProviderID != "sim://zone-b/node-1" {
		t.Errorf("spec.providerID %q, want sim://zone-b/node-1", got.Spec.ProviderID)
	}
	wantLabels := map[string]string{
		"team":                                     "web",
		"topology.kubernetes.io/zone":              "zone-b",
		"failure-domain.beta.kubernetes.io/zone":   "zone-b",
		"topology.kubernetes.io/region":            "region-x",
		"failure-domain.beta.kubernetes.io/region": "region-x",
		"node.kubernetes.io/instance-type":         "sim.large",
		"beta.kubernetes.io/instance-type":         "sim.large",
	}
	for k, v := range wantLabels {
		if got.Labels[k] != v {
			t.Errorf("label %s=%q, want %q (labels %v)", k, got.Labels[k], v, got.Labels)
		}
	}
	// The cloud's addresses replace the kubelet's guess; its hostname stays.
	want := []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.5"), addr(corev1.NodeExternalIP, "203.0.113.5"), addr(corev1.NodeHostName, "node-1.local")}
	if !sameAddresses(got.Status.Addresses, want) {
		t.Errorf("status.addresses %v, want %v", got.Status.Addresses, want)
	}
	if len(got.Spec.Taints) != 1 || got.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints %v, want only dedicated=web:NoSchedule", got.Spec.Taints)
	}
	controllertest.Eventually(t, "a Synced event", func() (bool, string) {
		ev := f.recorder.WithReason("Synced")
		return slices.Equal(ev, []string{"Normal Synced Node synced successfully"}), fmt.Sprint(f.recorder.Events())
	})
}

// A Node whose machine the cloud does not know keeps its taint, and is
// retried with back-off: once the machine exists, it is initialized.
func TestNodeWithoutMachineKeepsItsTaintUntilTheMachineExists(t *testing.T) {
	f := newFixture(t)
	f.register("node-2", "", true, nil)
	f.run(Options{}, nil)

	controllertest.Eventually(t, "node-2 to be retried", func() (bool, string) {
		n := f.ctrl.queue.NumRequeues("node-2")
		return n >= 2, fmt.Sprintf("%d retries", n)
	})
	got := f.get("node-2")
	if !hasCloudTaint(got) || got.Spec.ProviderID != "" || len(got.Labels) > 0 {
		t.Fatalf("a node without a machine was changed: taints %v, providerID %q, labels %v", got.Spec.Taints, got.Spec.ProviderID, got.Labels)
	}
	if ev := f.recorder.Events(); len(ev) != 0 {
		t.Errorf("events %v, want none", ev)
	}

	f.machine(sim.InstanceSpec{Name: "node-2", Zone: "zone-c"})
	f.waitNode("node-2", "node-2 initialized once its machine exists", func(n *corev1.Node) (bool, string) {
		return !hasCloudTaint(n) && n.Spec.ProviderID == "sim://zone-c/node-2" && n.Labels[corev1.LabelTopologyZone] == "zone-c",
			fmt.Sprintf("taints %v, providerID %q, labels %v", n.Spec.Taints, n.Spec.ProviderID, n.Labels)
	})
}

// Every NodeStatusUpdateFrequency, an initialized Node's addresses are
// brought back to its machine's; a Node still tainted is left to the
// initialization.
func TestAddressesAreRefreshedEveryPeriod(t *testing.T) {
	f := newFixture(t)
	in := f.machine(sim.InstanceSpec{Name: "node-3", Addresses: []sim.Address{{Type: "InternalIP", Address: "10.0.0.7"}}})
	f.register("node-3", in.ProviderID, false, nil, addr(corev1.NodeInternalIP, "127.0.0.3"), addr(corev1.NodeHostName, "node-3"))
	clk := clock.NewFake(time.Now())
	const every = 5 * time.Minute
	f.run(Options{NodeStatusUpdateFrequency: every}, clk)

	f.waitRefresh() // the first, at start
	want := []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.7"), addr(corev1.NodeHostName, "node-3")}
	if got := f.get("node-3").Status.Addresses; !sameAddresses(got, want) {
		t.Fatalf("after the first refresh: addresses %v, want %v", got, want)
	}

	// Someone writes a stale address; it stays until the next period.
	node := f.get("node-3")
	node.Status.Addresses = []corev1.NodeAddress{addr(corev1.NodeInternalIP, "127.0.0.3"), addr(corev1.NodeHostName, "node-3")}
	stale, err := f.nodes.UpdateStatus(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the controller to see the stale address", func() (bool, string) {
		got, err := f.ctrl.lister.Get("", "node-3")
		return err == nil && got.ResourceVersion == stale.ResourceVersion, ""
	})
	controllertest.Eventually(t, "the refresh loop to wait for its next period", func() (bool, string) {
		return len(clk.Waiters()) > 0, ""
	})
	if got := f.get("node-3").Status.Addresses; got[0].Address != "127.0.0.3" {
		t.Fatalf("addresses %v changed before the period was over", got)
	}
	clk.Step(every)
	f.waitRefresh()
	if got := f.get("node-3").Status.Addresses; !sameAddresses(got, want) {
		t.Fatalf("after the next refresh: addresses %v, want %v", got, want)
	}
}

// An initialized Node whose GA label disagrees with (or lacks) its beta
// twin gets the beta label's value.
func TestGALabelsFollowTheirBetaTwins(t *testing.T) {
	f := newFixture(t)
	f.register("node-4", "sim://sim-a/node-4", false, map[string]string{
		corev1.LabelFailureDomainBetaZone: "zone-a",
		corev1.LabelTopologyZone:          "zone-z",
		corev1.LabelInstanceType:          "sim.small",
	})
	f.run(Options{}, nil)
	f.waitNode("node-4", "GA labels set from the beta ones", func(n *corev1.Node) (bool, string) {
		return n.Labels[corev1.LabelTopologyZone] == "zone-a" && n.Labels[corev1.LabelInstanceTypeStable] == "sim.small", fmt.Sprint(n.Labels)
	})
	if got := f.get("node-4").Labels; got[corev1.LabelFailureDomainBetaZone] != "zone-a" || len(got) != 4 {
		t.Errorf("labels %v: the beta labels stay, nothing else is added", got)
	}
}
