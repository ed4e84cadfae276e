package replicaset

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
)

// These tests call sync directly with caches the test fills by hand, so
// that the cache is exactly as stale as each test wants. Writes go to a
// real API server, or to a PodControl that records or fails them.

// refreshRS plays the ReplicaSet informer: the cache gets the current
// ReplicaSet (pod events are what the tests delay, not these).
func refreshRS(t *testing.T, a *apiEnv, rsIndexer informer.Indexer, name string) *appsv1.ReplicaSet {
	t.Helper()
	rs, err := a.rss.Get(testCtx(t), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := rsIndexer.Update(rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

// observePods plays the pod informer catching up: the cache gets every
// pod in the API, and the handler is told about each new one.
func observePods(t *testing.T, a *apiEnv, c *Controller[*appsv1.ReplicaSet], podIndexer informer.Indexer) {
	t.Helper()
	for _, p := range a.listPods(t, "") {
		if _, exists, _ := podIndexer.Get(p); exists {
			continue
		}
		if err := podIndexer.Add(p); err != nil {
			t.Fatal(err)
		}
		c.addPod(p)
	}
}

func TestNoOverCreationWhileTheWatchIsBehind(t *testing.T) {
	a := startAPI(t)
	c, rsIndexer, podIndexer := newTestController(t, Options{Common: controller.Common{Client: a.rc}})
	a.createRS(t, newRS("web", 3))
	key := ns + "/web"

	// The pod informer sees none of the creates: sync after sync, the
	// cache says "0 pods". Expectations keep the controller from believing it.
	for i := range 5 {
		refreshRS(t, a, rsIndexer, "web")
		if err := c.sync(testCtx(t), key); err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
	}
	if pods := a.listPods(t, "app=web"); len(pods) != 3 {
		t.Fatalf("the API holds %d pods after 5 syncs on a stale cache, want exactly 3", len(pods))
	}
	if adds, _ := c.expectations.Pending(key); adds != 3 {
		t.Errorf("pending creates %d, want 3", adds)
	}

	// The informer catches up: the expectations are met, and the next
	// sync, now trusting the cache, has nothing to do.
	observePods(t, a, c, podIndexer)
	if !c.expectations.Satisfied(key) {
		t.Fatal("expectations not satisfied after the informer observed every create")
	}
	refreshRS(t, a, rsIndexer, "web")
	if err := c.sync(testCtx(t), key); err != nil {
		t.Fatal(err)
	}
	if pods := a.listPods(t, "app=web"); len(pods) != 3 {
		t.Fatalf("the API holds %d pods, want 3", len(pods))
	}
	rs := refreshRS(t, a, rsIndexer, "web")
	if rs.Status.Replicas != 3 || rs.Status.ObservedGeneration != rs.Generation {
		t.Errorf("status %+v, want replicas 3 at generation %d", rs.Status, rs.Generation)
	}
}

func TestExpiredExpectationsLetTheControllerActAgain(t *testing.T) {
	a := startAPI(t)
	clock := clock.NewFake(time.Now())
	c, rsIndexer, _ := newTestController(t, Options{Common: controller.Common{Client: a.rc, Clock: clock}})
	a.createRS(t, newRS("web", 2))
	key := ns + "/web"

	refreshRS(t, a, rsIndexer, "web")
	if err := c.sync(testCtx(t), key); err != nil {
		t.Fatal(err)
	}
	// The creates are never observed (a watch that never delivers). After
	// ExpectationsTimeout the controller stops waiting and trusts its
	// cache again, which here says 0 pods.
	clock.Step(controller.ExpectationsTimeout + time.Second)
	refreshRS(t, a, rsIndexer, "web")
	if err := c.sync(testCtx(t), key); err != nil {
		t.Fatal(err)
	}
	if pods := a.listPods(t, "app=web"); len(pods) != 4 {
		t.Fatalf("the API holds %d pods, want 4: the expired expectations let the second sync create", len(pods))
	}
}

// failingPodControl wraps a PodControl and fails the failAt'th create
// (counting from 1), recording the names of the pods it created.
type failingPodControl struct {
	controller.PodControl
	failAt int64
	calls  atomic.Int64
}

var errInjected = errors.New("injected failure")

func (f *failingPodControl) CreatePod(ctx context.Context, tmpl *corev1.PodTemplateSpec, owner api.Object, ref *metav1.OwnerReference) (*corev1.Pod, error) {
	if f.calls.Add(1) == f.failAt {
		return nil, errInjected
	}
	return f.PodControl.CreatePod(ctx, tmpl, owner, ref)
}

func TestSlowStartStopsAtTheFirstFailingBatch(t *testing.T) {
	a := startAPI(t)
	rec := &record.FakeRecorder{}
	c, rsIndexer, podIndexer := newTestController(t, Options{Common: controller.Common{Client: a.rc, Recorder: rec}})
	fpc := &failingPodControl{PodControl: c.podControl, failAt: 4}
	c.podControl = fpc
	a.createRS(t, newRS("web", 10))
	key := ns + "/web"

	refreshRS(t, a, rsIndexer, "web")
	err := c.sync(testCtx(t), key)
	if !errors.Is(err, errInjected) {
		t.Fatalf("sync: %v, want the injected failure", err)
	}
	// Batches of 1, 2 and 4: the 4th create, in the third batch, fails;
	// the batch finishes and no fourth batch starts.
	if got := fpc.calls.Load(); got != 7 {
		t.Errorf("%d create calls, want 7 (1+2+4)", got)
	}
	if pods := a.listPods(t, "app=web"); len(pods) != 6 {
		t.Fatalf("the API holds %d pods, want 6", len(pods))
	}
	// Only the creates that happened are still expected.
	if adds, _ := c.expectations.Pending(key); adds != 6 {
		t.Errorf("pending creates %d, want 6", adds)
	}
	rs := refreshRS(t, a, rsIndexer, "web")
	if cond := findCondition(rs.Status.Conditions, appsv1.ReplicaSetReplicaFailure); cond == nil ||
		cond.Reason != "FailedCreate" || cond.Status != corev1.ConditionTrue {
		t.Errorf("conditions %+v, want ReplicaFailure FailedCreate", rs.Status.Conditions)
	}

	// The informer catches up; the next sync creates the other 4 and
	// clears the failure.
	observePods(t, a, c, podIndexer)
	if err := c.sync(testCtx(t), key); err != nil {
		t.Fatal(err)
	}
	if pods := a.listPods(t, "app=web"); len(pods) != 10 {
		t.Fatalf("the API holds %d pods, want 10", len(pods))
	}
	observePods(t, a, c, podIndexer)
	refreshRS(t, a, rsIndexer, "web")
	if err := c.sync(testCtx(t), key); err != nil {
		t.Fatal(err)
	}
	rs = refreshRS(t, a, rsIndexer, "web")
	if cond := findCondition(rs.Status.Conditions, appsv1.ReplicaSetReplicaFailure); cond != nil {
		t.Errorf("ReplicaFailure still set: %+v", cond)
	}
	if n := countEvents(rec, "Normal SuccessfulCreate"); n != 10 {
		t.Errorf("%d SuccessfulCreate events, want 10", n)
	}
}

func TestBurstReplicasCapsOneSync(t *testing.T) {
	a := startAPI(t)
	c, rsIndexer, podIndexer := newTestController(t, Options{Common: controller.Common{Client: a.rc}, BurstReplicas: 2})
	a.createRS(t, newRS("web", 5))
	key := ns + "/web"
	for _, want := range []int{2, 4, 5} {
		refreshRS(t, a, rsIndexer, "web")
		if err := c.sync(testCtx(t), key); err != nil {
			t.Fatal(err)
		}
		if pods := a.listPods(t, "app=web"); len(pods) != want {
			t.Fatalf("the API holds %d pods, want %d", len(pods), want)
		}
		observePods(t, a, c, podIndexer)
	}
}

// recordingPodControl records deletes and succeeds without an API.
type recordingPodControl struct {
	mu      sync.Mutex
	deleted []string
}

func (r *recordingPodControl) CreatePod(context.Context, *corev1.PodTemplateSpec, api.Object, *metav1.OwnerReference) (*corev1.Pod, error) {
	return nil, errors.New("unexpected create")
}

func (r *recordingPodControl) DeletePod(_ context.Context, _, name string, _ api.Object) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deleted = append(r.deleted, name)
	return nil
}

func TestScaleDownDeletesTheLeastUsefulPodsFirst(t *testing.T) {
	a := startAPI(t)
	c, rsIndexer, podIndexer := newTestController(t, Options{Common: controller.Common{Client: a.rc}})
	rpc := &recordingPodControl{}
	c.podControl = rpc
	rs := a.createRS(t, newRS("web", 2))
	rs = refreshRS(t, a, rsIndexer, "web")
	key := ns + "/web"

	ref := controller.NewControllerRef(rs, ReplicaSets.GroupVersionKind)
	now := time.Now()
	pod := func(name, node string, phase corev1.PodPhase, ready bool, created time.Time) *corev1.Pod {
		p := newPod(name, map[string]string{"app": "web"})
		p.UID = types.UID("uid-" + name)
		p.OwnerReferences = []metav1.OwnerReference{*ref}
		p.CreationTimestamp = metav1.NewTime(created)
		p.Spec.NodeName = node
		p.Status.Phase = phase
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(created.Add(time.Second))}}
		}
		return p
	}
	pods := []*corev1.Pod{
		pod("old-ready", "n1", corev1.PodRunning, true, now.Add(-time.Hour)),
		pod("new-ready", "n2", corev1.PodRunning, true, now.Add(-time.Minute)),
		pod("not-ready", "n3", corev1.PodRunning, false, now.Add(-2*time.Hour)),
		pod("pending", "n4", corev1.PodPending, false, now.Add(-3*time.Hour)),
		pod("unscheduled", "", corev1.PodPending, false, now.Add(-4*time.Hour)),
	}
	for _, p := range pods {
		if err := podIndexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	// Terminal and terminating pods are not counted, so never chosen.
	gone := pod("finished", "n1", corev1.PodSucceeded, false, now)
	deleting := pod("deleting", "n1", corev1.PodRunning, true, now)
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	for _, p := range []*corev1.Pod{gone, deleting} {
		if err := podIndexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}

	if err := c.sync(testCtx(t), key); err != nil {
		t.Fatal(err)
	}
	slices.Sort(rpc.deleted)
	// 5 active pods, 2 wanted: the unscheduled, the pending and the not
	// ready go first.
	want := []string{"not-ready", "pending", "unscheduled"}
	if !slices.Equal(rpc.deleted, want) {
		t.Fatalf("deleted %v, want %v", rpc.deleted, want)
	}
	if _, dels := c.expectations.Pending(key); dels != 3 {
		t.Errorf("pending deletes %d, want 3", dels)
	}
	// The informer sees one of them go twice (marked, then removed): it
	// counts once.
	c.deletePod(pods[2])
	c.deletePod(pods[2])
	if _, dels := c.expectations.Pending(key); dels != 2 {
		t.Errorf("pending deletes %d after observing not-ready's deletion, want 2", dels)
	}
	// A pod someone else deleted does not count.
	c.deletePod(pods[0])
	if _, dels := c.expectations.Pending(key); dels != 2 {
		t.Errorf("pending deletes %d after an unrelated deletion, want 2", dels)
	}
	c.deletePod(informer.DeletedFinalStateUnknown{Key: ns + "/pending", Obj: pods[3]})
	c.deletePod(pods[4])
	if !c.expectations.Satisfied(key) {
		t.Error("expectations not satisfied after every deletion was observed (one through a tombstone)")
	}
}

