package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
	"github.com/minictl/minictl/internal/testenv"
	"github.com/minictl/minictl/kubelet"
)

const testDeadline = 15 * time.Second

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newClient(t *testing.T) *client.RESTClient {
	t.Helper()
	env := testenv.Start(t)
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// startScheduler runs a scheduler (its Options changed by tweaks), its
// informers and an event recorder until the test ends, and returns the
// registry of its metrics.
func startScheduler(t *testing.T, rc *client.RESTClient, tweaks ...func(*Options)) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	recorder := record.NewRecorder(rc, record.Options{Component: DefaultSchedulerName, RetryInterval: 100 * time.Millisecond})
	opts := Options{Client: rc, Informers: factory, Recorder: recorder, Logger: testLogger(), Metrics: reg}
	for _, tweak := range tweaks {
		tweak(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx)
	done := make(chan error, 2)
	go func() { done <- s.Run(ctx, 2) }()
	go func() { recorder.Run(ctx); done <- nil }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("scheduler Run: %v", err)
			}
		}
		factory.Shutdown()
	})
	return reg
}

// attempts reads scheduler_schedule_attempts_total{result}.
func attempts(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "scheduler_schedule_attempts_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(testDeadline)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s (last error: %v)", what, lastErr)
}

// createNode registers a Ready node the way a kubelet would, without one.
func createNode(t *testing.T, rc *client.RESTClient, node *corev1.Node) {
	t.Helper()
	if _, err := client.For[*corev1.Node](rc).Create(context.Background(), node); err != nil {
		t.Fatalf("create node %s: %v", node.Name, err)
	}
}

func createPod(t *testing.T, rc *client.RESTClient, pod *corev1.Pod) {
	t.Helper()
	pod = pod.DeepCopy()
	pod.UID = ""
	if _, err := client.For[*corev1.Pod](rc).Create(context.Background(), pod); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
}

func getPod(rc *client.RESTClient, name string) (*corev1.Pod, error) {
	return client.For[*corev1.Pod](rc).Get(context.Background(), "default", name)
}

// waitBound waits until pod name is bound and returns its node.
func waitBound(t *testing.T, rc *client.RESTClient, name string) string {
	t.Helper()
	var node string
	waitFor(t, "pod "+name+" bound", func() (bool, error) {
		pod, err := getPod(rc, name)
		if err != nil {
			return false, err
		}
		node = pod.Spec.NodeName
		return node != "", nil
	})
	return node
}

// waitEvent waits for an event about pod name with reason and returns its
// message.
func waitEvent(t *testing.T, rc *client.RESTClient, name, reason string) string {
	t.Helper()
	var message string
	waitFor(t, fmt.Sprintf("a %s event about %s", reason, name), func() (bool, error) {
		list, err := client.For[*corev1.Event](rc).List(context.Background(), "default", metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": name, "reason": reason}.String(),
		})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		message = list.Items[0].Message
		return true, nil
	})
	return message
}

func podScheduledCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodScheduled {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func TestSchedulerSpreadsPodsOverKubelets(t *testing.T) {
	rc := newClient(t)
	for _, name := range []string{"node-1", "node-2", "node-3"} {
		k, err := kubelet.New(kubelet.Options{Client: rc, NodeName: name, Logger: testLogger(),
			HeartbeatInterval: 100 * time.Millisecond, StatusUpdateInterval: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- k.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("kubelet %s: %v", name, err)
			}
		})
	}
	startScheduler(t, rc)

	for i := range 6 {
		createPod(t, rc, testPod(fmt.Sprintf("web-%d", i), "500m", "256Mi"))
	}
	perNode := map[string]int{}
	for i := range 6 {
		name := fmt.Sprintf("web-%d", i)
		perNode[waitBound(t, rc, name)]++
		waitFor(t, name+" Running", func() (bool, error) {
			pod, err := getPod(rc, name)
			return err == nil && pod.Status.Phase == corev1.PodRunning, err
		})
	}
	for _, node := range []string{"node-1", "node-2", "node-3"} {
		if perNode[node] != 2 {
			t.Errorf("pods per node = %v, want 2 on each (least allocated spreads them)", perNode)
			break
		}
	}
	node := waitBound(t, rc, "web-0")
	if msg := waitEvent(t, rc, "web-0", "Scheduled"); msg != "Successfully assigned default/web-0 to "+node {
		t.Errorf("Scheduled event message = %q", msg)
	}
}

