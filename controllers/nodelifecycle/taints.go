package nodelifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
)

// The NoExecute taints the controller adds, as Ready asks.
var (
	notReadyNoExecute    = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}
	unreachableNoExecute = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
)

// noExecuteFor returns the NoExecute taint a Ready status asks for, and
// the other one, which it excludes; ok is false when Ready asks for none.
func noExecuteFor(ready corev1.ConditionStatus) (want, other corev1.Taint, ok bool) {
	switch ready {
	case corev1.ConditionFalse:
		return notReadyNoExecute, unreachableNoExecute, true
	case corev1.ConditionUnknown:
		return unreachableNoExecute, notReadyNoExecute, true
	}
	return corev1.Taint{}, corev1.Taint{}, false
}

// conditionTaints maps a condition and its status to the NoSchedule taint
// they put on a node (upstream's TaintNodesByCondition).
var conditionTaints = map[corev1.NodeConditionType]map[corev1.ConditionStatus]string{
	corev1.NodeReady: {
		corev1.ConditionFalse:   corev1.TaintNodeNotReady,
		corev1.ConditionUnknown: corev1.TaintNodeUnreachable,
	},
	corev1.NodeMemoryPressure:     {corev1.ConditionTrue: corev1.TaintNodeMemoryPressure},
	corev1.NodeDiskPressure:       {corev1.ConditionTrue: corev1.TaintNodeDiskPressure},
	corev1.NodePIDPressure:        {corev1.ConditionTrue: corev1.TaintNodePIDPressure},
	corev1.NodeNetworkUnavailable: {corev1.ConditionTrue: corev1.TaintNodeNetworkUnavailable},
}

// noScheduleKeys are the keys of the NoSchedule taints the controller
// owns: those of conditionTaints, and unschedulable.
var noScheduleKeys = map[string]bool{
	corev1.TaintNodeNotReady:           true,
	corev1.TaintNodeUnreachable:        true,
	corev1.TaintNodeMemoryPressure:     true,
	corev1.TaintNodeDiskPressure:       true,
	corev1.TaintNodePIDPressure:        true,
	corev1.TaintNodeNetworkUnavailable: true,
	corev1.TaintNodeUnschedulable:      true,
}

// wantNoSchedule returns the keys of the NoSchedule taints node's
// conditions and spec.unschedulable ask for.
func wantNoSchedule(node *corev1.Node) map[string]bool {
	want := map[string]bool{}
	for _, c := range node.Status.Conditions {
		if key, ok := conditionTaints[c.Type][c.Status]; ok {
			want[key] = true
		}
	}
	if node.Spec.Unschedulable {
		want[corev1.TaintNodeUnschedulable] = true
	}
	return want
}

// ownedNoSchedule reports whether t is a NoSchedule taint the controller
// owns.
func ownedNoSchedule(t corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule && noScheduleKeys[t.Key]
}

// withNoSchedule returns the taints function that replaces a node's owned
// NoSchedule taints by those its conditions ask for: a taint kept keeps
// its place (and its timeAdded), a new one is appended with timeAdded now,
// as upstream's SwapNodeControllerTaint stamps every taint it adds.
func withNoSchedule(now time.Time) func(*corev1.Node) []corev1.Taint {
	return func(node *corev1.Node) []corev1.Taint {
		want := wantNoSchedule(node)
		var out []corev1.Taint
		for _, t := range node.Spec.Taints {
			if ownedNoSchedule(t) {
				if !want[t.Key] {
					continue
				}
				delete(want, t.Key)
			}
			out = append(out, t)
		}
		added := metav1.NewTime(now)
		for _, key := range slices.Sorted(maps.Keys(want)) {
			out = append(out, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &added})
		}
		return out
	}
}

// syncNoScheduleTaints makes a node's owned NoSchedule taints match its
// conditions.
func (c *Controller) syncNoScheduleTaints(ctx context.Context, name string) error {
	node, err := c.nodeLister.Get("", name)
	if apierrors.IsNotFound(err) {
		return nil // the node is gone; so are its taints
	}
	if err != nil {
		return err
	}
	base, written, err := c.updateTaints(ctx, node, withNoSchedule(c.clock.Now()))
	if err != nil || written == nil {
		return err
	}
	added, removed := taintDiff(base.Spec.Taints, written.Spec.Taints)
	ready := readyText(readyStatus(&written.Status))
	c.log.Info(fmt.Sprintf("Ready=%s → %s", ready, describeChange(added, removed)),
		slog.String("object", name), slog.String("ready", ready),
		slog.Any("added", taintNameList(added)), slog.Any("removed", taintNameList(removed)))
	return nil
}

