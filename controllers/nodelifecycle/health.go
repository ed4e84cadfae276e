package nodelifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
)

// writeRetries is how many times a write of a node (status or taints) is
// tried, reading the node again after each conflict.
const writeRetries = 5

// nodeHealth is what the controller last saw of a node, timed by its own
// clock: the seed's nodeStatusMap entry, upstream's nodeHealthData.
//
// A stored record is never changed in place: the monitor replaces it.
type nodeHealth struct {
	// probeTimestamp is when the controller last saw a heartbeat: a new
	// lastHeartbeatTime on the Ready condition, or a later renewTime on
	// the node's Lease.
	probeTimestamp time.Time
	// readyTransitionTimestamp is when the controller last saw the Ready
	// condition change (its lastTransitionTime move).
	readyTransitionTimestamp time.Time
	// status is the node status as of the last heartbeat seen (or as the
	// controller itself last wrote it).
	status *corev1.NodeStatus
	// lease is the node's Lease as of the last renewal seen; nil if none.
	lease *coordinationv1.Lease
	// everReady: the controller has seen the node Ready. Until then the
	// startup grace period applies.
	everReady bool
}

// observe returns the record of node after looking at it, and at its
// Lease (nil if it has none), at now; saved is the previous record (nil
// for a node not seen before). It is the seed's comparison:
//
//   - first sight, or the Ready condition appearing or vanishing: probe
//     and transition times are now;
//   - a new lastHeartbeatTime: the probe time is now, and the transition
//     time too if Ready's lastTransitionTime moved as well;
//   - no new heartbeat: both stay.
//
// A Lease renewed since the last record moves the probe time to now in
// any case.
func observe(saved *nodeHealth, node *corev1.Node, lease *coordinationv1.Lease, now time.Time) *nodeHealth {
	cur := readyCondition(&node.Status)
	var h nodeHealth
	if saved == nil {
		h = nodeHealth{probeTimestamp: now, readyTransitionTimestamp: now, status: node.Status.DeepCopy()}
	} else {
		h = *saved
		old := readyCondition(saved.status)
		switch {
		case (old == nil) != (cur == nil):
			h.probeTimestamp, h.readyTransitionTimestamp = now, now
			h.status = node.Status.DeepCopy()
		case cur != nil && !cur.LastHeartbeatTime.Equal(&old.LastHeartbeatTime):
			h.probeTimestamp = now
			if !cur.LastTransitionTime.Equal(&old.LastTransitionTime) {
				h.readyTransitionTimestamp = now
			}
			h.status = node.Status.DeepCopy()
		}
	}
	if cur != nil && cur.Status == corev1.ConditionTrue {
		h.everReady = true
	}
	if lease != nil && (h.lease == nil || renewTime(h.lease).Before(renewTime(lease))) {
		h.lease = lease.DeepCopy()
		h.probeTimestamp = now
	}
	return &h
}

func renewTime(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// unknownConditions are the conditions a silent node's kubelet can no
// longer vouch for. NetworkUnavailable is not among them: the network
// plugin, not the kubelet, sets it.
var unknownConditions = []corev1.NodeConditionType{
	corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure,
}

// markUnknown sets node's unknownConditions to Unknown at now, adding the
// ones its kubelet never posted, and reports whether anything changed.
func markUnknown(node *corev1.Node, now metav1.Time) bool {
	changed := false
	for _, typ := range unknownConditions {
		c := condition(&node.Status, typ)
		switch {
		case c == nil:
			node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
				Type:               typ,
				Status:             corev1.ConditionUnknown,
				Reason:             "NodeStatusNeverUpdated",
				Message:            "Kubelet never posted node status.",
				LastHeartbeatTime:  node.CreationTimestamp,
				LastTransitionTime: now,
			})
			changed = true
		case c.Status != corev1.ConditionUnknown:
			c.Status = corev1.ConditionUnknown
			c.Reason = "NodeStatusUnknown"
			c.Message = "Kubelet stopped posting node status."
			c.LastTransitionTime = now
			changed = true
		}
	}
	return changed
}

func condition(st *corev1.NodeStatus, typ corev1.NodeConditionType) *corev1.NodeCondition {
	if st == nil {
		return nil
	}
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			return &st.Conditions[i]
		}
	}
	return nil
}

