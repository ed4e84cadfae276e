package nodelifecycle

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A node whose heartbeats stop goes Unknown after the grace period and is
// tainted unreachable:NoExecute; its pods leave as their tolerations say;
// when its heartbeats come back, the taints go.
func TestSilentNodeIsTaintedAndItsPodsEvicted(t *testing.T) {
	f := newFixture(t)
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		f.createNode(n)
	}
	f.createPod("defaults", "node-2") // gets the API server's 300s tolerations
	f.createPod("two-seconds", "node-2", corev1.Toleration{
		Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr[int64](2),
	})
	f.createPod("forever", "node-2", corev1.Toleration{
		Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
	})
	f.createPod("elsewhere", "node-1")
	f.run() // first pass at T0: every node heard from now

	// node-1 and node-3 keep renewing their Leases; node-2 is silent.
	// At T0+40s it is not late yet: the grace period is not over.
	for range grace / period {
		f.heartbeat("node-1", "node-3")
		f.pass(period)
	}
	if got := readyStatus(&f.node("node-2").Status); got != corev1.ConditionTrue {
		t.Fatalf("node-2 Ready = %s at T0+40s, before the grace period is over", got)
	}
	f.heartbeat("node-1", "node-3")
	f.pass(period) // T0+45s
	markedAt := f.clock.Now()

	node := f.node("node-2")
	for _, typ := range unknownConditions {
		c := condition(&node.Status, typ)
		if c == nil || c.Status != corev1.ConditionUnknown {
			t.Errorf("node-2 %s = %+v, want Unknown", typ, c)
		}
	}
	if c := readyCondition(&node.Status); c.Reason != "NodeStatusUnknown" || c.Message != "Kubelet stopped posting node status." ||
		!c.LastTransitionTime.Time.Equal(markedAt) {
		t.Errorf("node-2 Ready = %+v", c)
	}
	var taint *corev1.Taint
	for i := range node.Spec.Taints {
		if sameTaint(node.Spec.Taints[i], unreachableNoExecute) {
			taint = &node.Spec.Taints[i]
		}
	}
	if taint == nil || taint.TimeAdded == nil || !taint.TimeAdded.Time.Equal(markedAt) {
		t.Fatalf("node-2 taints = %+v, want unreachable:NoExecute added at T0+45s", node.Spec.Taints)
	}
	f.waitLog("node-2 no heartbeat for 45s (grace 40s) → Ready=Unknown, taint unreachable:NoExecute")
	f.waitTaint("node-2", corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule, true)
	for _, n := range []string{"node-1", "node-3"} {
		if len(f.node(n).Spec.Taints) != 0 || readyStatus(&f.node(n).Status) != corev1.ConditionTrue {
			t.Errorf("%s, which kept renewing its Lease, was touched: %+v", n, f.node(n))
		}
	}
	if got := f.events("NodeNotReady"); len(got) != 1 || got[0] != "Normal NodeNotReady Node node-2 status is now: NodeNotReady" {
		t.Errorf("NodeNotReady events = %q", got)
	}

	// The record keeps the last heartbeat (T0) and the transition (T0+45s).
	h := f.ctrl.nodeHealth("node-2")
	if !h.probeTimestamp.Equal(f.start) || !h.readyTransitionTimestamp.Equal(markedAt) {
		t.Errorf("node-2 record: probe T0+%v, transition T0+%v; want T0, T0+45s",
			f.since(h.probeTimestamp), f.since(h.readyTransitionTimestamp))
	}
	if h := f.ctrl.nodeHealth("node-1"); !h.probeTimestamp.Equal(markedAt) {
		t.Errorf("node-1 probe T0+%v, want T0+45s (its last renewal was seen then)", f.since(h.probeTimestamp))
	}

	// Evictions: two-seconds at T0+47s, defaults at T0+345s, forever never.
	waitFor(t, "evictions scheduled", func() (bool, string) {
		a, okA := f.scheduledAt("two-seconds")
		b, okB := f.scheduledAt("defaults")
		return okA && okB, fmt.Sprintf("two-seconds %v %v, defaults %v %v", f.since(a), okA, f.since(b), okB)
	})
	if at, _ := f.scheduledAt("two-seconds"); !at.Equal(markedAt.Add(2 * time.Second)) {
		t.Errorf("two-seconds evicted at T0+%v, want T0+47s", f.since(at))
	}
	if at, _ := f.scheduledAt("defaults"); !at.Equal(markedAt.Add(300 * time.Second)) {
		t.Errorf("defaults evicted at T0+%v, want T0+345s", f.since(at))
	}
	f.waitLog(fmt.Sprintf("default/two-seconds (on node-2) tolerates unreachable for 2s → evict at %s",
		markedAt.Add(2*time.Second).Format(time.TimeOnly)))

	f.clock.Step(time.Second) // T0+46s
	if f.evicted("two-seconds") {
		t.Fatal("two-seconds evicted 1s into its 2s toleration")
	}
	f.clock.Step(time.Second) // T0+47s
	waitFor(t, "two-seconds evicted", func() (bool, string) { return f.evicted("two-seconds"), "" })
	if f.evicted("defaults") || f.evicted("forever") {
		t.Fatal("defaults or forever evicted with two-seconds")
	}

	for f.clock.Now().Before(markedAt.Add(300 * time.Second)) { // to T0+347s
		f.heartbeat("node-1", "node-3")
		f.pass(20 * time.Second)
	}
	waitFor(t, "defaults evicted after 300s", func() (bool, string) { return f.evicted("defaults"), "" })
	if f.evicted("forever") || f.evicted("elsewhere") {
		t.Error("forever or elsewhere evicted")
	}
	if _, ok := f.scheduledAt("forever"); ok {
		t.Error("an eviction is scheduled for forever")
	}
	for _, pod := range []string{"two-seconds", "defaults"} {
		want := "Normal TaintManagerEviction Marking for deletion Pod default/" + pod
		waitFor(t, "event "+want, func() (bool, string) {
			return len(f.events(want)) == 1, fmt.Sprint(f.recorder.Events())
		})
	}

	// node-2's kubelet comes back.
	f.setReady("node-2")
	f.heartbeat("node-1", "node-3")
	f.pass(period)
	backAt := f.clock.Now()
	waitFor(t, "node-2 untainted", func() (bool, string) {
		n := f.node("node-2")
		return len(n.Spec.Taints) == 0, taintNames(n.Spec.Taints)
	})
	f.waitLog("node-2 Ready=True → remove taint unreachable:NoExecute")
	if h := f.ctrl.nodeHealth("node-2"); !h.probeTimestamp.Equal(backAt) || !h.readyTransitionTimestamp.Equal(backAt) {
		t.Errorf("node-2 record after coming back: probe T0+%v, transition T0+%v; want both T0+%v",
			f.since(h.probeTimestamp), f.since(h.readyTransitionTimestamp), f.since(backAt))
	}
	if f.evicted("forever") {
		t.Error("forever evicted")
	}
}

