package namespace

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/testenv"
)

// A deleted namespace is emptied, pods first, waits for the pod a kubelet
// is still finishing, and then goes; another namespace is untouched.
func TestDeletedNamespaceIsEmptiedThenRemoved(t *testing.T) {
	t.Parallel()
	r := runController(t)
	rc := r.rc

	for _, name := range []string{"team-a", "team-b"} {
		create(t, rc, newNamespace(name))
	}
	replicas := int32(2)
	create(t, rc, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
			},
		},
	})
	create(t, rc, newPod("team-a", "loose-1", ""))
	create(t, rc, newPod("team-a", "loose-2", ""))
	// Bound to a node: its delete is graceful and waits for a kubelet. A
	// short grace period keeps the controller's next look near.
	bound := newPod("team-a", "bound", "fake-node")
	grace := int64(4)
	bound.Spec.TerminationGracePeriodSeconds = &grace
	create(t, rc, bound)
	create(t, rc, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80}},
		},
	})
	create(t, rc, newConfigMap("team-a", "cfg-1"))
	create(t, rc, newConfigMap("team-a", "cfg-2"))
	create(t, rc, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "team-a"},
		StringData: map[string]string{"password": "hunter2"},
	})
	create(t, rc, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "quota", Namespace: "team-a"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}},
	})
	create(t, rc, newConfigMap("team-b", "keep"))
	create(t, rc, newPod("team-b", "keep", ""))

	deleteNamespace(t, rc, "team-a")

	// The unscheduled pods go at once; the bound one stays Terminating,
	// and the namespace says so.
	waitForCondition(t, rc, "team-a", corev1.NamespaceContentRemaining,
		"Some resources are remaining: pods. has 1 resource instances")
	for _, name := range []string{"loose-1", "loose-2"} {
		if exists[*corev1.Pod](t, rc, "team-a", name) {
			t.Errorf("unscheduled pod %s still exists", name)
		}
	}
	pod, err := client.For[*corev1.Pod](rc).Get(testCtx(t), "team-a", "bound")
	if err != nil {
		t.Fatalf("the bound pod is gone before its kubelet finished it: %v", err)
	}
	if pod.DeletionTimestamp == nil {
		t.Errorf("the bound pod is not being deleted")
	}
	// Pods go first: the rest waits for the last of them.
	if !exists[*corev1.ConfigMap](t, rc, "team-a", "cfg-1") {
		t.Errorf("configmap cfg-1 deleted while a pod still runs")
	}
	c, ns, _ := condition(t, rc, "team-a", corev1.NamespaceContentRemaining)
	if c.Reason != "SomeResourcesRemain" || ns.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("reason %q, phase %q; want SomeResourcesRemain, Terminating", c.Reason, ns.Status.Phase)
	}
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		t.Errorf("finalizer removed while a pod remains: %v", ns.Spec.Finalizers)
	}

	// Play the kubelet: the pod has stopped.
	zero := int64(0)
	if err := client.For[*corev1.Pod](rc).Delete(testCtx(t), "team-a", "bound", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("finish pod: %v", err)
	}
	waitForNamespaceGone(t, rc, "team-a")

	for _, check := range []struct {
		kind string
		gone bool
	}{
		{"deployment web", !exists[*appsv1.Deployment](t, rc, "team-a", "web")},
		{"service web", !exists[*corev1.Service](t, rc, "team-a", "web")},
		{"configmap cfg-1", !exists[*corev1.ConfigMap](t, rc, "team-a", "cfg-1")},
		{"configmap cfg-2", !exists[*corev1.ConfigMap](t, rc, "team-a", "cfg-2")},
		{"secret creds", !exists[*corev1.Secret](t, rc, "team-a", "creds")},
		{"resourcequota quota", !exists[*corev1.ResourceQuota](t, rc, "team-a", "quota")},
		{"pod bound", !exists[*corev1.Pod](t, rc, "team-a", "bound")},
	} {
		if !check.gone {
			t.Errorf("%s outlived its namespace", check.kind)
		}
	}
	if !exists[*corev1.ConfigMap](t, rc, "team-b", "keep") || !exists[*corev1.Pod](t, rc, "team-b", "keep") {
		t.Errorf("content of namespace team-b was deleted")
	}
	if _, _, ok := condition(t, rc, "team-b", corev1.NamespaceContentRemaining); !ok {
		t.Errorf("namespace team-b is gone")
	}
	if !slices.ContainsFunc(r.recorder.Events(), func(e string) bool { return strings.HasPrefix(e, "Normal Finalized Namespace team-a is empty") }) {
		t.Errorf("no Finalized event; got %q", r.recorder.Events())
	}
}

