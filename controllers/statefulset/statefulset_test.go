package statefulset

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

func isReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// TestOrderedReady: with OrderedReady, web-i is created only once web-0
// .. web-(i-1) are Running and Ready, as a watch of pods shows; each pod
// has its identity and claim; a scale down deletes from the highest
// ordinal, one at a time, and keeps the claims.
func TestOrderedReady(t *testing.T) {
	r := runController(t, false)
	ctx := testCtx(t)
	w, err := r.pods.Watch(ctx, ns, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	set := r.create(t, newSet("web", 3, ""))

	ready := map[string]bool{}
	for len(ready) < 3 {
		ev, ok := <-w.Events()
		if !ok {
			t.Fatalf("watch ended: %v", w.Err())
		}
		pod := ev.Object
		switch ev.Type {
		case watch.Added:
			ord, _ := ordinalOf(set, pod)
			for j := range ord {
				if !ready[podName(set, j)] {
					t.Fatalf("%s ADDED before %s was Ready", pod.Name, podName(set, j))
				}
			}
			r.setReady(t, pod)
		case watch.Modified:
			if isReady(pod) {
				ready[pod.Name] = true
			}
		}
	}
	pods := r.livePods(t)
	if got := names(pods); !slices.Equal(got, []string{"web-0", "web-1", "web-2"}) {
		t.Fatalf("pods %v, want web-0 web-1 web-2", got)
	}
	p := pods["web-1"]
	if p.Spec.Hostname != "web-1" || p.Spec.Subdomain != "nginx" {
		t.Errorf("web-1 hostname %q subdomain %q, want web-1 and nginx", p.Spec.Hostname, p.Spec.Subdomain)
	}
	if p.Labels[appsv1.StatefulSetPodNameLabel] != "web-1" || p.Labels[appsv1.PodIndexLabel] != "1" || !strings.HasPrefix(p.Labels[appsv1.StatefulSetRevisionLabel], "web-") {
		t.Errorf("web-1 labels %v", p.Labels)
	}
	if i := slices.IndexFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "data" }); i < 0 ||
		p.Spec.Volumes[i].PersistentVolumeClaim == nil || p.Spec.Volumes[i].PersistentVolumeClaim.ClaimName != "data-web-1" {
		t.Errorf("web-1 volumes %+v, want data from claim data-web-1", p.Spec.Volumes)
	}
	for i := range 3 {
		claim, err := r.claims.Get(ctx, ns, fmt.Sprintf("data-web-%d", i))
		if err != nil {
			t.Fatalf("claim of web-%d: %v", i, err)
		}
		if claim.Labels["app"] != "web" || len(claim.OwnerReferences) != 0 {
			t.Errorf("claim %s labels %v owners %v, want app=web and no owner (Retain)", claim.Name, claim.Labels, claim.OwnerReferences)
		}
	}
	for _, want := range []string{
		"Normal SuccessfulCreate create Claim data-web-0 Pod web-0 in StatefulSet web success",
		"Normal SuccessfulCreate create Pod web-0 in StatefulSet web successful",
	} {
		if !slices.Contains(r.recorder.Events(), want) {
			t.Errorf("no event %q in %v", want, r.recorder.Events())
		}
	}
	st := r.waitForStatus(t, "web", "3 ready replicas", false, func(s *appsv1.StatefulSet) bool {
		return s.Status.ReadyReplicas == 3 && s.Status.AvailableReplicas == 3
	})
	if st.Status.CurrentRevision == "" || st.Status.CurrentRevision != st.Status.UpdateRevision || st.Status.CurrentReplicas != 3 || st.Status.UpdatedReplicas != 3 {
		t.Errorf("status %+v: want current = update revision, 3 current and updated", st.Status)
	}

	r.update(t, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr(int32(1)) })
	var deleted []string
	for len(deleted) < 2 {
		ev, ok := <-w.Events()
		if !ok {
			t.Fatalf("watch ended: %v", w.Err())
		}
		if ev.Type == watch.Deleted {
			deleted = append(deleted, ev.Object.Name)
		}
	}
	if !slices.Equal(deleted, []string{"web-2", "web-1"}) {
		t.Errorf("deleted %v, want web-2 then web-1", deleted)
	}
	if _, err := r.claims.Get(ctx, ns, "data-web-2"); err != nil {
		t.Errorf("claim data-web-2 after scale down: %v; want it kept", err)
	}
}