func readyCondition(st *corev1.NodeStatus) *corev1.NodeCondition {
	return condition(st, corev1.NodeReady)
}

// readyStatus is the status of the Ready condition, "" when there is none.
func readyStatus(st *corev1.NodeStatus) corev1.ConditionStatus {
	if c := readyCondition(st); c != nil {
		return c.Status
	}
	return ""
}

// healthResult is what one node's health check found.
type healthResult struct {
	// ready is the Ready condition's status after the check ("" if none).
	ready corev1.ConditionStatus
	// story tells what the check did, if anything.
	story string
}

// monitorNodeHealth is one monitor pass over every node in the cache:
//
//  1. note nodes that appeared or went (RegisteredNode, RemovingNode);
//  2. check each node's health, marking silent ones Unknown;
//  3. work out each zone's state, and what it allows;
//  4. add, swap or remove each node's NoExecute taint as its Ready
//     condition asks, adding new ones through the zones' rate limits.
//
// It logs one line per node it changed.
func (c *Controller) monitorNodeHealth(ctx context.Context, now time.Time) {
	nodes := c.nodeLister.List(nil)
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	c.noteAddedAndDeleted(nodes)

	plog := newPassLog()
	ready := make(map[string]corev1.ConditionStatus, len(nodes))
	zoneReady := map[string][]corev1.ConditionStatus{}
	var checked []*corev1.Node
	for _, node := range nodes {
		res, err := c.updateNodeHealth(ctx, node, now)
		if err != nil {
			c.log.Error("cannot check health; no taint decisions for it this pass",
				slog.String("object", node.Name), slog.Any("err", err))
			continue
		}
		plog.set(node.Name, res.story)
		ready[node.Name] = res.ready
		zone := zoneOf(node)
		zoneReady[zone] = append(zoneReady[zone], res.ready)
		checked = append(checked, node)
	}

	if allFull := c.handleDisruption(ctx, zoneReady, checked, now); allFull {
		for _, node := range checked {
			if plog.has(node.Name) && ready[node.Name] != corev1.ConditionTrue {
				plog.add(node.Name, ready[node.Name], "no NoExecute taint (evictions paused)")
			}
		}
	} else {
		for _, node := range checked {
			c.processTaintBasedEviction(ctx, node, ready[node.Name], plog)
		}
		c.taintingPass(ctx, now, plog)
		c.explainWaiting(plog)
	}
	plog.flush(c)
}

// noteAddedAndDeleted records the nodes that appeared since the last pass
// and forgets the ones that went.
func (c *Controller) noteAddedAndDeleted(nodes []*corev1.Node) {
	seen := make(map[string]bool, len(nodes))
	for _, node := range nodes {
		seen[node.Name] = true
		if _, ok := c.known[node.Name]; !ok {
			c.log.Info("new node → watch its heartbeats", slog.String("object", node.Name))
			c.recorder.Eventf(node, corev1.EventTypeNormal, "RegisteredNode", "Registered Node %s in Controller", node.Name)
		}
		c.known[node.Name] = node
	}
	for name, node := range c.known {
		if seen[name] {
			continue
		}
		c.log.Info("node deleted → forget it", slog.String("object", name))
		c.recorder.Eventf(node, corev1.EventTypeNormal, "RemovingNode", "Removing Node %s from Controller", name)
		delete(c.known, name)
		c.mu.Lock()
		delete(c.health, name)
		for _, z := range c.zones {
			z.pending = slices.DeleteFunc(z.pending, func(n string) bool { return n == name })
		}
		c.mu.Unlock()
	}
}

// updateNodeHealth checks one node, retrying from a fresh read when its
// status write meets a conflict.
func (c *Controller) updateNodeHealth(ctx context.Context, node *corev1.Node, now time.Time) (healthResult, error) {
	for attempt := 1; ; attempt++ {
		res, err := c.tryUpdateNodeHealth(ctx, node, now)
		if err == nil || !client.IsConflict(err) || attempt == writeRetries {
			return res, err
		}
		name := node.Name
		if node, err = c.nodes.Get(ctx, "", name); err != nil {
			return res, fmt.Errorf("get node %s: %w", name, err)
		}
	}
}