func TestNodeSelectorPicksTheMatchingNode(t *testing.T) {
	rc := newClient(t)
	for _, name := range []string{"node-1", "node-2", "node-3"} {
		node := testNode(name, "4", "8Gi", "110")
		if name == "node-3" {
			node.Labels["disk"] = "ssd"
		}
		createNode(t, rc, node)
	}
	startScheduler(t, rc)

	for i := range 3 {
		pod := testPod(fmt.Sprintf("db-%d", i), "100m", "")
		pod.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		createPod(t, rc, pod)
	}
	for i := range 3 {
		if node := waitBound(t, rc, fmt.Sprintf("db-%d", i)); node != "node-3" {
			t.Errorf("db-%d bound to %s, want node-3 (the only one labelled disk=ssd)", i, node)
		}
	}
}

func TestUnschedulableUntilABiggerNodeAppears(t *testing.T) {
	rc := newClient(t)
	for _, name := range []string{"node-1", "node-2", "node-3"} {
		createNode(t, rc, testNode(name, "4", "8Gi", "110"))
	}
	reg := startScheduler(t, rc)
	createPod(t, rc, testPod("big", "16", "1Gi"))

	want := "0/3 nodes are available: 3 Insufficient cpu."
	if msg := waitEvent(t, rc, "big", "FailedScheduling"); msg != want {
		t.Errorf("FailedScheduling message = %q, want %q", msg, want)
	}
	waitFor(t, "PodScheduled=False Unschedulable", func() (bool, error) {
		pod, err := getPod(rc, "big")
		if err != nil {
			return false, err
		}
		c := podScheduledCondition(pod)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && c.Message == want, nil
	})
	if pod, _ := getPod(rc, "big"); pod.Spec.NodeName != "" {
		t.Fatalf("big bound to %s", pod.Spec.NodeName)
	}

	createNode(t, rc, testNode("node-big", "32", "64Gi", "110"))
	if node := waitBound(t, rc, "big"); node != "node-big" {
		t.Errorf("big bound to %s, want node-big", node)
	}
	pod, err := getPod(rc, "big")
	if err != nil {
		t.Fatal(err)
	}
	if c := podScheduledCondition(pod); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("PodScheduled after binding = %+v, want True", c)
	}
	if u, s := attempts(t, reg, "unschedulable"), attempts(t, reg, "scheduled"); u < 1 || s != 1 {
		t.Errorf("attempts: unschedulable %v, scheduled %v; want at least 1, and 1", u, s)
	}
}

func TestTaintedNodeIsAvoidedUnlessTolerated(t *testing.T) {
	rc := newClient(t)
	// "a-gpu" would win every tie by name; its taint must keep others off.
	gpu := testNode("a-gpu", "4", "8Gi", "110")
	gpu.Labels["accelerator"] = "gpu"
	gpu.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	createNode(t, rc, gpu)
	createNode(t, rc, testNode("b-plain", "4", "8Gi", "110"))
	startScheduler(t, rc)

	createPod(t, rc, testPod("web", "100m", ""))
	if node := waitBound(t, rc, "web"); node != "b-plain" {
		t.Errorf("web bound to %s, want b-plain (a-gpu is tainted)", node)
	}

	trainer := testPod("trainer", "100m", "")
	trainer.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	createPod(t, rc, trainer)
	if node := waitBound(t, rc, "trainer"); node != "a-gpu" {
		t.Errorf("trainer bound to %s, want a-gpu (tolerated, and emptier)", node)
	}

	stray := testPod("stray", "100m", "")
	stray.Spec.NodeSelector = map[string]string{"accelerator": "gpu"}
	createPod(t, rc, stray)
	want := "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint {dedicated: gpu}."
	if msg := waitEvent(t, rc, "stray", "FailedScheduling"); msg != want {
		t.Errorf("FailedScheduling message = %q\nwant %q", msg, want)
	}
}

func TestTwoPodsRacingForTheLastSlot(t *testing.T) {
	rc := newClient(t)
	createNode(t, rc, testNode("node-1", "1", "8Gi", "110"))
	startScheduler(t, rc)

	createPod(t, rc, testPod("first", "1", ""))
	createPod(t, rc, testPod("second", "1", ""))
	var bound, failed []string
	waitFor(t, "one pod bound and the other unschedulable", func() (bool, error) {
		bound, failed = nil, nil
		for _, name := range []string{"first", "second"} {
			pod, err := getPod(rc, name)
			if err != nil {
				return false, err
			}
			if pod.Spec.NodeName != "" {
				bound = append(bound, name)
			} else if c := podScheduledCondition(pod); c != nil && c.Reason == corev1.PodReasonUnschedulable {
				failed = append(failed, name)
			}
		}
		return len(bound)+len(failed) == 2, nil
	})
	if len(bound) != 1 {
		t.Fatalf("bound %v, unschedulable %v: want exactly one of each", bound, failed)
	}
	if msg := waitEvent(t, rc, failed[0], "FailedScheduling"); msg != "0/1 nodes are available: 1 Insufficient cpu." {
		t.Errorf("FailedScheduling message = %q", msg)
	}

	// Deleting the bound pod makes room: the other one is scheduled.
	if err := client.For[*corev1.Pod](rc).Delete(context.Background(), "default", bound[0], metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, rc, failed[0])
}

