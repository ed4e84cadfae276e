package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
)

// registrationRetry is the wait between attempts to register the Node.
const registrationRetry = time.Second

// registerNode creates the Node, or, when it exists (the kubelet
// restarted), makes sure it carries the kubelet's labels. It retries until
// the API server answers or ctx is done.
func (k *Kubelet) registerNode(ctx context.Context) (*corev1.Node, error) {
	want := k.newNode()
	for {
		node, err := k.nodes.Create(ctx, want)
		if client.IsAlreadyExists(err) {
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": want.Labels}})
			node, err = k.nodes.Patch(ctx, "", k.name, types.MergePatchType, patch)
			if err == nil {
				k.log.Info("node already registered; taking it over", slog.String("object", k.name))
				return node, nil
			}
		} else if err == nil {
			k.log.Info(fmt.Sprintf("registered node (cpu %s, memory %s, pods %s)",
				k.opts.Capacity.Cpu(), k.opts.Capacity.Memory(), k.opts.Capacity.Pods()), slog.String("object", k.name))
			k.recorder.Eventf(node, corev1.EventTypeNormal, "NodeReady", "Node %s status is now: NodeReady", k.name)
			return node, nil
		}
		k.log.Error("register node failed; will retry", slog.String("object", k.name), slog.Any("err", err))
		timer := k.clock.NewTimer(registrationRetry)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("kubelet %s: register node: %w", k.name, ctx.Err())
		case <-timer.C():
		}
	}
}

// newNode is the Node the kubelet registers.
func (k *Kubelet) newNode() *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:   k.name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: runtime.GOARCH,
		"type":                 "sim",
	}
	for key, v := range k.opts.Labels {
		labels[key] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: k.name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: k.opts.Taints},
		Status:     k.nodeStatus(&corev1.Node{}, metav1.NewTime(k.clock.Now())),
	}
}

// nodeStatus is node's status as the kubelet reports it at now: what it
// offers, where it is, what it runs, and conditions that say all is well.
// Fields the kubelet does not own are kept.
func (k *Kubelet) nodeStatus(node *corev1.Node, now metav1.Time) corev1.NodeStatus {
	st := *node.Status.DeepCopy()
	st.Capacity = k.opts.Capacity.DeepCopy()
	st.Allocatable = k.opts.Capacity.DeepCopy()
	// With an external cloud provider the node's addresses are the
	// cloud's, which the cloud-node controller writes: the kubelet
	// reports its own only until there are some, as kube's kubelet with
	// --cloud-provider=external and --node-ip does.
	if !k.opts.ExternalCloudProvider || len(st.Addresses) == 0 {
		st.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: k.opts.Address},
			{Type: corev1.NodeHostName, Address: k.name},
		}
	}
	st.DaemonEndpoints = corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: k.port}}
	st.NodeInfo = corev1.NodeSystemInfo{
		MachineID:               strings.ReplaceAll(uuid.NewSHA1(uuid.NameSpaceOID, []byte("minictl/"+k.name)).String(), "-", ""),
		SystemUUID:              uuid.NewSHA1(uuid.NameSpaceOID, []byte("minictl/system/"+k.name)).String(),
		BootID:                  k.bootID,
		KernelVersion:           "minictl-sim",
		OSImage:                 "minictl simulated node",
		ContainerRuntimeVersion: "sim://" + Version,
		KubeletVersion:          Version,
		OperatingSystem:         "linux",
		Architecture:            runtime.GOARCH,
	}
	for _, c := range []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
	} {
		setNodeCondition(&st, c, now)
	}
	return st
}