func TestSyncOfAGoneReplicaSetForgetsItsExpectations(t *testing.T) {
	a := startAPI(t)
	c, _, _ := newTestController(t, Options{Common: controller.Common{Client: a.rc}})
	key := ns + "/gone"
	c.expectations.ExpectCreations(key, 3)
	if err := c.sync(testCtx(t), key); err != nil {
		t.Fatal(err)
	}
	if adds, dels := c.expectations.Pending(key); adds != 0 || dels != 0 {
		t.Errorf("expectations %d/%d survive their replica set", adds, dels)
	}
}

func TestMinReadySecondsDelaysAvailability(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	rs := newRS("web", 2)
	rs.Spec.MinReadySeconds = 10
	rs.Generation = 4
	ready := func(since time.Duration) *corev1.Pod {
		p := newPod(fmt.Sprintf("ready-%s", since), map[string]string{"app": "web"})
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now.Add(-since))}}
		return p
	}
	tests := []struct {
		name          string
		pods          []*corev1.Pod
		ready, avail  int32
		fullyLabelled int32
	}{
		{"none ready", []*corev1.Pod{newPod("a", map[string]string{"app": "web"})}, 0, 0, 1},
		{"ready too briefly", []*corev1.Pod{ready(5 * time.Second)}, 1, 0, 1},
		{"ready long enough", []*corev1.Pod{ready(10 * time.Second), ready(time.Minute)}, 2, 2, 2},
		{"missing a template label", []*corev1.Pod{newPod("b", map[string]string{"app": "web", "x": "y"}), newPod("c", nil)}, 0, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := calculateStatus(rs, tt.pods, nil, now)
			if s.Replicas != int32(len(tt.pods)) || s.ReadyReplicas != tt.ready || s.AvailableReplicas != tt.avail ||
				s.FullyLabeledReplicas != tt.fullyLabelled || s.ObservedGeneration != 4 {
				t.Errorf("status %+v, want ready %d, available %d, fully labelled %d, observedGeneration 4",
					s, tt.ready, tt.avail, tt.fullyLabelled)
			}
		})
	}
}

