package kubelet

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
)

// volumeOn is a hostPath volume reachable from the nodes labelled
// key=value only.
func volumeOn(name, key, value string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}},
			}}}},
		},
	}
}

// bindClaim binds claim to volume pvName as the persistentvolume-binder
// does: the volume's claimRef, then the claim's volumeName, then both
// statuses Bound.
func bindClaim(t *testing.T, rc *client.RESTClient, claim, pvName string) {
	t.Helper()
	ctx := context.Background()
	pvs, pvcs := client.For[*corev1.PersistentVolume](rc), client.For[*corev1.PersistentVolumeClaim](rc)
	pvc, err := pvcs.Get(ctx, "default", claim)
	if err != nil {
		t.Fatal(err)
	}
	pv, err := pvs.Get(ctx, "", pvName)
	if err != nil {
		t.Fatal(err)
	}
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "default", Name: claim, UID: pvc.UID}
	if pv, err = pvs.Update(ctx, pv); err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = corev1.VolumeBound
	if _, err = pvs.UpdateStatus(ctx, pv); err != nil {
		t.Fatal(err)
	}
	pvc.Spec.VolumeName = pvName
	metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, api.AnnBindCompleted, "yes")
	if pvc, err = pvcs.Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	if _, err = pvcs.UpdateStatus(ctx, pvc); err != nil {
		t.Fatal(err)
	}
}

func TestPodWaitsForItsClaimThenStarts(t *testing.T) {
	rc := newClient(t)
	events := &record.FakeRecorder{}
	startKubelet(t, rc, "node-1", func(o *Options) {
		o.Recorder = events
		o.VolumeMountTimeout = 300 * time.Millisecond
	})
	ctx := context.Background()
	class := ""
	_, err := client.For[*corev1.PersistentVolumeClaim](rc).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.For[*corev1.PersistentVolume](rc).Create(ctx, volumeOn("fast-disk", "disk", "fast")); err != nil {
		t.Fatal(err)
	}
	pod := newPod("db", "node-1")
	pod.Spec.Volumes = []corev1.Volume{{Name: "store", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
	}}}
	createPod(t, rc, pod)

	waitPod(t, rc, "db", "Pending, its container waiting ContainerCreating", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return p.Status.Phase == corev1.PodPending && len(cs) == 1 && cs[0].State.Waiting != nil &&
			cs[0].State.Waiting.Reason == reasonContainerCreating && condition(p, corev1.PodReadyToStartContainers) == corev1.ConditionFalse
	})
	want := "Warning FailedMount Unable to attach or mount volumes: unmounted volumes=[store], unattached volumes=[store]: timed out waiting for the condition"
	waitFor(t, "a FailedMount event", func() (bool, error) {
		got := events.WithReason("FailedMount")
		return len(got) > 0 && got[0] == want, nil
	})

	// Bound to a volume this node cannot reach (yet), it still waits.
	bindClaim(t, rc, "data", "fast-disk")
	time.Sleep(2 * volumePollInterval)
	if p, err := getPod(rc, "db"); err != nil || p.Status.Phase != corev1.PodPending || p.Status.StartTime != nil {
		t.Fatalf("pod whose volume is on another node: %+v, %v; want Pending, not started", p.Status, err)
	}

	// Once the node carries the label the volume asks for, it starts.
	labels := map[string]any{"metadata": map[string]any{"labels": map[string]string{"disk": "fast"}}}
	patch, _ := json.Marshal(labels)
	if _, err := client.For[*corev1.Node](rc).Patch(ctx, "", "node-1", types.MergePatchType, patch); err != nil {
		t.Fatal(err)
	}
	waitPod(t, rc, "db", "Running and Ready", runningAndReady)
}