// setNodeCondition sets c, heartbeat now, in st's conditions; its
// lastTransitionTime moves only when its status changes.
func setNodeCondition(st *corev1.NodeStatus, c corev1.NodeCondition, now metav1.Time) {
	c.LastHeartbeatTime, c.LastTransitionTime = now, now
	for i := range st.Conditions {
		old := &st.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		*old = c
		return
	}
	st.Conditions = append(st.Conditions, c)
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// heartbeat renews the Lease every HeartbeatInterval and looks at the node
// status every StatusUpdateInterval, writing it when it changed or when
// NodeStatusReportFrequency has passed since it was last written; both are
// written at once to begin with and after a pause, until ctx is done.
// While the Node carries the heartbeat annotation "stop", it writes
// nothing.
func (k *Kubelet) heartbeat(ctx context.Context) {
	paused := false
	beat := func(lease, status bool) {
		if k.heartbeatStopped() {
			if !paused {
				k.log.Info(fmt.Sprintf("node annotated %s=stop → heartbeat stopped", AnnotationHeartbeat), slog.String("object", k.name))
			}
			paused = true
			return
		}
		force := false
		if paused {
			k.log.Info(fmt.Sprintf("annotation %s removed → heartbeat resumed", AnnotationHeartbeat), slog.String("object", k.name))
			paused, lease, status, force = false, true, true, true
		}
		if lease {
			// A beat that the kubelet's stop interrupted failed for no
			// fault worth reporting.
			if err := k.renewLease(ctx); err != nil && ctx.Err() == nil {
				k.log.Error("renew lease failed", slog.String("object", k.name), slog.Any("err", err))
			}
		}
		if status {
			if err := k.updateNodeStatus(ctx, force); err != nil && ctx.Err() == nil {
				k.log.Error("update node status failed", slog.String("object", k.name), slog.Any("err", err))
			}
		}
	}
	beat(true, true)
	// Each of the two is due every interval from the start, like a
	// ticker's ticks: one that falls behind skips the beats it missed.
	start := k.clock.Now()
	nextLease, nextStatus := start.Add(k.opts.HeartbeatInterval), start.Add(k.opts.StatusUpdateInterval)
	for {
		due := nextLease
		if nextStatus.Before(due) {
			due = nextStatus
		}
		timer := k.clock.NewTimer(due.Sub(k.clock.Now()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-k.kick:
			timer.Stop()
			beat(false, false)
		case now := <-timer.C():
			lease, status := !now.Before(nextLease), !now.Before(nextStatus)
			nextLease = nextDue(nextLease, k.opts.HeartbeatInterval, now)
			nextStatus = nextDue(nextStatus, k.opts.StatusUpdateInterval, now)
			beat(lease, status)
		}
	}
}

// nextDue is the first of next, next+every, next+2*every, ... after now.
func nextDue(next time.Time, every time.Duration, now time.Time) time.Time {
	if next.After(now) {
		return next
	}
	return next.Add((now.Sub(next)/every + 1) * every)
}

func (k *Kubelet) heartbeatStopped() bool {
	node, err := k.nodeLister.Get("", k.name)
	return err == nil && node.Annotations[AnnotationHeartbeat] == "stop"
}

// renewLease sets the node Lease's renewTime to now, creating the Lease if
// it is missing. It writes from the Lease it wrote last, and reads the
// server's only when that fails.
func (k *Kubelet) renewLease(ctx context.Context) error {
	if k.lease != nil {
		out, err := k.leases.Update(ctx, k.renewed(k.lease))
		if err == nil {
			k.lease = out
			return nil
		}
		if !client.IsConflict(err) && !client.IsNotFound(err) {
			return fmt.Errorf("update lease: %w", err)
		}
		k.lease = nil // changed or deleted by someone else: start again from the server's
	}
	cur, err := k.leases.Get(ctx, corev1.NamespaceNodeLease, k.name)
	if client.IsNotFound(err) {
		out, err := k.leases.Create(ctx, k.renewed(&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: k.name},
		}))
		if err != nil {
			return fmt.Errorf("create lease: %w", err)
		}
		k.lease = out
		return nil
	}
	if err != nil {
		return fmt.Errorf("get lease: %w", err)
	}
	out, err := k.leases.Update(ctx, k.renewed(cur))
	if err != nil {
		return fmt.Errorf("update lease: %w", err)
	}
	k.lease = out
	return nil
}

// renewed is a copy of lease held by this node and renewed now, owned by
// the Node (so that it goes with it) once the node is known.
func (k *Kubelet) renewed(lease *coordinationv1.Lease) *coordinationv1.Lease {
	l := lease.DeepCopy()
	now := metav1.NewMicroTime(k.clock.Now())
	l.Spec.HolderIdentity = &k.name
	l.Spec.LeaseDurationSeconds = new(LeaseDurationSeconds)
	l.Spec.RenewTime = &now
	if node, err := k.nodeLister.Get("", k.name); err == nil && len(l.OwnerReferences) == 0 {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
	}
	return l
}

// updateNodeStatus computes the node status and writes it, with fresh
// heartbeat times, when it differs from the Node's (heartbeat times
// aside), when NodeStatusReportFrequency has passed since the last write,
// when it has not been written yet, or when force says so: kube's
// kubelet's tryUpdateNodeStatus. The Lease says the node is alive; the
// status is written for what it says. It reads the Node again when the
// cache was behind.
func (k *Kubelet) updateNodeStatus(ctx context.Context, force bool) error {
	node, err := k.nodeLister.Get("", k.name)
	for attempt := 1; ; attempt++ {
		if err != nil {
			return fmt.Errorf("get node: %w", err)
		}
		now := k.clock.Now()
		st := k.nodeStatus(node, metav1.NewTime(now))
		due := force || k.lastStatusReport.IsZero() || !now.Before(k.lastStatusReport.Add(k.opts.NodeStatusReportFrequency))
		if !due && !nodeStatusChanged(&node.Status, &st) {
			return nil
		}
		cp := node.DeepCopy()
		cp.Status = st
		_, err = k.nodes.UpdateStatus(ctx, cp)
		if err == nil {
			k.lastStatusReport = now
			if !nodeReady(node) {
				k.log.Info("node Ready", slog.String("object", k.name), slog.String("to", "Ready"))
				k.recorder.Eventf(node, corev1.EventTypeNormal, "NodeReady", "Node %s status is now: NodeReady", k.name)
			}
			return nil
		}
		if !client.IsConflict(err) || attempt == statusTries {
			return fmt.Errorf("update node status: %w", err)
		}
		node, err = k.nodes.Get(ctx, "", k.name)
	}
}

// nodeStatusChanged reports whether cur differs from old in anything but
// its conditions' lastHeartbeatTime, which moves with every computation.
func nodeStatusChanged(old, cur *corev1.NodeStatus) bool {
	strip := func(st *corev1.NodeStatus) *corev1.NodeStatus {
		cp := st.DeepCopy()
		for i := range cp.Conditions {
			cp.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return cp
	}
	return !apiequality.Semantic.DeepEqual(strip(old), strip(cur))
}

// nodeNumber is a small number naming a node in its default simulated
// addresses: the number its name ends with ("node-2" → 2), or else a hash
// of the name, modulo 256.
func nodeNumber(name string) int {
	digits := len(name)
	for digits > 0 && name[digits-1] >= '0' && name[digits-1] <= '9' {
		digits--
	}
	if n, err := strconv.Atoi(name[digits:]); err == nil {
		return n % 256
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() % 256)
}
