package kubelet

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
)

// TestNodeStatusWrittenOnChangeOrAtReportFrequency follows kube's
// kubelet: the Lease is renewed every HeartbeatInterval, the node status is
// computed every StatusUpdateInterval but written only when it changed or
// NodeStatusReportFrequency has passed since it was last written.
func TestNodeStatusWrittenOnChangeOrAtReportFrequency(t *testing.T) {
	rc := newClient(t)
	const (
		every  = 10 * time.Second
		report = 5 * time.Minute
	)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	k := startKubelet(t, rc, "node-1", func(o *Options) {
		o.Clock = fake
		o.HeartbeatInterval, o.StatusUpdateInterval, o.NodeStatusReportFrequency = every, every, report
	})
	nodes := client.For[*corev1.Node](rc)
	get := func() *corev1.Node {
		t.Helper()
		node, err := nodes.Get(context.Background(), "", "node-1")
		if err != nil {
			t.Fatal(err)
		}
		return node
	}
	// tick moves the clock one interval on, once the heartbeat loop waits
	// for it, and returns once the loop has done that beat's work (the
	// Lease renewed, the status looked at) and waits for the next.
	now := start
	tick := func() {
		t.Helper()
		waitFor(t, "the heartbeat loop to wait for "+now.Add(every).String(), func() (bool, error) {
			return slices.Contains(fake.Waiters(), now.Add(every)), nil
		})
		now = now.Add(every)
		fake.SetTime(now)
		waitFor(t, "the beat at "+now.String(), func() (bool, error) {
			renewed, err := leaseRenewTime(rc, "node-1")
			return err == nil && renewed.Equal(now) && slices.Contains(fake.Waiters(), now.Add(every)), err
		})
	}

	waitFor(t, "the first node status", func() (bool, error) {
		node, err := nodes.Get(context.Background(), "", "node-1")
		return err == nil && readyHeartbeat(node).Equal(start), err
	})
	first := get()
	written := start
	// Nothing changes: the status is not written again until the report
	// frequency has passed, though the Lease is renewed at every beat.
	for now.Add(every).Before(written.Add(report)) {
		tick()
	}
	if got := get(); got.ResourceVersion != first.ResourceVersion {
		t.Fatalf("status rewritten at %v with nothing changed (heartbeat %v)", now.Sub(start), readyHeartbeat(got))
	}
	tick() // the report frequency has passed
	if got := readyHeartbeat(get()); !got.Equal(now) {
		t.Fatalf("after %v the status heartbeat is %v, want %v", now.Sub(start), got, now)
	}
	written = now

	// Someone else changes a condition the kubelet owns: the next beat
	// writes the kubelet's word at once.
	patch := `{"status":{"conditions":[{"type":"MemoryPressure","status":"True","reason":"Test","message":"set by the test"}]}}`
	changed, err := nodes.Patch(context.Background(), "", "node-1", types.StrategicMergePatchType, []byte(patch), "status")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the kubelet's cache to see the change", func() (bool, error) {
		node, err := k.nodeLister.Get("", "node-1")
		return err == nil && node.ResourceVersion == changed.ResourceVersion, nil
	})
	tick()
	node := get()
	if c := nodeCondition(node, corev1.NodeMemoryPressure); c == nil || c.Status != corev1.ConditionFalse || !c.LastHeartbeatTime.Time.Equal(now) {
		t.Fatalf("a beat after the change, MemoryPressure is %+v, want False at %v", c, now)
	}
	if now.Sub(written) >= report {
		t.Fatal("the test reached the report frequency; the write proves nothing")
	}
}

func nodeCondition(node *corev1.Node, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == typ {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}
