package pvcprotection

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newClaim(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// TestAClaimInUseIsNotDeletedUntilItsPodIsGone runs the controller, with
// one worker, against a real API server: a claim that a scheduled pod
// names stays, marked for deletion, until the pod is deleted; a claim no
// pod uses goes at once.
func TestAClaimInUseIsNotDeletedUntilItsPodIsGone(t *testing.T) {
	env := controllertest.Start(t)
	c, err := New(Options{Common: controller.Common{Client: env.Client, Informers: env.Informers, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 1, c)
	claims := client.For[*corev1.PersistentVolumeClaim](env.Client)
	pods := client.For[*corev1.Pod](env.Client)

	for _, name := range []string{"data", "spare"} {
		pvc, err := claims.Create(testCtx(t), newClaim(name))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(pvc.Finalizers, "kubernetes.io/pvc-protection") {
			t.Fatalf("claim %s created with finalizers %v", name, pvc.Finalizers)
		}
	}
	if _, err := pods.Create(testCtx(t), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:   "node-1",
			Containers: []corev1.Container{{Name: "db", Image: "postgres", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/postgresql"}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
			}}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	// Let the controller see the pod before the claim is deleted: the
	// live list would find it anyway, but the test should not lean on
	// that.
	controllertest.Eventually(t, "the controller's cache has the pod", func() (bool, string) {
		_, err := c.podList.Get("default", "db")
		return err == nil, fmt.Sprint(err)
	})

	if err := claims.Delete(testCtx(t), "default", "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := claims.Delete(testCtx(t), "default", "spare", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// One worker takes keys in the order they came: once the unused
	// claim, deleted second, is gone, the used one has been decided on.
	controllertest.Eventually(t, "the unused claim gone", func() (bool, string) {
		_, err := claims.Get(testCtx(t), "default", "spare")
		return client.IsNotFound(err), fmt.Sprint(err)
	})
	pvc, err := claims.Get(testCtx(t), "default", "data")
	if err != nil {
		t.Fatalf("the claim in use: %v", err)
	}
	if pvc.DeletionTimestamp == nil || !slices.Contains(pvc.Finalizers, "kubernetes.io/pvc-protection") {
		t.Errorf("claim in use: deletionTimestamp %v finalizers %v, want marked for deletion and still protected", pvc.DeletionTimestamp, pvc.Finalizers)
	}

	if err := pods.Delete(testCtx(t), "default", "db", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the claim gone once its pod is", func() (bool, string) {
		_, err := claims.Get(testCtx(t), "default", "data")
		return client.IsNotFound(err), fmt.Sprint(err)
	})
}

func TestUses(t *testing.T) {
	claim := newClaim("data")
	claim.UID = "c1"
	pod := func(node string, phase corev1.PodPhase, src corev1.VolumeSource) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "p1"},
			Spec:       corev1.PodSpec{NodeName: node, Volumes: []corev1.Volume{{Name: "v", VolumeSource: src}}},
			Status:     corev1.PodStatus{Phase: phase},
		}
	}
	named := corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}
	other := corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "logs"}}
	ephemeral := corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}
	ephClaim := newClaim("web-v")
	ephClaim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "p1", Controller: new(true)}}
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		claim *corev1.PersistentVolumeClaim
		want  bool
	}{
		{"scheduled pod naming the claim", pod("node-1", corev1.PodRunning, named), claim, true},
		{"finished pod naming the claim: kube keeps the claim until the pod object goes", pod("node-1", corev1.PodSucceeded, named), claim, true},
		{"unscheduled pod", pod("", corev1.PodPending, named), claim, false},
		{"another claim", pod("node-1", corev1.PodRunning, other), claim, false},
		{"running pod's ephemeral claim", pod("node-1", corev1.PodRunning, ephemeral), ephClaim, true},
		{"finished pod's ephemeral claim", pod("node-1", corev1.PodFailed, ephemeral), ephClaim, false},
	} {
		if got := uses(tc.pod, tc.claim); got != tc.want {
			t.Errorf("%s: uses = %v, want %v", tc.name, got, tc.want)
		}
	}
}