// processTaintBasedEviction puts on node the NoExecute taint its Ready
// status asks for: a swap between not-ready and unreachable is done at
// once; a first taint waits its turn in the zone's queue; Ready True
// removes both.
func (c *Controller) processTaintBasedEviction(ctx context.Context, node *corev1.Node, ready corev1.ConditionStatus, plog *passLog) {
	if ready == corev1.ConditionTrue {
		c.unqueue(node.Name)
		if removed := c.removeNoExecuteTaints(ctx, node, ""); len(removed) > 0 {
			plog.add(node.Name, ready, "remove taint "+taintNames(removed))
		}
		return
	}
	want, other, ok := noExecuteFor(ready)
	if !ok {
		return // no Ready condition yet: the grace period will give it one
	}
	switch {
	case hasTaint(node.Spec.Taints, other):
		// Already tainted for the other reason: swap now, no rate limit.
		c.unqueue(node.Name)
		if _, _, err := c.updateTaints(ctx, node, swapNoExecute(want, c.clock.Now())); err != nil {
			c.log.Error(fmt.Sprintf("cannot swap %s for %s; will try on the next pass", taintName(other), taintName(want)),
				slog.String("object", node.Name), slog.Any("err", err))
			return
		}
		plog.add(node.Name, ready, fmt.Sprintf("taint %s instead of %s", taintName(want), taintName(other)))
	case !hasTaint(node.Spec.Taints, want):
		c.mu.Lock()
		z, ok := c.zones[zoneOf(node)]
		if ok && z.queue(node.Name) {
			plog.queued[node.Name] = want
		}
		c.mu.Unlock()
	}
}

// taintingPass adds the NoExecute taints of the queued nodes, zone by
// zone and first come first served, as far as each zone's rate allows. It
// logs through plog, or on its own when plog is nil (between passes).
func (c *Controller) taintingPass(ctx context.Context, now time.Time, plog *passLog) {
	if plog == nil {
		plog = newPassLog()
		defer plog.flush(c)
	}
	c.mu.Lock()
	names := slices.Sorted(maps.Keys(c.zones))
	c.mu.Unlock()
	for _, name := range names {
		c.mu.Lock()
		z, ok := c.zones[name]
		c.mu.Unlock()
		if !ok {
			continue
		}
		for c.taintNext(ctx, z, now, plog) {
		}
	}
}

// taintNext taints the first node of z's queue, if the rate allows, or
// drops it if it no longer needs a taint. It reports whether to go on
// with the next.
func (c *Controller) taintNext(ctx context.Context, z *zone, now time.Time, plog *passLog) bool {
	c.mu.Lock()
	if len(z.pending) == 0 {
		c.mu.Unlock()
		return false
	}
	name := z.pending[0]
	h := c.health[name]
	c.mu.Unlock()
	pop := func() {
		c.mu.Lock()
		z.pending = slices.DeleteFunc(z.pending, func(n string) bool { return n == name })
		c.mu.Unlock()
	}

	node, err := c.nodeLister.Get("", name)
	if h == nil || err != nil {
		pop() // gone
		return true
	}
	ready := readyStatus(h.status)
	want, other, ok := noExecuteFor(ready)
	if !ok || (hasTaint(node.Spec.Taints, want) && !hasTaint(node.Spec.Taints, other)) {
		pop() // Ready again, or tainted already
		return true
	}
	c.mu.Lock()
	allowed := z.limiter.take(now)
	c.mu.Unlock()
	if !allowed {
		return false
	}
	if _, _, err := c.updateTaints(ctx, node, swapNoExecute(want, now)); err != nil {
		c.log.Error(fmt.Sprintf("cannot add taint %s; will try again", taintName(want)),
			slog.String("object", name), slog.Any("err", err))
		return false
	}
	pop()
	delete(plog.queued, name)
	c.metrics.evictions.WithLabelValues(z.name).Inc()
	plog.add(name, ready, "taint "+taintName(want))
	return true
}

// explainWaiting adds to plog why the nodes it queued are not tainted yet.
func (c *Controller) explainWaiting(plog *passLog) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(plog.queued)) {
		want := plog.queued[name]
		for _, z := range c.zones {
			if !slices.Contains(z.pending, name) {
				continue
			}
			var ready corev1.ConditionStatus
			if h := c.health[name]; h != nil {
				ready = readyStatus(h.status)
			}
			why := fmt.Sprintf("taint %s waits its turn (zone %q: %s)", taintName(want), z.name, c.rateStory(z))
			plog.add(name, ready, why)
		}
	}
}

// nextTaintingWake returns when a queued node may next be tainted, or the
// zero time if none is waiting for a token.
func (c *Controller) nextTaintingWake(now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var wake time.Time
	for _, z := range c.zones {
		if len(z.pending) == 0 {
			continue
		}
		if t := z.limiter.next(now); !t.IsZero() && (wake.IsZero() || t.Before(wake)) {
			wake = t
		}
	}
	return wake
}

// unqueue takes node out of every zone's queue.
func (c *Controller) unqueue(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, z := range c.zones {
		z.pending = slices.DeleteFunc(z.pending, func(n string) bool { return n == node })
	}
}

// isControllerNoExecute reports whether t is a NoExecute taint the
// controller adds: not-ready or unreachable.
func isControllerNoExecute(t corev1.Taint) bool {
	return sameTaint(t, notReadyNoExecute) || sameTaint(t, unreachableNoExecute)
}

