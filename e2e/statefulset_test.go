package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

// TestStatefulSet runs a 3-replica OrderedReady StatefulSet with a claim
// template on the built binary: a watch of its pods sees web-1 added only
// once web-0 is Ready, and web-2 once web-1 is; each pod runs with its
// claim data-web-<i> Bound to a volume the standard class provisioned for
// the node the scheduler chose for the pod.
func TestStatefulSet(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast", "--nodes", "3")
	rc := c.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sets, pods := client.For[*appsv1.StatefulSet](rc), client.For[*corev1.Pod](rc)
	claims, volumes := client.For[*corev1.PersistentVolumeClaim](rc), client.For[*corev1.PersistentVolume](rc)

	w, err := pods.Watch(ctx, "default", metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	n := int32(3)
	labels := map[string]string{"app": "web"}
	if _, err := sets.Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &n, ServiceName: "web",
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}); err != nil {
		t.Fatal(err)
	}

	ready := map[string]bool{}
	var added []string
	for len(ready) < 3 {
		ev, ok := <-w.Events()
		if !ok {
			t.Fatalf("watch ended: %v", w.Err())
		}
		p := ev.Object
		switch ev.Type {
		case watch.Added:
			added = append(added, p.Name)
			for j := range len(added) - 1 {
				if prev := fmt.Sprintf("web-%d", j); !ready[prev] {
					t.Fatalf("%s ADDED before %s was Ready (added so far %v)", p.Name, prev, added)
				}
			}
		case watch.Modified:
			if p.Status.Phase == corev1.PodRunning && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			}) {
				ready[p.Name] = true
			}
		}
	}
	if !slices.Equal(added, []string{"web-0", "web-1", "web-2"}) {
		t.Errorf("pods added %v, want web-0, web-1, web-2 in order", added)
	}

	for i := range 3 {
		pod, err := pods.Get(ctx, "default", fmt.Sprintf("web-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		claim, err := claims.Get(ctx, "default", fmt.Sprintf("data-web-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if claim.Status.Phase != corev1.ClaimBound || claim.Spec.VolumeName == "" {
			t.Errorf("claim %s is %s (volume %q), want Bound", claim.Name, claim.Status.Phase, claim.Spec.VolumeName)
			continue
		}
		pv, err := volumes.Get(ctx, "", claim.Spec.VolumeName)
		if err != nil {
			t.Fatal(err)
		}
		if !volumeOnNode(pv, pod.Spec.NodeName) {
			t.Errorf("volume %s of %s is not on %s, the node of %s: affinity %+v", pv.Name, claim.Name, pod.Spec.NodeName, pod.Name, pv.Spec.NodeAffinity)
		}
	}
}

// volumeOnNode reports whether pv's node affinity names node by hostname
// or name.
func volumeOnNode(pv *corev1.PersistentVolume, node string) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return false
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, req := range slices.Concat(term.MatchExpressions, term.MatchFields) {
			if slices.Contains(req.Values, node) {
				return true
			}
		}
	}
	return false
}