// TestOrderedReadyHalts: an unready pod stops OrderedReady from creating
// the next one.
func TestOrderedReadyHalts(t *testing.T) {
	r := runController(t, false)
	r.create(t, newSet("web", 2, ""))
	r.waitForStatus(t, "web", "web-0 created", false, func(s *appsv1.StatefulSet) bool { return s.Status.Replicas == 1 })
	// The controller has synced since it made web-0 and still made
	// nothing else; a second status round trip confirms it stays so.
	r.update(t, "web", func(s *appsv1.StatefulSet) {
		s.Spec.MinReadySeconds = 0
		s.Spec.Template.Annotations = map[string]string{"touch": "1"}
	})
	r.waitForStatus(t, "web", "the touch observed", false, func(s *appsv1.StatefulSet) bool { return s.Status.UpdateRevision != s.Status.CurrentRevision })
	if got := names(r.livePods(t)); !slices.Equal(got, []string{"web-0"}) {
		t.Errorf("pods %v while web-0 is Pending, want only web-0", got)
	}
}

// TestParallel: Parallel creates every pod at once, none of them ready.
func TestParallel(t *testing.T) {
	r := runController(t, false)
	r.create(t, newSet("web", 3, appsv1.ParallelPodManagement))
	controllertest.Eventually(t, "3 pods", func() (bool, string) {
		pods := r.livePods(t)
		return len(pods) == 3, fmt.Sprint(names(pods))
	})
	for name, p := range r.livePods(t) {
		if isReady(p) {
			t.Errorf("pod %s is ready; the test made none ready", name)
		}
	}
}

// TestParallelCreatesInSlowStartBatches: Parallel creates pods in
// batches of 1, 2, 4, ..., each batch's creates in flight together, as
// kube's controller does. In front of the API server, the creates of the
// third batch (the 4th to the 7th pod) are held until all four have
// arrived; a controller that created one pod at a time would never send
// the 5th while the 4th is held.
func TestParallelCreatesInSlowStartBatches(t *testing.T) {
	const batch = 4
	var (
		mu                sync.Mutex
		creates, inFlight int
		mostInFlight      int
		gaveUp            bool
		full              = make(chan struct{})
	)
	r := runControllerBehind(t, false, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Method != http.MethodPost || req.URL.Path != "/api/v1/namespaces/"+ns+"/pods" {
				next.ServeHTTP(w, req)
				return
			}
			mu.Lock()
			creates++
			hold := creates > 3 && creates <= 3+batch && !gaveUp
			if hold {
				inFlight++
				mostInFlight = max(mostInFlight, inFlight)
				if inFlight == batch {
					close(full)
				}
			}
			mu.Unlock()
			if hold {
				select {
				case <-full:
				case <-req.Context().Done():
				case <-time.After(10 * time.Second):
					mu.Lock()
					gaveUp = true // let the rest through: the test has failed
					mu.Unlock()
				}
				mu.Lock()
				inFlight--
				mu.Unlock()
			}
			next.ServeHTTP(w, req)
		})
	})
	r.create(t, newSet("web", 7, appsv1.ParallelPodManagement))
	controllertest.Eventually(t, "7 pods", func() (bool, string) {
		pods := r.livePods(t)
		return len(pods) == 7, fmt.Sprint(names(pods))
	})
	mu.Lock()
	if mostInFlight != batch {
		t.Errorf("at most %d of the creates of pods 4 to 7 were in flight together, want %d", mostInFlight, batch)
	}
	mu.Unlock()
	for i := range 7 {
		if _, err := r.claims.Get(testCtx(t), ns, fmt.Sprintf("data-web-%d", i)); err != nil {
			t.Errorf("claim of web-%d: %v", i, err)
		}
	}
}

// TestDeletedPodComesBack: a deleted pod is recreated with its name and
// its claim.
func TestDeletedPodComesBack(t *testing.T) {
	r := runController(t, false)
	r.create(t, newSet("web", 2, appsv1.ParallelPodManagement))
	var old *corev1.Pod
	controllertest.Eventually(t, "web-1", func() (bool, string) {
		old = r.livePods(t)["web-1"]
		return old != nil, ""
	})
	claim, err := r.claims.Get(testCtx(t), ns, "data-web-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.pods.Delete(testCtx(t), ns, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "a new web-1", func() (bool, string) {
		p := r.livePods(t)["web-1"]
		return p != nil && p.UID != old.UID, ""
	})
	again, err := r.claims.Get(testCtx(t), ns, "data-web-1")
	if err != nil || again.UID != claim.UID {
		t.Errorf("claim data-web-1 after the pod came back: %v, uid %v; want the same claim %v", err, again.UID, claim.UID)
	}
}

