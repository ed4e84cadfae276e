package nodelifecycle

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/internal/timeline"
)

// These tests run the controller against a real API server on a real etcd
// (internal/testenv), on a fake clock the test moves. No kubelet runs: the
// test plays it, renewing Leases and writing node status. Pods are created
// bound to their node; with no kubelet to finish them, an evicted pod stays
// with a deletionTimestamp.

const ns = "default"

// Kubernetes' own timings: the fake clock makes them free.
const (
	period = 5 * time.Second
	grace  = 40 * time.Second
)

type fixture struct {
	t        *testing.T
	rc       *client.RESTClient
	nodes    *client.Client[*corev1.Node]
	leases   *client.Client[*coordinationv1.Lease]
	pods     *client.Client[*corev1.Pod]
	clock    *clock.Fake
	start    time.Time // the fake clock's first reading
	ctrl     *Controller
	recorder *record.FakeRecorder
	logs     *logBuffer
	factory  *informer.SharedInformerFactory
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	rc := controllertest.Start(t).Client
	start := time.Now().Truncate(time.Second)
	return &fixture{
		t: t, rc: rc,
		nodes:    client.For[*corev1.Node](rc),
		leases:   client.For[*coordinationv1.Lease](rc),
		pods:     client.For[*corev1.Pod](rc),
		clock:    clock.NewFake(start),
		start:    start,
		recorder: &record.FakeRecorder{},
		logs:     newLogBuffer(t),
	}
}

// run starts the controller (two workers) and waits for its first monitor
// pass; both stop when the test ends.
func (f *fixture) run() {
	f.t.Helper()
	f.factory = informer.NewSharedInformerFactory(f.rc, informer.FactoryOptions{})
	c, err := New(Options{Common: controller.Common{
		Client: f.rc, Informers: f.factory, Recorder: f.recorder,
		Logger: slog.New(f.logs),
		Clock:  f.clock,
	}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.ctrl = c
	f.t.Cleanup(f.logs.close) // after the controller stops: Run's cleanup is registered below
	controllertest.Run(f.t, f.factory, 2, c)
	waitFor(f.t, "the first monitor pass", func() (bool, string) { return c.passes.Load() >= 1, "" })
}

// pass steps the fake clock by d and waits for the monitor pass that
// brings: d must reach the next pass.
func (f *fixture) pass(d time.Duration) {
	f.t.Helper()
	before := f.ctrl.passes.Load()
	f.clock.Step(d)
	waitFor(f.t, "a monitor pass", func() (bool, string) { return f.ctrl.passes.Load() > before, "" })
}

// heartbeat renews the Leases of nodes, as their kubelets would, and waits
// until the controller's cache has the renewals, so that the next pass
// sees them.
func (f *fixture) heartbeat(nodes ...string) {
	f.t.Helper()
	for _, name := range nodes {
		l, err := f.leases.Get(ctx(f.t), corev1.NamespaceNodeLease, name)
		if err != nil {
			f.t.Fatal(err)
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec.RenewTime = &now
		out, err := f.leases.Update(ctx(f.t), l)
		if err != nil {
			f.t.Fatal(err)
		}
		waitFor(f.t, "the controller to see "+name+"'s lease renewed", func() (bool, string) {
			got, err := f.ctrl.leaseLister.Get(corev1.NamespaceNodeLease, name)
			return err == nil && got.ResourceVersion == out.ResourceVersion, ""
		})
	}
}

// createNode registers a Ready node and its Lease, as a kubelet does.
func (f *fixture) createNode(name string) {
	f.t.Helper()
	now := metav1.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
		}},
	}
	if _, err := f.nodes.Create(ctx(f.t), node); err != nil {
		f.t.Fatal(err)
	}
	renew := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &name, LeaseDurationSeconds: ptr[int32](40), RenewTime: &renew},
	}
	if _, err := f.leases.Create(ctx(f.t), lease); err != nil {
		f.t.Fatal(err)
	}
}

// setReady posts Ready True with a fresh heartbeat, as a kubelet coming
// back does, and renews its Lease; it waits until the controller's cache
// has both.
func (f *fixture) setReady(name string) {
	f.t.Helper()
	node, err := f.nodes.Get(ctx(f.t), "", name)
	if err != nil {
		f.t.Fatal(err)
	}
	// Heartbeats have one-second resolution: post one the controller can
	// tell from the last, as a kubelet posting every few seconds does.
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	if prev := readyCondition(&node.Status); prev != nil && !now.After(prev.LastHeartbeatTime.Time) {
		now = metav1.NewTime(prev.LastHeartbeatTime.Add(time.Second))
	}
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		c.LastHeartbeatTime = now
		if c.Type == corev1.NodeReady {
			c.Status, c.Reason, c.Message, c.LastTransitionTime = corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status", now
		}
	}
	out, err := f.nodes.UpdateStatus(ctx(f.t), node)
	if err != nil {
		f.t.Fatal(err)
	}
	waitFor(f.t, "the controller to see "+name+" Ready", func() (bool, string) {
		got, err := f.ctrl.nodeLister.Get("", name)
		return err == nil && rvAtLeast(got.ResourceVersion, out.ResourceVersion) && readyStatus(&got.Status) == corev1.ConditionTrue, ""
	})
	f.heartbeat(name)
}

