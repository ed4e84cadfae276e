package replicationcontroller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// These tests run the controller against a real API server on a real etcd.
// No kubelet or scheduler runs: pods stay Pending, so a delete removes
// them at once. The ReplicaSet controller's own tests cover the shared
// loop in depth; these show it at work on ReplicationControllers.

const ns = "default"

type running struct {
	rc       *client.RESTClient
	pods     *client.Client[*corev1.Pod]
	rcs      *client.Client[*corev1.ReplicationController]
	recorder *record.FakeRecorder
}

func runController(t *testing.T) *running {
	t.Helper()
	env := controllertest.Start(t)
	rec := &record.FakeRecorder{}
	c, err := New(Options{Common: controller.Common{
		Client: env.Client, Informers: env.Informers, Recorder: rec, Logger: controllertest.Logger(t),
	}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 2, c)
	return &running{
		rc: env.Client, pods: client.For[*corev1.Pod](env.Client),
		rcs: client.For[*corev1.ReplicationController](env.Client), recorder: rec,
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newRC is a ReplicationController whose selector the API server defaults
// from its template's labels.
func newRC(name string, replicas int32) *corev1.ReplicationController {
	return &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: &replicas,
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
			},
		},
	}
}

func (r *running) createRC(t *testing.T, rc *corev1.ReplicationController) *corev1.ReplicationController {
	t.Helper()
	out, err := r.rcs.Create(testCtx(t), rc)
	if err != nil {
		t.Fatalf("create replicationcontroller: %v", err)
	}
	return out
}

// ownedPods returns the pods rc controls.
func (r *running) ownedPods(t *testing.T, rc *corev1.ReplicationController) []*corev1.Pod {
	t.Helper()
	list, err := r.pods.List(testCtx(t), ns, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	var out []*corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == rc.UID {
			out = append(out, p)
		}
	}
	return out
}

func (r *running) waitForOwnedPods(t *testing.T, rc *corev1.ReplicationController, n int) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	controllertest.Eventually(t, fmt.Sprintf("%d pods owned by %s", n, rc.Name), func() (bool, string) {
		pods = r.ownedPods(t, rc)
		return len(pods) == n, fmt.Sprintf("%d pods", len(pods))
	})
	return pods
}

func podNames(pods []*corev1.Pod) []string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return names
}

func countEvents(rec *record.FakeRecorder, prefix string) int {
	n := 0
	for _, e := range rec.Events() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

func TestKeepsReplicasWithReplicationControllerOwnerReferences(t *testing.T) {
	r := runController(t)
	rc := r.createRC(t, newRC("web", 3))

	for _, p := range r.waitForOwnedPods(t, rc, 3) {
		if !strings.HasPrefix(p.Name, "web-") || p.Labels["app"] != "web" {
			t.Errorf("pod %s: labels %v, want web-<suffix> with the template's labels", p.Name, p.Labels)
		}
		if len(p.OwnerReferences) != 1 {
			t.Fatalf("pod %s: ownerReferences %+v, want one", p.Name, p.OwnerReferences)
		}
		ref := p.OwnerReferences[0]
		if ref.APIVersion != "v1" || ref.Kind != "ReplicationController" || ref.Name != "web" || ref.UID != rc.UID ||
			ref.Controller == nil || !*ref.Controller || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("pod %s: ownerReference %+v", p.Name, ref)
		}
	}
	controllertest.Eventually(t, "3 SuccessfulCreate events", func() (bool, string) {
		n := countEvents(r.recorder, "Normal SuccessfulCreate Created pod: web-")
		return n == 3, fmt.Sprintf("events %q", r.recorder.Events())
	})
	controllertest.Eventually(t, "status of 3 pods at the current generation", func() (bool, string) {
		cur, err := r.rcs.Get(testCtx(t), ns, "web")
		if err != nil {
			return false, err.Error()
		}
		s := cur.Status
		return s.Replicas == 3 && s.FullyLabeledReplicas == 3 && s.ObservedGeneration == cur.Generation,
			fmt.Sprintf("status %+v, generation %d", s, cur.Generation)
	})
}