// Any NoExecute taint evicts the pods that do not tolerate it at once; a
// scheduled eviction is cancelled when the taint goes.
func TestNoExecuteTaintEvictsIntolerantPods(t *testing.T) {
	f := newFixture(t)
	f.createNode("node-1")
	f.createPod("intolerant", "node-1")
	f.createPod("patient", "node-1", corev1.Toleration{
		Key: "example.com/maintenance", Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr[int64](10),
	})
	f.createPod("loyal", "node-1", corev1.Toleration{Key: "example.com/maintenance", Operator: corev1.TolerationOpEqual, Value: "true"})
	f.run()

	// Someone (a cluster admin) drains the node with a taint.
	node := f.node("node-1")
	added := metav1.NewTime(f.clock.Now())
	node.Spec.Taints = []corev1.Taint{{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}}
	if _, err := f.nodes.Update(ctx(t), node); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "intolerant evicted", func() (bool, string) { return f.evicted("intolerant"), "" })
	f.waitLog("default/intolerant (on node-1) does not tolerate example.com/maintenance=true:NoExecute → evict now")
	waitFor(t, "patient's eviction scheduled", func() (bool, string) {
		at, ok := f.scheduledAt("patient")
		return ok && at.Equal(added.Add(10*time.Second)), fmt.Sprintf("%v %v", f.since(at), ok)
	})

	// The admin changes their mind within patient's 10s.
	f.clock.Step(5 * time.Second)
	node = f.node("node-1")
	node.Spec.Taints = nil
	if _, err := f.nodes.Update(ctx(t), node); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "patient's eviction cancelled", func() (bool, string) {
		_, ok := f.scheduledAt("patient")
		return !ok, ""
	})
	if got := f.events("Cancelling deletion of Pod default/patient"); len(got) != 1 {
		t.Errorf("events %q, want one cancellation for patient", f.recorder.Events())
	}
	f.heartbeat("node-1")
	f.pass(10 * time.Second) // past the 10s
	if f.evicted("patient") || f.evicted("loyal") {
		t.Error("patient or loyal evicted")
	}
}

