package expose

import (
	"context"
	"log/slog"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/testenv"
)

// startSuite is what envtest's BeforeSuite does, and more: a control
// plane for this test alone, with the garbage collector running, and
// the controller under test running against it until the test ends.
func startSuite(t *testing.T) *client.RESTClient {
	env := testenv.Start(t, testenv.WithControllers("garbagecollector"))
	rc := env.Client()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, rc, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() { // runs before the Env stops: cleanups run last first
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	return rc
}

// TestExpose: an annotated Deployment gets its Service, owned by it;
// without the annotation the Service goes; deleting the Deployment
// deletes the Service through the garbage collector.
func TestExpose(t *testing.T) {
	rc := startSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deployments, services := client.For[*appsv1.Deployment](rc), client.For[*corev1.Service](rc)
	labels := map[string]string{"app": "web"}
	d, err := deployments.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{Annotation: "true"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "Service web owned by Deployment web", func() bool {
		s, err := services.Get(ctx, "default", "web")
		return err == nil && len(s.OwnerReferences) == 1 && s.OwnerReferences[0].UID == d.UID && s.Spec.Selector["app"] == "web"
	})

	patch := `{"metadata":{"annotations":{"` + Annotation + `":null}}}`
	if _, err := deployments.Patch(ctx, "default", "web", types.MergePatchType, []byte(patch)); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "Service web gone once the annotation is", func() bool {
		_, err := services.Get(ctx, "default", "web")
		return client.IsNotFound(err)
	})

	if _, err := deployments.Patch(ctx, "default", "web", types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+Annotation+`":"true"}}}`)); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "Service web back", func() bool {
		_, err := services.Get(ctx, "default", "web")
		return err == nil
	})
	if err := deployments.Delete(ctx, "default", "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the garbage collector to delete Service web", func() bool {
		_, err := services.Get(ctx, "default", "web")
		return client.IsNotFound(err)
	})
}

func eventually(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