// countingPodControl creates nothing: it counts the creates it is asked
// for and answers each with a pod.
type countingPodControl struct{ creates atomic.Int64 }

func (c *countingPodControl) CreatePod(_ context.Context, tmpl *corev1.PodTemplateSpec, _ api.Object, _ *metav1.OwnerReference) (*corev1.Pod, error) {
	c.creates.Add(1)
	return &corev1.Pod{ObjectMeta: tmpl.ObjectMeta}, nil
}

func (c *countingPodControl) DeletePod(context.Context, string, string, api.Object) error {
	return errors.New("unexpected delete")
}

// A ReplicaSet of math.MaxInt32 replicas costs one sync at most 500
// creates, and the next sync waits until the informer has seen them.
func TestOneSyncCreatesAtMostBurstReplicas(t *testing.T) {
	a := startAPI(t)
	c, rsIndexer, _ := newTestController(t, Options{Common: controller.Common{Client: a.rc}})
	cpc := &countingPodControl{}
	c.podControl = cpc
	a.createRS(t, newRS("huge", math.MaxInt32))
	key := ns + "/huge"

	for i := range 3 {
		refreshRS(t, a, rsIndexer, "huge")
		if err := c.sync(testCtx(t), key); err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
		if got := cpc.creates.Load(); got != DefaultBurstReplicas {
			t.Fatalf("%d creates after %d syncs on a cache that saw none of them, want %d", got, i+1, DefaultBurstReplicas)
		}
	}
	if adds, _ := c.expectations.Pending(key); adds != DefaultBurstReplicas {
		t.Errorf("pending creates %d, want %d", adds, DefaultBurstReplicas)
	}
}
