package podgc

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/informer"
)

// fixture is a real API server, a started informer factory and a pod GC
// that is either running (run) or driven pass by pass by the test.
type fixture struct {
	rc       *client.RESTClient
	c        *Controller
	recorder *record.FakeRecorder
	passes   atomic.Int64
	ctx      context.Context
	cancel   context.CancelFunc
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	env := controllertest.StartWith(t, controllertest.Options{})
	rc, factory := env.Client, env.Informers
	f := &fixture{rc: rc, recorder: &record.FakeRecorder{}}
	opts.Client, opts.Informers, opts.Recorder, opts.Logger = rc, factory, f.recorder, controllertest.Logger(t)
	var err error
	f.c, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.c.onPass = func() { f.passes.Add(1) }
	ctx, cancel := context.WithCancel(context.Background())
	f.ctx, f.cancel = ctx, cancel
	factory.Start(ctx)
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	return f
}

// run runs the controller until the test ends.
func (f *fixture) run(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.c.Run(f.ctx, 2)
	}()
	// Cleanups run last-in first-out: the controller stops before the
	// factory.
	t.Cleanup(func() {
		f.cancel()
		<-done
	})
}

// waitPasses waits until n more passes have completed.
func (f *fixture) waitPasses(t *testing.T, n int64) {
	t.Helper()
	want := f.passes.Load() + n
	waitFor(t, fmt.Sprintf("%d more passes", n), func() bool { return f.passes.Load() >= want })
}

func TestTerminatedPodsOverThresholdOldestFirst(t *testing.T) {
	f := newFixture(t, Options{TerminatedPodThreshold: 2, Period: 50 * time.Millisecond})
	f.run(t)
	ctx := t.Context()
	pods := client.For[*corev1.Pod](f.rc)

	// Created in order, so pod-1 is the oldest (equal creation seconds are
	// ordered by name, which is the same order).
	for i := 1; i <= 5; i++ {
		p := createPod(t, f.rc, fmt.Sprintf("pod-%d", i), "")
		p.Status.Phase = corev1.PodSucceeded
		if i%2 == 0 {
			p.Status.Phase = corev1.PodFailed
		}
		if _, err := pods.UpdateStatus(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// A running pod does not count.
	createPod(t, f.rc, "running", "")

	waitFor(t, "the 3 oldest terminated pods to be deleted", func() bool {
		list, err := pods.List(ctx, "default", metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(podNames(list.Items), ",") == "pod-4,pod-5,running"
	})
	f.waitPasses(t, 2)
	list, err := pods.List(ctx, "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(podNames(list.Items), ","); got != "pod-4,pod-5,running" {
		t.Fatalf("pods after more passes = %s, want pod-4,pod-5,running", got)
	}
	if n := len(f.recorder.WithReason("TerminatedPodGC")); n != 3 {
		t.Errorf("TerminatedPodGC events = %d, want 3: %q", n, f.recorder.Events())
	}
}

func TestPodOnMissingNodeIsDeleted(t *testing.T) {
	f := newFixture(t, Options{Period: 50 * time.Millisecond, QuarantineTime: -1})
	f.run(t)
	ctx := t.Context()
	pods := client.For[*corev1.Pod](f.rc)

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	if _, err := client.For[*corev1.Node](f.rc).Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	kept := createPod(t, f.rc, "on-node-1", "node-1")
	createPod(t, f.rc, "on-ghost", "ghost")

	waitFor(t, "the pod on the missing node to be deleted", func() bool {
		_, err := pods.Get(ctx, "default", "on-ghost")
		return client.IsNotFound(err)
	})
	f.waitPasses(t, 2)
	got, err := pods.Get(ctx, "default", "on-node-1")
	if err != nil {
		t.Fatalf("the pod on an existing node: %v", err)
	}
	if got.UID != kept.UID || got.DeletionTimestamp != nil {
		t.Fatalf("the pod on an existing node was deleted: %+v", got.ObjectMeta)
	}
	if n := len(f.recorder.WithReason("NodeGone")); n != 1 {
		t.Errorf("NodeGone events = %d, want 1: %q", n, f.recorder.Events())
	}
}

func TestMissingNodeQuarantine(t *testing.T) {
	clock := clock.NewFake(time.Now())
	f := newFixture(t, Options{Common: controller.Common{Clock: clock}, QuarantineTime: 40 * time.Second})
	ctx := t.Context()
	pods := client.For[*corev1.Pod](f.rc)

	createPod(t, f.rc, "on-ghost", "ghost")
	if !informer.WaitForCacheSync(ctx, f.c.synced...) {
		t.Fatal("caches did not sync")
	}
	waitFor(t, "the cache to see the pod", func() bool {
		_, err := f.c.podList.Get("default", "on-ghost")
		return err == nil
	})

	f.c.gc(ctx, 1) // first seen missing: quarantine starts
	clock.Step(39 * time.Second)
	f.c.gc(ctx, 1)
	if _, err := pods.Get(ctx, "default", "on-ghost"); err != nil {
		t.Fatalf("pod deleted before the quarantine ended: %v", err)
	}
	clock.Step(time.Second)
	f.c.gc(ctx, 1)
	if _, err := pods.Get(ctx, "default", "on-ghost"); !client.IsNotFound(err) {
		t.Fatalf("pod after the quarantine: err = %v, want NotFound", err)
	}
}

func TestUnscheduledTerminating(t *testing.T) {
	ts := metav1.Now()
	thirty, zero := int64(30), int64(0)
	pod := func(name, node string, grace *int64, deleted bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, DeletionGracePeriodSeconds: grace}}
		p.Spec.NodeName = node
		if deleted {
			p.DeletionTimestamp = &ts
		}
		return p
	}
	pods := []*corev1.Pod{
		pod("live", "", nil, false),
		pod("bound-deleting", "n1", &thirty, true),
		pod("unbound-deleting", "", &thirty, true),
		pod("unbound-waiting-for-finalizers", "", &zero, true),
	}
	var got []string
	for _, d := range unscheduledTerminating(pods) {
		got = append(got, d.pod.Name)
	}
	if strings.Join(got, ",") != "unbound-deleting" {
		t.Fatalf("unscheduledTerminating = %v, want [unbound-deleting]", got)
	}
}

func createPod(t *testing.T, rc *client.RESTClient, name, node string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}},
		},
	}
	created, err := client.For[*corev1.Pod](rc).Create(t.Context(), p)
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	return created
}

func podNames(pods []*corev1.Pod) []string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return names
}

// waitFor waits up to 20s for cond, asking every 20ms.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll := controllertest.Poll{Timeout: 20 * time.Second, Interval: 20 * time.Millisecond}
	poll.Until(t, what, func() (bool, string) { return cond(), "" })
}
