package testenv_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/testenv"
)

// TestDeploymentGetsRunningPods: what envtest cannot show. With the
// controllers, the scheduler and nodes, a Deployment's pods are created,
// bound and Running; a deleted namespace is emptied and goes away.
func TestDeploymentGetsRunningPods(t *testing.T) {
	env := testenv.Start(t, testenv.WithControllers(), testenv.WithScheduler(), testenv.WithNodes(2), testenv.WithFast())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc := env.Client()
	namespaces := client.For[*corev1.Namespace](rc)
	if _, err := namespaces.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	_, err := client.For[*appsv1.Deployment](rc).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	})
	if err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	pods := client.For[*corev1.Pod](rc)
	eventually(ctx, t, "3 Running pods on nodes in shop", func() (bool, string) {
		list, err := pods.List(ctx, "shop", metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
				running++
			}
		}
		return running == 3, stateOf(list.Items)
	})
	deployment, err := client.For[*appsv1.Deployment](rc).Get(ctx, "shop", "web")
	if err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the Deployment's status to count 3 available", func() (bool, string) {
		deployment, err = client.For[*appsv1.Deployment](rc).Get(ctx, "shop", "web")
		if err != nil {
			return false, err.Error()
		}
		return deployment.Status.AvailableReplicas == 3, deployment.Status.String()
	})

	if err := namespaces.Delete(ctx, "", "shop", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	eventually(ctx, t, "namespace shop emptied and removed", func() (bool, string) {
		_, err := namespaces.Get(ctx, "", "shop")
		if client.IsNotFound(err) {
			return true, ""
		}
		list, _ := pods.List(ctx, "shop", metav1.ListOptions{})
		return false, "still there; pods: " + stateOf(list.Items)
	})
}

func stateOf(pods []*corev1.Pod) string {
	s := ""
	for _, p := range pods {
		s += p.Name + "=" + string(p.Status.Phase) + "@" + p.Spec.NodeName + " "
	}
	return s
}

// eventually polls cond until it holds, or fails the test when ctx ends
// with what was last seen.
func eventually(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	for {
		ok, seen := cond()
		if ok {
			return
		}
		last = seen
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: last seen: %s", what, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
