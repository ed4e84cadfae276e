package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

func claimObj(name string, class *string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

func podWithClaimObj(name, claim string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "postgres:16"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}},
		},
	}
}

// eventMessages lists the messages of the events about object name with
// reason.
func eventMessages(rc *client.RESTClient, name, reason string) ([]string, error) {
	l, err := client.For[*corev1.Event](rc).List(context.Background(), "default", metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": name, "reason": reason}.String(),
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range l.Items {
		out = append(out, e.Message)
	}
	return out, nil
}

// TestPersistentStorage runs claims on the built binary, its components
// under their own identities: a pod with a claim of the default class
// (standard, WaitForFirstConsumer) runs once the claim is Bound to a
// volume provisioned on the pod's node; the claim, deleted while the pod
// uses it, stays Terminating until the pod is gone; and a claim whose
// provisioner nobody serves leaves its pod Pending, with events saying
// why.
func TestPersistentStorage(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast", "--nodes", "2")
	rc := c.client(t)
	ctx := context.Background()
	pods, pvcs, pvs := client.For[*corev1.Pod](rc), client.For[*corev1.PersistentVolumeClaim](rc), client.For[*corev1.PersistentVolume](rc)

	if _, err := pvcs.Create(ctx, claimObj("data", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, podWithClaimObj("db", "data")); err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	eventually(t, "pod db Running", func() (bool, string) {
		p, err := pods.Get(ctx, "default", "db")
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return p.Status.Phase == corev1.PodRunning, fmt.Sprintf("phase %s on %q", p.Status.Phase, p.Spec.NodeName)
	})
	pvc, err := pvcs.Get(ctx, "default", "data")
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || api.ClaimClass(pvc) != "standard" {
		t.Fatalf("claim: phase %s, class %q; want Bound, standard", pvc.Status.Phase, api.ClaimClass(pvc))
	}
	pv, err := pvs.Get(ctx, "", pvc.Spec.VolumeName)
	if err != nil {
		t.Fatal(err)
	}
	if aff := pv.Spec.NodeAffinity; aff == nil || aff.Required == nil ||
		aff.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != pod.Spec.NodeName {
		t.Fatalf("volume %s node affinity %+v; want the pod's node %s", pv.Name, pv.Spec.NodeAffinity, pod.Spec.NodeName)
	}

	// Deleted while the pod uses it, the claim stays, Terminating.
	if err := pvcs.Delete(ctx, "default", "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	pvc, err = pvcs.Get(ctx, "default", "data")
	if err != nil || pvc.DeletionTimestamp == nil || pvc.Status.Phase != corev1.ClaimBound {
		t.Fatalf("claim in use after its deletion: %v; want it Bound and Terminating", err)
	}
	if p, err := pods.Get(ctx, "default", "db"); err != nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("pod after its claim's deletion: %v; want it Running", err)
	}
	if err := pods.Delete(ctx, "default", "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "claim data gone with its pod", func() (bool, string) {
		_, err := pvcs.Get(ctx, "default", "data")
		return client.IsNotFound(err), fmt.Sprint(err)
	})

	// A provisioner nobody serves: the pod stays Pending.
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	if _, err := client.For[*storagev1.StorageClass](rc).Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "external"}, Provisioner: "example.com/external", VolumeBindingMode: &mode,
	}); err != nil {
		t.Fatal(err)
	}
	external := "external"
	if _, err := pvcs.Create(ctx, claimObj("ext", &external)); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, podWithClaimObj("stuck", "ext")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the claim waiting for its external provisioner", func() (bool, string) {
		msgs, err := eventMessages(rc, "ext", "ExternalProvisioning")
		return err == nil && len(msgs) > 0 && strings.Contains(msgs[0], "'example.com/external'"), fmt.Sprint(msgs, err)
	})
	// A scheduler that saw the pod before its claim says so first ("not
	// found"), and tries again: the event that counts is the bind timeout.
	eventually(t, "a FailedScheduling event on the pod once the bind timeout passed", func() (bool, string) {
		msgs, err := eventMessages(rc, "stuck", "FailedScheduling")
		want := `running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded`
		return err == nil && slices.Contains(msgs, want), fmt.Sprint(msgs, err)
	})
	if p, err := pods.Get(ctx, "default", "stuck"); err != nil || p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
		t.Fatalf("pod of the unserved claim: %v; want it Pending, unbound", err)
	}
}
