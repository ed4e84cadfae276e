package replicaset

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

func TestCreatesPodsWithOwnerReferences(t *testing.T) {
	r := runController(t)
	rs := r.createRS(t, newRS("web", 3))

	pods := r.waitForOwnedPods(t, rs, 3)
	for _, p := range pods {
		if !strings.HasPrefix(p.Name, "web-") || p.GenerateName != "web-" {
			t.Errorf("pod %s: generateName %q, want web-", p.Name, p.GenerateName)
		}
		if p.Labels["app"] != "web" {
			t.Errorf("pod %s: labels %v, want the template's", p.Name, p.Labels)
		}
		if len(p.OwnerReferences) != 1 {
			t.Fatalf("pod %s: ownerReferences %+v, want one", p.Name, p.OwnerReferences)
		}
		ref := p.OwnerReferences[0]
		if ref.APIVersion != "apps/v1" || ref.Kind != "ReplicaSet" || ref.Name != "web" || ref.UID != rs.UID ||
			ref.Controller == nil || !*ref.Controller || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("pod %s: ownerReference %+v", p.Name, ref)
		}
	}
	controllertest.Eventually(t, "3 SuccessfulCreate events", func() (bool, string) {
		n := countEvents(r.recorder, "Normal SuccessfulCreate Created pod: web-")
		return n == 3, fmt.Sprintf("events %q", r.recorder.Events())
	})
	controllertest.Eventually(t, "status.replicas 3", func() (bool, string) {
		cur, err := r.rss.Get(testCtx(t), ns, "web")
		if err != nil {
			return false, err.Error()
		}
		return cur.Status.Replicas == 3 && cur.Status.ObservedGeneration == cur.Generation,
			fmt.Sprintf("status %+v, generation %d", cur.Status, cur.Generation)
	})
}

func TestScalesUpAndDown(t *testing.T) {
	r := runController(t)
	rs := r.createRS(t, newRS("web", 2))
	r.waitForOwnedPods(t, rs, 2)

	for _, want := range []int32{5, 1, 0, 3} {
		r.scale(t, "web", want)
		r.waitForOwnedPods(t, rs, int(want))
	}
	// An Event is recorded once its delete has returned, so it can come
	// after the pod is seen gone.
	controllertest.Eventually(t, "5 SuccessfulDelete events (5→1, 1→0)", func() (bool, string) {
		n := countEvents(r.recorder, "Normal SuccessfulDelete Deleted pod: web-")
		return n == 5, fmt.Sprintf("%d events: %q", n, r.recorder.Events())
	})
}

func TestReplacesADeletedPod(t *testing.T) {
	r := runController(t)
	rs := r.createRS(t, newRS("web", 3))
	pods := r.waitForOwnedPods(t, rs, 3)

	victim := pods[0].Name
	if err := r.pods.Delete(testCtx(t), ns, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "a replacement with a new name", func() (bool, string) {
		pods := r.ownedPods(t, rs)
		names := podNames(pods)
		return len(pods) == 3 && !slices.Contains(names, victim), fmt.Sprintf("pods %v", names)
	})
}

func TestAdoptsAMatchingOrphan(t *testing.T) {
	r := runController(t)
	orphan, err := r.pods.Create(testCtx(t), newPod("stray", map[string]string{"app": "web"}))
	if err != nil {
		t.Fatal(err)
	}
	other, err := r.pods.Create(testCtx(t), newPod("other", map[string]string{"app": "db"}))
	if err != nil {
		t.Fatal(err)
	}

	rs := r.createRS(t, newRS("web", 2))
	pods := r.waitForOwnedPods(t, rs, 2)
	if !slices.Contains(podNames(pods), "stray") {
		t.Fatalf("owned pods %v, want the orphan stray among them", podNames(pods))
	}
	adopted, err := r.pods.Get(testCtx(t), ns, "stray")
	if err != nil {
		t.Fatal(err)
	}
	if adopted.UID != orphan.UID {
		t.Fatalf("stray was replaced, not adopted")
	}
	if ref := metav1.GetControllerOf(adopted); ref == nil || ref.UID != rs.UID || ref.Kind != "ReplicaSet" ||
		ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("adopted pod's ownerReferences %+v", adopted.OwnerReferences)
	}
	// Only one pod was created: the orphan counted. (Its Event is recorded
	// once the create has returned, so it can come after the pod is seen.)
	controllertest.Eventually(t, "1 SuccessfulCreate event", func() (bool, string) {
		n := countEvents(r.recorder, "Normal SuccessfulCreate")
		return n == 1, fmt.Sprintf("%d creates: %q", n, r.recorder.Events())
	})
	if cur, err := r.pods.Get(testCtx(t), ns, "other"); err != nil || len(cur.OwnerReferences) != 0 || cur.UID != other.UID {
		t.Errorf("a pod the selector does not match was touched: %+v, %v", cur.OwnerReferences, err)
	}
}

