package pvprotection

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

// TestABoundVolumeIsNotDeletedUntilReleased runs the controller, with one
// worker, against a real API server, and writes the volumes' phases as
// the binder would: a Bound volume stays, marked for deletion, until it
// is Released; an Available one goes at once.
func TestABoundVolumeIsNotDeletedUntilReleased(t *testing.T) {
	env := controllertest.Start(t)
	c, err := New(Options{Common: controller.Common{Client: env.Client, Informers: env.Informers, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 1, c)
	pvs := client.For[*corev1.PersistentVolume](env.Client)
	create := func(name string, phase corev1.PersistentVolumePhase) {
		t.Helper()
		pv, err := pvs.Create(testCtx(t), &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name}},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		pv.Status.Phase = phase
		if _, err := pvs.UpdateStatus(testCtx(t), pv); err != nil {
			t.Fatal(err)
		}
	}
	create("bound", corev1.VolumeBound)
	create("free", corev1.VolumeAvailable)
	controllertest.Eventually(t, "the controller's cache has both volumes' phases", func() (bool, string) {
		b, err1 := c.volumeList.Get("", "bound")
		f, err2 := c.volumeList.Get("", "free")
		return err1 == nil && err2 == nil && b.Status.Phase == corev1.VolumeBound && f.Status.Phase == corev1.VolumeAvailable, ""
	})
	for _, name := range []string{"bound", "free"} {
		if err := pvs.Delete(testCtx(t), "", name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// One worker takes keys in the order they came: once the free
	// volume, deleted second, is gone, the bound one has been decided on.
	controllertest.Eventually(t, "the Available volume gone", func() (bool, string) {
		_, err := pvs.Get(testCtx(t), "", "free")
		return client.IsNotFound(err), fmt.Sprint(err)
	})
	pv, err := pvs.Get(testCtx(t), "", "bound")
	if err != nil {
		t.Fatalf("the Bound volume: %v", err)
	}
	if pv.DeletionTimestamp == nil || !slices.Contains(pv.Finalizers, "kubernetes.io/pv-protection") {
		t.Errorf("Bound volume: deletionTimestamp %v finalizers %v, want marked for deletion and still protected", pv.DeletionTimestamp, pv.Finalizers)
	}
	pv.Status.Phase = corev1.VolumeReleased
	if _, err := pvs.UpdateStatus(testCtx(t), pv); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the volume gone once Released", func() (bool, string) {
		_, err := pvs.Get(testCtx(t), "", "bound")
		return client.IsNotFound(err), fmt.Sprint(err)
	})
}