// TestPartitionedRollingUpdate: a template change with partition 1
// replaces web-2 and web-1, not web-0; partition 0 then replaces web-0
// and the update revision becomes current.
func TestPartitionedRollingUpdate(t *testing.T) {
	r := runController(t, false)
	r.create(t, newSet("web", 3, ""))
	first := r.waitForStatus(t, "web", "3 ready", true, func(s *appsv1.StatefulSet) bool { return s.Status.ReadyReplicas == 3 })

	r.update(t, "web", func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr(int32(1))}
		s.Spec.Template.Spec.Containers[0].Image = "web:2"
	})
	st := r.waitForStatus(t, "web", "web-1 and web-2 updated", true, func(s *appsv1.StatefulSet) bool {
		return s.Status.UpdatedReplicas == 2 && s.Status.ReadyReplicas == 3
	})
	pods := r.livePods(t)
	for name, want := range map[string]string{"web-0": "web:1", "web-1": "web:2", "web-2": "web:2"} {
		if got := image(pods[name]); got != want {
			t.Errorf("%s runs %s, want %s", name, got, want)
		}
	}
	if st.Status.CurrentRevision != first.Status.CurrentRevision || st.Status.UpdateRevision == st.Status.CurrentRevision || st.Status.CurrentReplicas != 1 {
		t.Errorf("status %+v: want current revision %s with 1 replica and a new update revision", st.Status, first.Status.CurrentRevision)
	}

	r.update(t, "web", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr(int32(0)) })
	st = r.waitForStatus(t, "web", "all updated", true, func(s *appsv1.StatefulSet) bool {
		return s.Status.UpdatedReplicas == 3 && s.Status.ReadyReplicas == 3 && s.Status.CurrentRevision == s.Status.UpdateRevision
	})
	if got := image(r.livePods(t)["web-0"]); got != "web:2" {
		t.Errorf("web-0 runs %s after partition 0, want web:2", got)
	}
	revs, err := r.crs.List(testCtx(t), ns, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(revs.Items) != 2 {
		t.Errorf("%d revisions, want 2 (one per template)", len(revs.Items))
	}
}

// TestOnDelete: a template change replaces no pod until the user deletes
// it; its replacement is of the new template.
func TestOnDelete(t *testing.T) {
	r := runController(t, false)
	set := newSet("web", 2, appsv1.ParallelPodManagement)
	set.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
	r.create(t, set)
	r.waitForStatus(t, "web", "2 ready", true, func(s *appsv1.StatefulSet) bool { return s.Status.ReadyReplicas == 2 })
	r.update(t, "web", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "web:2" })
	st := r.waitForStatus(t, "web", "a new update revision", true, func(s *appsv1.StatefulSet) bool {
		return s.Status.UpdateRevision != s.Status.CurrentRevision
	})
	if st.Status.UpdatedReplicas != 0 {
		t.Errorf("updatedReplicas %d before any delete, want 0", st.Status.UpdatedReplicas)
	}
	for name, p := range r.livePods(t) {
		if image(p) != "web:1" {
			t.Errorf("%s runs %s before it was deleted, want web:1", name, image(p))
		}
	}
	if err := r.pods.Delete(testCtx(t), ns, "web-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitForStatus(t, "web", "web-0 replaced", true, func(s *appsv1.StatefulSet) bool { return s.Status.UpdatedReplicas == 1 })
	pods := r.livePods(t)
	if image(pods["web-0"]) != "web:2" || image(pods["web-1"]) != "web:1" {
		t.Errorf("web-0 runs %s and web-1 %s, want web:2 and web:1", image(pods["web-0"]), image(pods["web-1"]))
	}
}

