package cloudnodelifecycle

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// A not-Ready Node whose machine is deleted from the cloud is deleted, with
// kube's event; a Ready Node whose machine is deleted is not, as in kube:
// the controller asks the cloud only about Nodes that are not Ready.
func TestNotReadyNodeWhoseMachineIsGoneIsDeleted(t *testing.T) {
	f := newFixture(t)
	down := f.machine("node-down", corev1.ConditionFalse)
	up := f.machine("node-up", corev1.ConditionTrue)
	unknown := f.machine("node-unknown", corev1.ConditionUnknown)
	f.machine("node-kept", corev1.ConditionFalse) // not ready, machine still there
	f.run()
	f.passes(1)
	for _, name := range []string{"node-down", "node-up", "node-unknown", "node-kept"} {
		if !f.exists(name) {
			t.Fatalf("%s deleted while its machine exists", name)
		}
	}

	for _, in := range []string{down.ID, up.ID, unknown.ID} {
		if err := f.cloud.DeleteInstance(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	controllertest.Eventually(t, "node-down and node-unknown deleted", func() (bool, string) {
		return !f.exists("node-down") && !f.exists("node-unknown"), ""
	})
	want := []string{
		"Normal DeletingNode Deleting node node-down because it does not exist in the cloud provider",
		"Normal DeletingNode Deleting node node-unknown because it does not exist in the cloud provider",
	}
	got := f.recorder.WithReason("DeletingNode")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}

	f.passes(2)
	if !f.exists("node-up") {
		t.Error("node-up deleted: a Ready node is never deleted, whatever the cloud says")
	}
	if !f.exists("node-kept") {
		t.Error("node-kept deleted, though its machine exists")
	}

	// The kubelet of node-up stops posting: now it goes too.
	f.setReady("node-up", corev1.ConditionUnknown)
	controllertest.Eventually(t, "node-up deleted once not Ready", func() (bool, string) { return !f.exists("node-up"), "" })
}

// A not-Ready Node whose machine is stopped gets the shutdown taint, and
// keeps it, even once the machine runs again, until the Node is Ready.
func TestStoppedMachinesNodeIsTaintedUntilReady(t *testing.T) {
	f := newFixture(t)
	in := f.machine("node-1", corev1.ConditionTrue)
	f.run()

	if _, err := f.cloud.StopInstance(context.Background(), in.ID); err != nil {
		t.Fatal(err)
	}
	f.passes(2)
	if f.shutdownTainted("node-1") {
		t.Fatal("a Ready node was tainted: the cloud is asked only about nodes that are not Ready")
	}

	f.setReady("node-1", corev1.ConditionUnknown) // its kubelet went silent with the machine
	controllertest.Eventually(t, "the shutdown taint", func() (bool, string) {
		n := f.get("node-1")
		return hasTaint(n, shutdownTaint), fmt.Sprint(n.Spec.Taints)
	})
	if !f.exists("node-1") {
		t.Fatal("a stopped machine's node was deleted: a stopped machine exists")
	}

	if _, err := f.cloud.StartInstance(context.Background(), in.ID); err != nil {
		t.Fatal(err)
	}
	f.passes(2)
	if !f.shutdownTainted("node-1") {
		t.Fatal("the taint came off before the node was Ready")
	}

	f.setReady("node-1", corev1.ConditionTrue)
	controllertest.Eventually(t, "the shutdown taint removed", func() (bool, string) {
		n := f.get("node-1")
		return !hasTaint(n, shutdownTaint), fmt.Sprint(n.Spec.Taints)
	})
}
