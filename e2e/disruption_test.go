package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

// TestDisruptionBudget is a budget end to end on the built binary: the
// disruption controller counts a Deployment's 3 Ready pods against
// minAvailable 2; one eviction is allowed and deletes its pod, which the
// ReplicaSet replaces; the next, while the first is still under way, is
// refused with 429 naming the budget; once the replacement is Ready the
// budget allows one again.
func TestDisruptionBudget(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast")
	rc := c.client(t)
	ctx := context.Background()
	pods, pdbs := client.For[*corev1.Pod](rc), client.For[*policyv1.PodDisruptionBudget](rc)
	labels := map[string]string{"app": "web"}
	if _, err := client.For[*appsv1.Deployment](rc).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}); err != nil {
		t.Fatal(err)
	}
	two := intstr.FromInt32(2)
	if _, err := pdbs.Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}); err != nil {
		t.Fatal(err)
	}
	allows := func(n int32) {
		t.Helper()
		eventually(t, fmt.Sprintf("the budget allows %d disruption", n), func() (bool, string) {
			pdb, err := pdbs.Get(ctx, "default", "web")
			if err != nil {
				return false, err.Error()
			}
			st := pdb.Status
			return st.ObservedGeneration == pdb.Generation && st.CurrentHealthy == 3 && st.DesiredHealthy == 2 && st.DisruptionsAllowed == n,
				fmt.Sprintf("status %+v", st)
		})
	}
	allows(1)

	var running []*corev1.Pod
	eventually(t, "3 pods running", func() (bool, string) {
		running = livePods(t, pods, "web")
		return runningReady(running) == 3, fmt.Sprintf("%d running", runningReady(running))
	})
	evict := func(name string) (int, map[string]any) {
		return c.do(http.MethodPost, "/api/v1/namespaces/default/pods/"+name+"/eviction", "application/json",
			`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"`+name+`"}}`)
	}
	if code, body := evict(running[0].Name); code != http.StatusCreated {
		t.Fatalf("first eviction: %d %v, want 201", code, body)
	}
	code, body := evict(running[1].Name)
	if code != http.StatusTooManyRequests || field(body, "reason") != "TooManyRequests" {
		t.Fatalf("second eviction: %d %v, want 429 TooManyRequests", code, body)
	}
	causes, _ := field(body, "details", "causes").([]any)
	// The cause's type is "reason" on the wire. The budget has 3 healthy,
	// or 2 once the controller has seen the first pod go.
	if len(causes) != 1 || field(causes[0].(map[string]any), "reason") != "DisruptionBudget" ||
		!strings.HasPrefix(field(causes[0].(map[string]any), "message").(string), "The disruption budget web needs 2 healthy pods and has ") {
		t.Errorf("causes %v, want the budget web named", causes)
	}
	if p, err := pods.Get(ctx, "default", running[1].Name); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the refused eviction touched its pod: %v %v", p, err)
	}

	// The evicted pod goes, the ReplicaSet replaces it, and the budget
	// counts 3 healthy again.
	eventually(t, "the evicted pod gone", func() (bool, string) {
		_, err := pods.Get(ctx, "default", running[0].Name)
		return client.IsNotFound(err), fmt.Sprint(err)
	})
	allows(1)
}