// TestClaimRetention: with whenDeleted and whenScaled Delete, claims are
// owned by the set, a scale down's claims by their pod too, and the
// garbage collector deletes them with the pod, and the rest with the set.
func TestClaimRetention(t *testing.T) {
	r := runController(t, true)
	set := newSet("web", 2, appsv1.ParallelPodManagement)
	set.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
		WhenScaled:  appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
	}
	set = r.create(t, set)
	r.waitForStatus(t, "web", "2 ready", true, func(s *appsv1.StatefulSet) bool { return s.Status.ReadyReplicas == 2 })
	claim, err := r.claims.Get(testCtx(t), ns, "data-web-0")
	if err != nil {
		t.Fatal(err)
	}
	want := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: set.UID}
	if len(claim.OwnerReferences) != 1 || claim.OwnerReferences[0] != want {
		t.Errorf("claim owners %+v, want only %+v", claim.OwnerReferences, want)
	}

	r.update(t, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr(int32(1)) })
	controllertest.Eventually(t, "claim data-web-1 deleted with web-1", func() (bool, string) {
		return r.claimDeleted(t, "data-web-1")
	})
	if c, err := r.claims.Get(testCtx(t), ns, "data-web-0"); err != nil || c.DeletionTimestamp != nil {
		t.Fatalf("claim data-web-0 after scale down: %v; want it kept", err)
	}

	if err := r.sets.Delete(testCtx(t), ns, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "claim data-web-0 deleted with the set", func() (bool, string) {
		return r.claimDeleted(t, "data-web-0")
	})
}

// TestBadInput: a selector that does not match the template is 422
// Invalid naming the field, and the spec outside the mutable fields
// cannot change; neither writes anything.
func TestBadInput(t *testing.T) {
	r := runController(t, false)
	bad := newSet("web", 1, "")
	bad.Spec.Template.Labels = map[string]string{"app": "other"}
	_, err := r.sets.Create(testCtx(t), bad)
	if !client.IsInvalid(err) || !strings.Contains(err.Error(), "spec.template.metadata.labels: Invalid value") ||
		!strings.Contains(err.Error(), "`selector` does not match template `labels`") {
		t.Fatalf("create with a mismatched selector: %v, want 422 naming spec.template.metadata.labels", err)
	}
	var se *client.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != 422 {
		t.Errorf("status %+v, want code 422", se)
	}
	if list, _ := r.sets.List(testCtx(t), ns, metav1.ListOptions{}); len(list.Items) != 0 {
		t.Errorf("%d statefulsets after a refused create", len(list.Items))
	}

	r.create(t, newSet("web", 1, ""))
	cur, _ := r.sets.Get(testCtx(t), ns, "web")
	cur.Spec.ServiceName = "other"
	_, err = r.sets.Update(testCtx(t), cur)
	if !client.IsInvalid(err) || !strings.Contains(err.Error(), "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden") {
		t.Errorf("update of serviceName: %v, want kube's forbidden message", err)
	}
}

// TestTemplateNotAPod: the API server does not validate a StatefulSet's
// template as a pod, as kube-apiserver does not (its containers mount
// the claim templates, volumes it does not list). A container that mounts
// its claim template runs; a template that makes an invalid pod is
// accepted, and the pod's refusal is a FailedCreate event on the set,
// with no pod made.
func TestTemplateNotAPod(t *testing.T) {
	r := runController(t, false)
	mounts := newSet("web", 1, "")
	mounts.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	r.create(t, mounts)
	controllertest.Eventually(t, "web-0 made, mounting data-web-0", func() (bool, string) {
		pod, err := r.pods.Get(testCtx(t), ns, "web-0")
		if err != nil {
			return false, err.Error()
		}
		return slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
			return v.Name == "data" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "data-web-0"
		}), fmt.Sprintf("volumes %+v", pod.Spec.Volumes)
	})

	noImage := newSet("noimage", 1, "")
	noImage.Spec.Template.Spec.Containers[0].Image = ""
	r.create(t, noImage)
	want := `Warning FailedCreate create Pod noimage-0 in StatefulSet noimage failed error: Pod "noimage-0" is invalid: spec.containers[0].image: Required value`
	controllertest.Eventually(t, "a FailedCreate event", func() (bool, string) {
		return slices.Contains(r.recorder.WithReason("FailedCreate"), want), fmt.Sprint(r.recorder.WithReason("FailedCreate"))
	})
	if _, err := r.pods.Get(testCtx(t), ns, "noimage-0"); !client.IsNotFound(err) {
		t.Errorf("pod noimage-0: %v, want none", err)
	}
}

// claimDeleted: the claim is gone, or being deleted (the
// kubernetes.io/pvc-protection finalizer that admission adds holds it
// until a controller no test runs here lets it go).
func (r *running) claimDeleted(t *testing.T, name string) (bool, string) {
	c, err := r.claims.Get(testCtx(t), ns, name)
	if client.IsNotFound(err) {
		return true, ""
	}
	if err != nil {
		return false, err.Error()
	}
	return c.DeletionTimestamp != nil, fmt.Sprintf("owners %v", c.OwnerReferences)
}

func ptr[T any](v T) *T { return &v }