// createPod creates a pod bound to node with tolerations (the API server
// adds the default 300s not-ready and unreachable ones it lacks).
func (f *fixture) createPod(name, node string, tolerations ...corev1.Toleration) {
	f.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:    node,
			Containers:  []corev1.Container{{Name: "app", Image: "nginx:1.27"}},
			Tolerations: tolerations,
		},
	}
	if _, err := f.pods.Create(ctx(f.t), pod); err != nil {
		f.t.Fatal(err)
	}
}

// evicted reports whether pod is being deleted or gone.
func (f *fixture) evicted(name string) bool {
	f.t.Helper()
	pod, err := f.pods.Get(ctx(f.t), ns, name)
	if client.IsNotFound(err) {
		return true
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return pod.DeletionTimestamp != nil
}

func (f *fixture) node(name string) *corev1.Node {
	f.t.Helper()
	node, err := f.nodes.Get(ctx(f.t), "", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return node
}

// hasTaintNow reports whether node carries key:effect on the server.
func (f *fixture) hasTaintNow(node, key string, effect corev1.TaintEffect) bool {
	return hasTaint(f.node(node).Spec.Taints, corev1.Taint{Key: key, Effect: effect})
}

func (f *fixture) waitTaint(node, key string, effect corev1.TaintEffect, want bool) {
	f.t.Helper()
	waitFor(f.t, node+" tainted "+key+":"+string(effect)+" = "+boolText(want), func() (bool, string) {
		n := f.node(node)
		return hasTaint(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect}) == want, taintNames(n.Spec.Taints)
	})
}

func (f *fixture) scheduledAt(pod string) (time.Time, bool) {
	e, ok := f.ctrl.scheduledEviction(ns + "/" + pod)
	return e.at, ok
}

// since returns a fake time as an offset from the clock's start: "T0+45s".
func (f *fixture) since(t time.Time) time.Duration { return t.Sub(f.start) }

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// waitFor is controllertest.Eventually asking every 10ms: a monitor pass
// on the fake clock is quick to follow.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	controllertest.Poll{Timeout: 30 * time.Second, Interval: 10 * time.Millisecond}.Until(t, what, cond)
}

// logBuffer is a slog.Handler that keeps the controller's decisions as the
// timeline tells them, "object message" ("node-2 Ready=Unknown → taint
// unreachable:NoExecute", "default/web (on node-2) tolerates ..."), for
// assertions, and shows each record in the test's output.
type logBuffer struct {
	t      *testing.T
	attrs  []slog.Attr // the logger's, from WithAttrs
	shared *logLines
}

// logLines are the lines of a logBuffer and of every logger derived from
// it.
type logLines struct {
	mu     sync.Mutex
	msgs   []string
	closed bool
}

func newLogBuffer(t *testing.T) *logBuffer { return &logBuffer{t: t, shared: &logLines{}} }

func (b *logBuffer) Enabled(context.Context, slog.Level) bool { return true }

func (b *logBuffer) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	for _, a := range b.attrs {
		line += " " + a.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	e := timeline.FromRecord(r, b.attrs)
	story := e.Message
	if e.Object != "" {
		story = e.Object + " " + e.Message
	}
	s := b.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, story)
	if !s.closed {
		b.t.Log(line)
	}
	return nil
}

func (b *logBuffer) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logBuffer{t: b.t, attrs: append(slices.Clone(b.attrs), attrs...), shared: b.shared}
}

func (b *logBuffer) WithGroup(string) slog.Handler { return b }

func (b *logBuffer) close() {
	b.shared.mu.Lock()
	defer b.shared.mu.Unlock()
	b.shared.closed = true
}

// String returns every decision so far, one per line.
func (b *logBuffer) String() string {
	b.shared.mu.Lock()
	defer b.shared.mu.Unlock()
	return strings.Join(b.shared.msgs, "\n")
}

func rvAtLeast(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x >= y
}

// waitLog waits for the log to contain s.
func (f *fixture) waitLog(s string) {
	f.t.Helper()
	waitFor(f.t, "log line "+s, func() (bool, string) { return strings.Contains(f.logs.String(), s), "not logged" })
}

// events returns the recorded events that contain s.
func (f *fixture) events(s string) []string {
	var out []string
	for _, e := range f.recorder.Events() {
		if strings.Contains(e, s) {
			out = append(out, e)
		}
	}
	return out
}