func TestAdoptsAMatchingOrphan(t *testing.T) {
	r := runController(t)
	orphan, err := r.pods.Create(testCtx(t), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rc := r.createRC(t, newRC("web", 3))
	pods := r.waitForOwnedPods(t, rc, 3)
	if !slices.Contains(podNames(pods), "stray") {
		t.Fatalf("owned pods %v, want the orphan stray among them", podNames(pods))
	}
	adopted, err := r.pods.Get(testCtx(t), ns, "stray")
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(adopted); adopted.UID != orphan.UID || ref == nil ||
		ref.Kind != "ReplicationController" || ref.UID != rc.UID {
		t.Errorf("stray: uid %s (was %s), ownerReferences %+v", adopted.UID, orphan.UID, adopted.OwnerReferences)
	}
	controllertest.Eventually(t, "2 SuccessfulCreate events: the orphan counted", func() (bool, string) {
		n := countEvents(r.recorder, "Normal SuccessfulCreate")
		return n == 2, fmt.Sprintf("%d creates: %q", n, r.recorder.Events())
	})
}

func TestScalesThroughTheScaleSubresource(t *testing.T) {
	r := runController(t)
	rc := r.createRC(t, newRC("web", 2))
	r.waitForOwnedPods(t, rc, 2)

	for _, want := range []int32{4, 1} {
		scale, err := r.rcs.GetScale(testCtx(t), ns, "web")
		if err != nil {
			t.Fatal(err)
		}
		if scale.Status.Selector != "app=web" {
			t.Errorf("scale selector %q, want app=web", scale.Status.Selector)
		}
		scale.Spec.Replicas = want
		scale.ResourceVersion = "" // no compare-and-swap against the status writes
		if _, err := r.rcs.UpdateScale(testCtx(t), scale); err != nil {
			t.Fatalf("scale to %d: %v", want, err)
		}
		r.waitForOwnedPods(t, rc, int(want))
	}
	controllertest.Eventually(t, "3 SuccessfulDelete events", func() (bool, string) {
		n := countEvents(r.recorder, "Normal SuccessfulDelete Deleted pod: web-")
		return n == 3, fmt.Sprintf("%d deletes: %q", n, r.recorder.Events())
	})
}

func TestReplacesADeletedPod(t *testing.T) {
	r := runController(t)
	rc := r.createRC(t, newRC("web", 3))
	victim := r.waitForOwnedPods(t, rc, 3)[0].Name
	if err := r.pods.Delete(testCtx(t), ns, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "a replacement with a new name", func() (bool, string) {
		names := podNames(r.ownedPods(t, rc))
		return len(names) == 3 && !slices.Contains(names, victim), fmt.Sprintf("pods %v", names)
	})
}

func TestReleasesAndReplacesAPodWhoseLabelsStopMatching(t *testing.T) {
	r := runController(t)
	rc := r.createRC(t, newRC("web", 2))
	leaving := r.waitForOwnedPods(t, rc, 2)[0].Name
	for {
		cur, err := r.pods.Get(testCtx(t), ns, leaving)
		if err != nil {
			t.Fatal(err)
		}
		cur.Labels = map[string]string{"app": "debug"}
		_, err = r.pods.Update(testCtx(t), cur)
		if err == nil {
			break
		}
		if !client.IsConflict(err) {
			t.Fatal(err)
		}
	}
	controllertest.Eventually(t, "the pod released and replaced", func() (bool, string) {
		cur, err := r.pods.Get(testCtx(t), ns, leaving)
		if err != nil {
			return false, err.Error()
		}
		owned := podNames(r.ownedPods(t, rc))
		return len(cur.OwnerReferences) == 0 && len(owned) == 2 && !slices.Contains(owned, leaving),
			fmt.Sprintf("released pod's owners %+v, owned %v", cur.OwnerReferences, owned)
	})
}