func TestReleasesAPodWhoseLabelsStopMatching(t *testing.T) {
	r := runController(t)
	rs := r.createRS(t, newRS("web", 2))
	pods := r.waitForOwnedPods(t, rs, 2)

	leaving := pods[0]
	for {
		cur, err := r.pods.Get(testCtx(t), ns, leaving.Name)
		if err != nil {
			t.Fatal(err)
		}
		cur.Labels = map[string]string{"app": "debug"} // taken out for debugging, as people do
		_, err = r.pods.Update(testCtx(t), cur)
		if err == nil {
			break
		}
		if !client.IsConflict(err) {
			t.Fatal(err)
		}
	}
	controllertest.Eventually(t, "the pod released and replaced", func() (bool, string) {
		cur, err := r.pods.Get(testCtx(t), ns, leaving.Name)
		if err != nil {
			return false, err.Error()
		}
		owned := r.ownedPods(t, rs)
		return len(cur.OwnerReferences) == 0 && len(owned) == 2 && !slices.Contains(podNames(owned), leaving.Name),
			fmt.Sprintf("released pod owners %v, owned %v", ownerUIDs(cur), podNames(owned))
	})
}

func TestStatusCountsReadyAvailableAndFullyLabeledPods(t *testing.T) {
	r := runController(t)
	// An orphan the selector matches but without every template label:
	// adopted, counted, but not fully labelled.
	if _, err := r.pods.Create(testCtx(t), newPod("partial", map[string]string{"app": "web"})); err != nil {
		t.Fatal(err)
	}
	in := newRS("web", 3)
	in.Spec.Template.Labels["tier"] = "frontend"
	rs := r.createRS(t, in)
	pods := r.waitForOwnedPods(t, rs, 3)

	r.markReady(t, pods[0])
	r.markReady(t, pods[1])
	// A finished pod does not count: it is replaced.
	failed := pods[2]
	cur, err := r.pods.Get(testCtx(t), ns, failed.Name)
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.Phase = corev1.PodFailed
	if _, err := r.pods.UpdateStatus(testCtx(t), cur); err != nil {
		t.Fatal(err)
	}

	controllertest.Eventually(t, "status", func() (bool, string) {
		got, err := r.rss.Get(testCtx(t), ns, "web")
		if err != nil {
			return false, err.Error()
		}
		s := got.Status
		// "partial" is one of the first two or was the failed one; either
		// way exactly one active pod lacks tier=frontend unless it failed.
		wantFully := int32(2)
		if failed.Name == "partial" {
			wantFully = 3
		}
		ok := s.Replicas == 3 && s.ReadyReplicas == 2 && s.AvailableReplicas == 2 &&
			s.FullyLabeledReplicas == wantFully && s.ObservedGeneration == got.Generation
		return ok, fmt.Sprintf("status %+v (want fullyLabeled %d)", s, wantFully)
	})
}

func podNames(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// lineCounter counts the log lines at Info and above, and passes every
// line on.
type lineCounter struct {
	slog.Handler
	n *atomic.Int64
}

func (c lineCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelInfo {
		c.n.Add(1)
	}
	return c.Handler.Handle(ctx, r)
}

func (c lineCounter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return lineCounter{Handler: c.Handler.WithAttrs(attrs), n: c.n}
}

func (c lineCounter) WithGroup(name string) slog.Handler {
	return lineCounter{Handler: c.Handler.WithGroup(name), n: c.n}
}

// A ReplicaSet of math.MaxInt32 replicas in a namespace whose quota allows
// 20 pods: the controller creates the 20, is refused the next one with a
// FailedCreate event, and then retries with a growing backoff, each retry
// one create and a few log lines, never a flood of either.
func TestHugeReplicaSetIsHeldByAQuota(t *testing.T) {
	lines := &atomic.Int64{}
	r := runControllerLogging(t, slog.New(lineCounter{Handler: controllertest.Logger(t).Handler(), n: lines}))
	controllertest.PodQuota(t, r.rc, ns, 20)
	rs := r.createRS(t, newRS("huge", math.MaxInt32))
	key := ns + "/huge"

	r.waitForOwnedPods(t, rs, 20)
	controllertest.Eventually(t, "a FailedCreate event", func() (bool, string) {
		n := countEvents(r.recorder, "Warning FailedCreate")
		return n > 0, fmt.Sprintf("events %q", r.recorder.Events())
	})
	// Wait until the backoff has doubled 8 times (to 1.28s, 2.5s of
	// retries in all).
	controllertest.Eventually(t, "8 retries", func() (bool, string) {
		n := r.ctrl.queue.NumRequeues(key)
		return n >= 8, fmt.Sprintf("%d retries", n)
	})
	retries := r.ctrl.queue.NumRequeues(key)
	if pods := r.ownedPods(t, rs); len(pods) != 20 {
		t.Errorf("%d pods, want the 20 the quota allows", len(pods))
	}
	// Each sync logs its decision and its failure; the creates of the
	// first sync and the pods' events add a few more.
	if n := lines.Load(); n > int64(10+3*retries) {
		t.Errorf("%d log lines after %d retries, want at most %d: a few per retry", n, retries, 10+3*retries)
	}
	if n := countEvents(r.recorder, "Warning FailedCreate"); n > 2*retries+11 {
		t.Errorf("%d FailedCreate events after %d retries, want a few per retry", n, retries)
	}
}