// newTestScheduler is a scheduler over indexers filled by the test, which
// no informer ever updates, writing through rc.
func newTestScheduler(t *testing.T, rc *client.RESTClient, nodes []*corev1.Node, pods []*corev1.Pod) *Scheduler {
	t.Helper()
	nodeIndexer, podIndexer := informer.NewIndexer(nil, nil), informer.NewIndexer(nil, nil)
	for _, n := range nodes {
		if err := nodeIndexer.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		if err := podIndexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	s := &Scheduler{
		name:          DefaultSchedulerName,
		rc:            rc,
		pods:          client.For[*corev1.Pod](rc),
		podLister:     informer.NewLister[*corev1.Pod](podIndexer),
		nodeLister:    informer.NewLister[*corev1.Node](nodeIndexer),
		queue:         workqueue.New[string]("test", workqueue.Options{}),
		recorder:      &record.FakeRecorder{},
		log:           testLogger(),
		clock:         clock.Real{},
		assumed:       map[string]assumedPod{},
		unschedulable: map[string]time.Time{},
		attempts:      newAttemptsMetric(),

		backoff:          workqueue.NewItemExponentialFailureRateLimiter(DefaultPodInitialBackoff, DefaultPodMaxBackoff),
		maxUnschedulable: DefaultPodMaxUnschedulable,
	}
	t.Cleanup(s.queue.ShutDown)
	return s
}

func TestAssumedPodsCountBeforeTheInformerSeesThem(t *testing.T) {
	// Two pods, room for one, and a cache that never learns of the first
	// binding: only the assumed pod stops the second decision.
	first, second := testPod("first", "600m", ""), testPod("second", "600m", "")
	s := newTestScheduler(t, nil, []*corev1.Node{testNode("node-1", "1", "8Gi", "110")}, []*corev1.Pod{first, second})

	if d := s.decide("default/first", first); d.node != "node-1" {
		t.Fatalf("first: %+v, want node-1", d)
	}
	if d := s.decide("default/first", first); !d.alreadyAssumed {
		t.Errorf("first again: %+v, want already assumed (no second binding)", d)
	}
	d := s.decide("default/second", second)
	if d.node != "" || d.message != "0/1 nodes are available: 1 Insufficient cpu." {
		t.Errorf("second: node %q, message %q; want none, Insufficient cpu", d.node, d.message)
	}

	// A failed binding gives the room back.
	s.forgetAssumed("default/first")
	if d := s.decide("default/second", second); d.node != "node-1" {
		t.Errorf("second after first's binding failed: %+v, want node-1", d)
	}
}

func TestBindingConflictIsNotAnError(t *testing.T) {
	rc := newClient(t)
	createNode(t, rc, testNode("node-1", "4", "8Gi", "110"))
	createNode(t, rc, testNode("node-2", "4", "8Gi", "110"))
	createPod(t, rc, testPod("web", "", ""))
	pod, err := getPod(rc, "web")
	if err != nil {
		t.Fatal(err)
	}
	// Someone binds it first; this scheduler's cache still shows it pending.
	if err := rc.Bind(context.Background(), &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "node-2"},
	}); err != nil {
		t.Fatal(err)
	}
	nodes := []*corev1.Node{testNode("node-1", "4", "8Gi", "110"), testNode("node-2", "4", "8Gi", "110")}
	s := newTestScheduler(t, rc, nodes, []*corev1.Pod{pod})
	if err := s.sync(context.Background(), "default/web"); err != nil {
		t.Errorf("sync = %v, want nil for a pod already bound", err)
	}
	if len(s.assumed) != 0 {
		t.Errorf("assumed = %v after a refused binding, want empty", s.assumed)
	}
	if events := s.recorder.(*record.FakeRecorder).Events(); len(events) != 0 {
		t.Errorf("events = %q, want none", events)
	}
	got, err := getPod(rc, "web")
	if err != nil || got.Spec.NodeName != "node-2" {
		t.Errorf("pod bound to %q (%v), want node-2 still", got.Spec.NodeName, err)
	}
}

func TestPodsOfAnotherSchedulerAreLeftAlone(t *testing.T) {
	rc := newClient(t)
	createNode(t, rc, testNode("node-1", "4", "8Gi", "110"))
	startScheduler(t, rc)
	other := testPod("other", "", "")
	other.Spec.SchedulerName = "my-scheduler"
	createPod(t, rc, other)
	createPod(t, rc, testPod("mine", "", ""))
	waitBound(t, rc, "mine") // the scheduler has seen both by now
	pod, err := getPod(rc, "other")
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "" || len(pod.Status.Conditions) != 0 {
		t.Errorf("pod of my-scheduler: nodeName %q, conditions %+v; want untouched", pod.Spec.NodeName, pod.Status.Conditions)
	}
}