// When no node at all is Ready, the controller blames itself: it removes
// its NoExecute taints and evicts nothing, until a node is Ready again;
// then it taints again, at the eviction rate.
func TestFullDisruptionPausesEvictions(t *testing.T) {
	f := newFixture(t)
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		f.createNode(n)
	}
	f.createPod("web", "node-1")
	f.run()
	f.waitLog(`zone "" → Normal: 0/3 nodes not ready; NoExecute taints at most 0.1 nodes/s`)

	// node-1 goes silent first: a Normal zone, so it is tainted.
	for range grace/period + 1 {
		f.heartbeat("node-2", "node-3")
		f.pass(period)
	} // T0+45s
	f.waitTaint("node-1", corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute, true)
	waitFor(t, "web's eviction scheduled", func() (bool, string) {
		_, ok := f.scheduledAt("web")
		return ok, ""
	})

	// Then every node does: last heard at T0+45s, Unknown at T0+90s.
	for range grace/period + 1 {
		f.pass(period)
	}
	f.waitLog(`zone "" → FullDisruption: 3/3 nodes not ready; evictions paused`)
	if s := f.ctrl.zoneState(""); s != stateFullDisruption {
		t.Fatalf("zone state %s", s)
	}
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		if got := readyStatus(&f.node(n).Status); got != corev1.ConditionUnknown {
			t.Errorf("%s Ready = %s, want Unknown", n, got)
		}
	}
	f.waitTaint("node-1", corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute, false)
	waitFor(t, "web's eviction cancelled", func() (bool, string) {
		_, ok := f.scheduledAt("web")
		return !ok, ""
	})

	// Far past web's 300s: nothing is tainted, nothing evicted.
	for range 20 {
		f.pass(20 * time.Second)
	}
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		for _, tn := range f.node(n).Spec.Taints {
			if tn.Effect == corev1.TaintEffectNoExecute {
				t.Errorf("%s has %s in FullDisruption", n, taintName(tn))
			}
		}
	}
	if f.evicted("web") {
		t.Error("web evicted in FullDisruption")
	}

	// A NoExecute taint of ours that the removal on entering FullDisruption
	// did not see (added just before, while the cache was behind) goes on
	// the next pass that sees it.
	stray := f.node("node-2")
	stray.Spec.Taints = append(stray.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute})
	written, err := f.nodes.Update(ctx(t), stray)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the controller to see node-2's stray taint", func() (bool, string) {
		got, err := f.ctrl.nodeLister.Get("", "node-2")
		return err == nil && got.ResourceVersion == written.ResourceVersion, ""
	})
	f.pass(period)
	f.waitTaint("node-2", corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute, false)

	// node-3 is back: 2/3 not ready is Normal again. One node is tainted
	// at once, the next 10s later (0.1 nodes/s).
	f.setReady("node-3")
	f.pass(period)
	f.waitLog(`zone "" → Normal: 2/3 nodes not ready; NoExecute taints at most 0.1 nodes/s`)
	f.waitTaint("node-1", corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute, true)
	f.waitLog(`node-2 Ready=Unknown → taint unreachable:NoExecute waits its turn (zone "": NoExecute taints at most 0.1 nodes/s)`)
	if f.hasTaintNow("node-2", corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) {
		t.Fatal("node-2 tainted in the same second as node-1")
	}
	f.heartbeat("node-3")
	f.pass(period)
	if f.hasTaintNow("node-2", corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) {
		t.Fatal("node-2 tainted 5s after node-1")
	}
	f.heartbeat("node-3")
	f.pass(period)
	f.waitTaint("node-2", corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute, true)
	f.waitLog("node-2 Ready=Unknown → taint unreachable:NoExecute")
	if strings.Contains(f.logs.String(), "node-3 Ready=Unknown → taint unreachable:NoExecute") ||
		f.hasTaintNow("node-3", corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) {
		t.Error("node-3, which is back, was tainted")
	}
}
