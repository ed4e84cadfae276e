package nodelifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// zoneState is how much of a zone is down, which decides how fast the
// controller may add NoExecute taints there.
type zoneState string

const (
	// stateInitial: the zone was just seen; its state comes with the
	// pass that saw it.
	stateInitial zoneState = "Initial"
	// stateNormal: few nodes are down; taint at EvictionRate.
	stateNormal zoneState = "Normal"
	// statePartialDisruption: many nodes are down; taint slowly (large
	// zones) or not at all (small ones).
	statePartialDisruption zoneState = "PartialDisruption"
	// stateFullDisruption: no node is ready. Alone, the zone is broken
	// and is tainted at EvictionRate; with every other zone, the
	// controller itself is probably cut off, and taints nothing.
	stateFullDisruption zoneState = "FullDisruption"
)

// zoneOf is the zone a node counts in, under kube's zone key: its region
// and zone labels (topology.kubernetes.io/, or the beta
// failure-domain.beta.kubernetes.io/ ones when the GA ones are missing)
// joined by ":\x00:", so that zones of the same name in two regions are
// two zones; "" when it has neither. The cloud-node controller sets them
// from the node's machine.
func zoneOf(node *corev1.Node) string {
	zone, ok := node.Labels[corev1.LabelTopologyZone]
	if !ok {
		zone = node.Labels[corev1.LabelFailureDomainBetaZone]
	}
	region, ok := node.Labels[corev1.LabelTopologyRegion]
	if !ok {
		region = node.Labels[corev1.LabelFailureDomainBetaRegion]
	}
	if zone == "" && region == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

// computeZoneState returns how many of a zone's nodes are not ready (Ready
// False, Unknown or missing) and the zone's state: FullDisruption when
// none is ready, PartialDisruption when more than 2 and at least threshold
// of them are not ready, Normal otherwise.
func computeZoneState(ready []corev1.ConditionStatus, threshold float64) (notReady int, state zoneState) {
	for _, r := range ready {
		if r != corev1.ConditionTrue {
			notReady++
		}
	}
	switch {
	case notReady > 0 && notReady == len(ready):
		return notReady, stateFullDisruption
	case notReady > 2 && float64(notReady)/float64(len(ready)) >= threshold:
		return notReady, statePartialDisruption
	}
	return notReady, stateNormal
}

// tokenBucket is a rate limit of qps with a burst of one, read against an
// explicit time so that it follows the controller's clock. A qps of 0
// never allows anything.
type tokenBucket struct {
	qps    float64
	tokens float64
	last   time.Time
}

// newTokenBucket returns a bucket that allows one at once.
func newTokenBucket(qps float64, now time.Time) tokenBucket {
	return tokenBucket{qps: qps, tokens: 1, last: now}
}

func (b *tokenBucket) refill(now time.Time) {
	if now.After(b.last) {
		b.tokens = min(1, b.tokens+now.Sub(b.last).Seconds()*b.qps)
		if b.tokens > 1-1e-9 { // forgive float rounding
			b.tokens = 1
		}
		b.last = now
	}
}

// take uses a token if there is one at now.
func (b *tokenBucket) take(now time.Time) bool {
	if b.qps <= 0 {
		return false
	}
	b.refill(now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// next returns when the next token is there: now or later, or the zero
// time for never.
func (b *tokenBucket) next(now time.Time) time.Time {
	if b.qps <= 0 {
		return time.Time{}
	}
	t := *b
	t.refill(now)
	if t.tokens >= 1 {
		return now
	}
	ms := math.Ceil((1 - t.tokens) / t.qps * 1000)
	return now.Add(time.Duration(ms) * time.Millisecond)
}

// zone is what the controller keeps of one zone. The monitor goroutine
// writes it under Controller.mu.
type zone struct {
	name           string
	state          zoneState
	size, notReady int
	limiter        tokenBucket
	// pending are the nodes waiting for a NoExecute taint, first come
	// first served.
	pending []string
}

// queue adds node to the pending nodes unless it is there; it reports
// whether it added it.
func (z *zone) queue(node string) bool {
	if slices.Contains(z.pending, node) {
		return false
	}
	z.pending = append(z.pending, node)
	return true
}

// rateFor is the tainting rate of a zone of size nodes in state.
func (c *Controller) rateFor(state zoneState, size int) float64 {
	if state == statePartialDisruption {
		if size > c.largeClusterNodes {
			return c.secondaryRate
		}
		return 0
	}
	return c.evictionRate
}

// setStateLocked moves z to state, with the rate that goes with it; a
// changed rate starts a fresh bucket.
func (c *Controller) setStateLocked(z *zone, state zoneState, now time.Time) {
	z.state = state
	if q := c.rateFor(state, z.size); q != z.limiter.qps {
		z.limiter = newTokenBucket(q, now)
	}
}

// handleDisruption works out every zone's state from the Ready statuses of
// its nodes, sets each zone's tainting rate, and reports whether every
// zone is in FullDisruption, in which case nothing may be tainted.
//
// On entering that state, and on every pass while it lasts, it removes the
// NoExecute taints the controller adds (not-ready, unreachable) from every
// node: when no node at all can
// be heard, the fault is most likely between the controller and the
// nodes, and evicting everything would only make it worse. On leaving it,
// every node gets a fresh probe time, and so a full grace period.
func (c *Controller) handleDisruption(ctx context.Context, zoneReady map[string][]corev1.ConditionStatus, nodes []*corev1.Node, now time.Time) (allFull bool) {
	type observed struct {
		size, notReady int
		state          zoneState
	}
	seen := make(map[string]observed, len(zoneReady))
	allAreFull := len(zoneReady) > 0
	for name, ready := range zoneReady {
		notReady, state := computeZoneState(ready, c.unhealthyZone)
		seen[name] = observed{len(ready), notReady, state}
		if state != stateFullDisruption {
			allAreFull = false
		}
		c.metrics.setZone(name, len(ready), notReady)
	}

	c.mu.Lock()
	allWereFull := true
	for name := range c.zones {
		if _, ok := seen[name]; !ok {
			delete(c.zones, name)
			c.metrics.deleteZone(name)
		}
	}
	for name, o := range seen {
		z, ok := c.zones[name]
		if !ok {
			z = &zone{name: name, state: stateInitial, limiter: newTokenBucket(c.evictionRate, now)}
			c.zones[name] = z
		}
		z.size, z.notReady = o.size, o.notReady
		if z.state != stateFullDisruption {
			allWereFull = false
		}
	}
	names := slices.Sorted(maps.Keys(c.zones))

	switch {
	case allAreFull && allWereFull:
		c.mu.Unlock()
		// A taint added just before the state changed may have been
		// missing from the cache the first removal read: remove any
		// left, on every pass, until a node is Ready.
		for _, node := range nodes {
			if slices.ContainsFunc(node.Spec.Taints, isControllerNoExecute) {
				c.removeNoExecuteTaints(ctx, node, "every zone in FullDisruption")
			}
		}
		return true

	case allAreFull:
		for _, name := range names {
			z := c.zones[name]
			c.setStateLocked(z, stateFullDisruption, now)
			z.limiter = newTokenBucket(0, now)
			z.pending = nil
			c.logZone(z, "evictions paused")
		}
		c.mu.Unlock()
		c.log.Info("every zone is in FullDisruption → the fault is probably ours; remove the NoExecute taints we added and evict nothing until a node is Ready")
		for _, node := range nodes {
			c.removeNoExecuteTaints(ctx, node, "every zone in FullDisruption")
		}
		return true

	case allWereFull:
		for _, name := range names {
			z := c.zones[name]
			z.limiter = tokenBucket{} // a fresh bucket for the new state
			c.setStateLocked(z, seen[name].state, now)
			c.logZone(z, c.rateStory(z))
		}
		for _, node := range nodes {
			if h := c.health[node.Name]; h != nil {
				fresh := *h
				fresh.probeTimestamp, fresh.readyTransitionTimestamp = now, now
				c.health[node.Name] = &fresh
			}
		}
		c.mu.Unlock()
		c.log.Info("a node is Ready again → leave FullDisruption; every node gets a fresh grace period")
		return false
	}

	for _, name := range names {
		z := c.zones[name]
		if state := seen[name].state; state != z.state {
			c.setStateLocked(z, state, now)
			c.logZone(z, c.rateStory(z))
		}
	}
	c.mu.Unlock()
	return false
}

// logZone logs z's new state: `zone "" → FullDisruption: 3/3 nodes not
// ready; evictions paused`.
func (c *Controller) logZone(z *zone, consequence string) {
	c.log.Info(fmt.Sprintf("zone %q → %s: %d/%d nodes not ready; %s", z.name, z.state, z.notReady, z.size, consequence),
		slog.String("zone", z.name), slog.String("to", string(z.state)), slog.Int("notReady", z.notReady), slog.Int("nodes", z.size))
}

// rateStory says what z's state means for tainting.
func (c *Controller) rateStory(z *zone) string {
	switch {
	case z.limiter.qps > 0:
		return fmt.Sprintf("NoExecute taints at most %g nodes/s", z.limiter.qps)
	case z.state == statePartialDisruption:
		return fmt.Sprintf("no NoExecute taints (zone of %d nodes, not more than %d)", z.size, c.largeClusterNodes)
	}
	return "no NoExecute taints"
}

// zoneState returns the state of zone name ("" if unknown), for tests.
func (c *Controller) zoneState(name string) zoneState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if z, ok := c.zones[name]; ok {
		return z.state
	}
	return ""
}