// tryUpdateNodeHealth updates node's record and, when it has been silent
// longer than its grace period, writes its conditions Unknown.
func (c *Controller) tryUpdateNodeHealth(ctx context.Context, node *corev1.Node, now time.Time) (healthResult, error) {
	var lease *coordinationv1.Lease
	if l, err := c.leaseLister.Get(corev1.NamespaceNodeLease, node.Name); err == nil {
		lease = l
	}
	h := observe(c.nodeHealth(node.Name), node, lease, now)
	c.setNodeHealth(node.Name, h)

	posted := readyStatus(&node.Status)
	res := healthResult{ready: posted}
	grace := c.gracePeriod
	if !h.everReady {
		grace = c.startupGrace
	}
	if !now.After(h.probeTimestamp.Add(grace)) {
		return res, nil
	}
	cp := node.DeepCopy()
	if !markUnknown(cp, metav1.NewTime(now)) {
		return res, nil // already Unknown
	}
	out, err := c.nodes.UpdateStatus(ctx, cp)
	if err != nil {
		return res, fmt.Errorf("update status of node %s: %w", node.Name, err)
	}
	written := *h
	written.status = out.Status.DeepCopy()
	res.ready = readyStatus(&out.Status)
	if res.ready != posted {
		written.readyTransitionTimestamp = now
	}
	c.setNodeHealth(node.Name, &written)
	if posted != corev1.ConditionUnknown {
		res.story = fmt.Sprintf("no heartbeat for %s (grace %s) → Ready=Unknown",
			now.Sub(h.probeTimestamp).Round(time.Second), grace)
	}
	if posted == corev1.ConditionTrue {
		c.recorder.Eventf(out, corev1.EventTypeNormal, "NodeNotReady", "Node %s status is now: NodeNotReady", node.Name)
	}
	return res, nil
}

// nodeHealth returns the record of node, nil if there is none. The record
// must not be changed.
func (c *Controller) nodeHealth(name string) *nodeHealth {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.health[name]
}

func (c *Controller) setNodeHealth(name string, h *nodeHealth) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.health[name] = h
}

// passLog gathers what one monitor pass did to each node, to log one line
// per node: "node-2: no heartbeat for 41s (grace 40s) → Ready=Unknown,
// taint unreachable:NoExecute".
type passLog struct {
	parts map[string][]string
	ready map[string]corev1.ConditionStatus
	order []string
	// queued holds the nodes queued for a NoExecute taint by this pass
	// and not tainted yet, with that taint.
	queued map[string]corev1.Taint
}

func newPassLog() *passLog {
	return &passLog{
		parts:  map[string][]string{},
		ready:  map[string]corev1.ConditionStatus{},
		queued: map[string]corev1.Taint{},
	}
}

// set starts node's line with story, a sentence of its own ("" for none).
func (p *passLog) set(node, story string) {
	if story == "" {
		return
	}
	if _, ok := p.parts[node]; !ok {
		p.order = append(p.order, node)
	}
	p.parts[node] = append(p.parts[node], story)
}

// add adds a decision to node's line; a line that has no story yet
// starts with the Ready condition the decision follows from.
func (p *passLog) add(node string, ready corev1.ConditionStatus, decision string) {
	if _, ok := p.parts[node]; !ok {
		p.order = append(p.order, node)
		p.ready[node] = ready
	}
	p.parts[node] = append(p.parts[node], decision)
}

// has reports whether node's line says anything.
func (p *passLog) has(node string) bool {
	_, ok := p.parts[node]
	return ok
}

func (p *passLog) flush(c *Controller) {
	for _, node := range p.order {
		line := strings.Join(p.parts[node], ", ")
		attrs := []any{slog.String("object", node)}
		if r, ok := p.ready[node]; ok {
			line = "Ready=" + readyText(r) + " → " + line
			attrs = append(attrs, slog.String("ready", readyText(r)))
		}
		c.log.Info(line, attrs...)
	}
}

func readyText(s corev1.ConditionStatus) string {
	if s == "" {
		return "none"
	}
	return string(s)
}