// A kind added to the catalogue, and nowhere else, is emptied from a
// deleted namespace like any other: discovery finds it, and the controller
// lists and deletes it by descriptor.
func TestDeletesAKindOnlyInTheCatalogue(t *testing.T) {
	t.Parallel()
	widgets := testenv.Widgets()
	r := runControllerOn(t, api.Resources().With(widgets))
	rc := r.rc
	ctx := testCtx(t)
	create(t, rc, newNamespace("team-w"))
	wc := client.ForResource(rc, widgets)
	for _, name := range []string{"plain", "held"} {
		w := &unstructured.Unstructured{}
		w.SetName(name)
		w.SetNamespace("team-w")
		if name == "held" {
			w.SetFinalizers([]string{"example.com/hold"})
		}
		if _, err := wc.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
	}

	deleteNamespace(t, rc, "team-w")
	waitForCondition(t, rc, "team-w", corev1.NamespaceContentRemaining,
		"Some resources are remaining: widgets.example.com has 1 resource instances")
	if _, err := wc.Get(ctx, "team-w", "plain"); !client.IsNotFound(err) {
		t.Errorf("widget plain: %v, want it deleted", err)
	}
	if _, err := wc.Patch(ctx, "team-w", "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)); err != nil {
		t.Fatal(err)
	}
	waitForNamespaceGone(t, rc, "team-w")
}

// A finalizer on content holds the namespace until it is removed.
func TestContentFinalizerHoldsNamespace(t *testing.T) {
	t.Parallel()
	r := runController(t)
	rc := r.rc

	create(t, rc, newNamespace("held"))
	create(t, rc, newConfigMap("held", "pinned", "example.com/hold"))
	create(t, rc, newConfigMap("held", "plain"))

	deleteNamespace(t, rc, "held")

	waitForCondition(t, rc, "held", corev1.NamespaceFinalizersRemaining,
		"Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances")
	c, _, _ := condition(t, rc, "held", corev1.NamespaceContentRemaining)
	if c.Status != corev1.ConditionTrue || c.Message != "Some resources are remaining: configmaps. has 1 resource instances" {
		t.Errorf("NamespaceContentRemaining: %s %q", c.Status, c.Message)
	}
	c, _, _ = condition(t, rc, "held", corev1.NamespaceFinalizersRemaining)
	if c.Reason != "SomeFinalizersRemain" {
		t.Errorf("NamespaceFinalizersRemaining reason %q", c.Reason)
	}
	c, _, _ = condition(t, rc, "held", corev1.NamespaceDeletionContentFailure)
	if c.Status != corev1.ConditionFalse || c.Reason != "ContentDeleted" {
		t.Errorf("NamespaceDeletionContentFailure: %s %s %q; a finalizer is not a failure", c.Status, c.Reason, c.Message)
	}
	if exists[*corev1.ConfigMap](t, rc, "held", "plain") {
		t.Errorf("configmap plain was not deleted")
	}
	cm, err := client.For[*corev1.ConfigMap](rc).Get(testCtx(t), "held", "pinned")
	if err != nil {
		t.Fatalf("get pinned: %v", err)
	}
	if cm.DeletionTimestamp == nil {
		t.Errorf("configmap pinned is not being deleted")
	}

	// Whoever owns the finalizer finishes its work.
	cm.Finalizers = nil
	if _, err := client.For[*corev1.ConfigMap](rc).Update(testCtx(t), cm); err != nil {
		t.Fatalf("remove finalizer: %v", err)
	}
	waitForNamespaceGone(t, rc, "held")
}

// A namespace whose last pod a kubelet finishes long before its grace
// period is over goes at once: the controller does not sleep out its
// estimate of the grace period.
func TestNamespaceGoesWhenItsLastPodDoes(t *testing.T) {
	t.Parallel()
	r := runController(t)
	rc := r.rc
	create(t, rc, newNamespace("quick"))
	create(t, rc, newPod("quick", "bound", "fake-node")) // the default grace period: 30s
	deleteNamespace(t, rc, "quick")
	waitForCondition(t, rc, "quick", corev1.NamespaceContentRemaining,
		"Some resources are remaining: pods. has 1 resource instances")

	// Play the kubelet: the pod has stopped, a moment after it was asked to.
	zero := int64(0)
	start := time.Now()
	if err := client.For[*corev1.Pod](rc).Delete(testCtx(t), "quick", "bound", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("finish pod: %v", err)
	}
	waitForNamespaceGone(t, rc, "quick")
	// Without the pod informer's nudge the next look would come after
	// half the grace period plus a second: 16s.
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("namespace gone %s after its last pod; want well under the 16s estimate", d.Round(time.Millisecond))
	}
}