// removeNoExecuteTaints removes the controller's NoExecute taints from
// node and returns those it removed; why, if set, is logged with them.
func (c *Controller) removeNoExecuteTaints(ctx context.Context, node *corev1.Node, why string) []corev1.Taint {
	base, written, err := c.updateTaints(ctx, node, func(n *corev1.Node) []corev1.Taint {
		return slices.DeleteFunc(slices.Clone(n.Spec.Taints), isControllerNoExecute)
	})
	if err != nil {
		c.log.Error("cannot remove NoExecute taints; will try on the next pass",
			slog.String("object", node.Name), slog.Any("err", err))
		return nil
	}
	if written == nil {
		return nil
	}
	_, removed := taintDiff(base.Spec.Taints, written.Spec.Taints)
	if why != "" && len(removed) > 0 {
		c.log.Info(fmt.Sprintf("%s → remove taint %s", why, taintNames(removed)),
			slog.String("object", node.Name), slog.Any("removed", taintNameList(removed)))
	}
	return removed
}

// swapNoExecute returns the taints function that puts want on a node (with
// timeAdded now, unless it is there already) and takes the other
// controller NoExecute taint off.
func swapNoExecute(want corev1.Taint, now time.Time) func(*corev1.Node) []corev1.Taint {
	return func(n *corev1.Node) []corev1.Taint {
		out := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool {
			return (sameTaint(t, notReadyNoExecute) || sameTaint(t, unreachableNoExecute)) && !sameTaint(t, want)
		})
		if !hasTaint(out, want) {
			t := want
			added := metav1.NewTime(now)
			t.TimeAdded = &added
			out = append(out, t)
		}
		return out
	}
}

// updateTaints writes the taints taintsFor returns for node, unless they
// are node's already. It returns the node it wrote and the state of the
// node that write replaced (written is nil when nothing was written: no
// change, or the node is gone). On a conflict it reads the node again and
// asks taintsFor again.
func (c *Controller) updateTaints(ctx context.Context, node *corev1.Node, taintsFor func(*corev1.Node) []corev1.Taint) (base, written *corev1.Node, err error) {
	for attempt := 1; ; attempt++ {
		want := taintsFor(node)
		if (len(want) == 0 && len(node.Spec.Taints) == 0) || apiequality.Semantic.DeepEqual(want, node.Spec.Taints) {
			return node, nil, nil
		}
		cp := node.DeepCopy()
		cp.Spec.Taints = want
		out, err := c.nodes.Update(ctx, cp)
		switch {
		case err == nil:
			return node, out, nil
		case client.IsNotFound(err):
			return node, nil, nil
		case !client.IsConflict(err) || attempt == writeRetries:
			return node, nil, fmt.Errorf("update taints of node %s: %w", node.Name, err)
		}
		name := node.Name
		fresh, err := c.nodes.Get(ctx, "", name)
		if client.IsNotFound(err) {
			return node, nil, nil
		}
		if err != nil {
			return node, nil, fmt.Errorf("get node %s: %w", name, err)
		}
		node = fresh
	}
}

// sameTaint: same key and effect, which is what makes a taint unique on a
// node.
func sameTaint(a, b corev1.Taint) bool { return a.Key == b.Key && a.Effect == b.Effect }

func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(x corev1.Taint) bool { return sameTaint(x, t) })
}

// noExecuteTaints returns node's NoExecute taints.
func noExecuteTaints(node *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

// taintDiff returns the taints of after not in before, and those of before
// not in after.
func taintDiff(before, after []corev1.Taint) (added, removed []corev1.Taint) {
	for _, t := range after {
		if !hasTaint(before, t) {
			added = append(added, t)
		}
	}
	for _, t := range before {
		if !hasTaint(after, t) {
			removed = append(removed, t)
		}
	}
	return added, removed
}

func describeChange(added, removed []corev1.Taint) string {
	var parts []string
	if len(added) > 0 {
		parts = append(parts, "taint "+taintNames(added))
	}
	if len(removed) > 0 {
		parts = append(parts, "remove taint "+taintNames(removed))
	}
	return strings.Join(parts, ", ")
}

// taintName is a taint as the story tells it: "unreachable:NoExecute" for
// node.kubernetes.io/unreachable, "example.com/x=y:NoSchedule" for others.
func taintName(t corev1.Taint) string {
	s := shortKey(t.Key)
	if t.Value != "" {
		s += "=" + t.Value
	}
	return s + ":" + string(t.Effect)
}

func taintNames(ts []corev1.Taint) string { return strings.Join(taintNameList(ts), " ") }

// taintNameList is each taint as the story tells it.
func taintNameList(ts []corev1.Taint) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = taintName(t)
	}
	return names
}

// shortKey drops the node.kubernetes.io/ prefix the well-known taints
// share.
func shortKey(key string) string { return strings.TrimPrefix(key, "node.kubernetes.io/") }