func TestUnschedulablePodWaitsForAChangeOrFiveMinutes(t *testing.T) {
	rc := newClient(t)
	createPod(t, rc, testPod("big", "16", ""))
	pod, err := getPod(rc, "big")
	if err != nil {
		t.Fatal(err)
	}
	s := newTestScheduler(t, rc, []*corev1.Node{testNode("node-1", "4", "8Gi", "110")}, []*corev1.Pod{pod})
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clock.NewFake(t0)
	s.clock = clk
	s.queue.ShutDown()
	s.queue = workqueue.New[string]("test", workqueue.Options{Clock: clk, RateLimiter: s.backoff})
	t.Cleanup(s.queue.ShutDown)
	const key = "default/big"

	// nextTry waits until the queue's only timer fires after, from t0,
	// and fails if it never does.
	nextTry := func(after time.Duration, why string) {
		t.Helper()
		waitFor(t, fmt.Sprintf("the next try %v after the start: %s", after, why), func() (bool, error) {
			w := clk.Waiters()
			if len(w) != 1 {
				return false, fmt.Errorf("%d timers", len(w))
			}
			return w[0].Equal(t0.Add(after)), fmt.Errorf("next try %v after the start", w[0].Sub(t0))
		})
	}
	attempt := func() {
		t.Helper()
		waitFor(t, "big in the queue", func() (bool, error) { return s.queue.Len() == 1, nil })
		s.processNextWorkItem(context.Background())
		if s.queue.Len() != 0 {
			t.Fatalf("big queued again at once after an attempt that found no node")
		}
	}

	// No node fits: the pod waits, not for its backoff (1s) but for a
	// change, or 5 minutes.
	s.queue.Add(key)
	attempt()
	nextTry(DefaultPodMaxUnschedulable, "5 minutes after the attempt")

	// A node changes, half a second into the 1s backoff: the pod is tried
	// once the backoff is over.
	clk.Step(500 * time.Millisecond)
	s.requeueUnschedulable()
	nextTry(time.Second, "a node changed: the end of the backoff")
	clk.Step(500 * time.Millisecond)
	attempt() // still no room; the next backoff is 2s

	// Nothing changes: the next try is 5 minutes later.
	clk.Step(time.Minute)
	if s.queue.Len() != 0 {
		t.Fatal("big tried again within a minute though nothing changed")
	}
	nextTry(time.Second+DefaultPodMaxUnschedulable, "5 minutes after the second attempt")
	clk.Step(DefaultPodMaxUnschedulable)
	attempt()
	if n := len(s.recorder.(*record.FakeRecorder).WithReason("FailedScheduling")); n != 3 {
		t.Errorf("%d FailedScheduling events, want 3: one per attempt", n)
	}
}

// Once its context is done, a worker leaves what is still queued: each
// would only fail, with a log line and an event of its own.
func TestStoppingSchedulerLeavesTheQueue(t *testing.T) {
	pods := []*corev1.Pod{testPod("a", "16", ""), testPod("b", "16", "")}
	s := newTestScheduler(t, nil, []*corev1.Node{testNode("node-1", "4", "8Gi", "110")}, pods)
	s.queue.Add("default/a")
	s.queue.Add("default/b")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s.processNextWorkItem(ctx) {
		t.Error("a worker went on after its context was done")
	}
	if events := s.recorder.(*record.FakeRecorder).Events(); len(events) != 0 {
		t.Errorf("events %q, want none", events)
	}
	if s.queue.Len() != 1 {
		t.Errorf("queue length %d, want 1: b left alone", s.queue.Len())
	}
}

func TestHostPortsSpreadPodsAndThenLeaveThemPending(t *testing.T) {
	rc := newClient(t)
	for _, name := range []string{"node-1", "node-2"} {
		createNode(t, rc, testNode(name, "4", "8Gi", "110"))
	}
	startScheduler(t, rc)
	withPort := func(name string) *corev1.Pod {
		pod := testPod(name, "", "")
		pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
		return pod
	}
	createPod(t, rc, withPort("web-0"))
	first := waitBound(t, rc, "web-0")
	createPod(t, rc, withPort("web-1"))
	if second := waitBound(t, rc, "web-1"); second == first {
		t.Errorf("web-0 and web-1 both on %s, with the same host port", first)
	}
	createPod(t, rc, withPort("web-2"))
	want := "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports."
	if msg := waitEvent(t, rc, "web-2", "FailedScheduling"); msg != want {
		t.Errorf("FailedScheduling message = %q, want %q", msg, want)
	}
}
