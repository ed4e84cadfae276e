package apiserver_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

const (
	classesPath = "/apis/storage.k8s.io/v1/storageclasses"
	pvsPath     = "/api/v1/persistentvolumes"
)

func pvcPath(ns, name string) string {
	p := "/api/v1/namespaces/" + ns + "/persistentvolumeclaims"
	if name != "" {
		p += "/" + name
	}
	return p
}

func claim(name, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

// TestStorage serves PersistentVolumes, PersistentVolumeClaims and
// StorageClasses as kube-apiserver does: bad specs refused at kube's
// field with nothing stored, the standard class there from the start and
// given to claims that name none, the protection finalizers added on
// create, status written only through /status, and a class's provisioner
// fixed.
func TestStorage(t *testing.T) {
	env := testenv.Start(t)

	t.Run("invalid objects are 422 at kube's field and store nothing", func(t *testing.T) {
		noModes := claim("no-modes", "1Gi")
		noModes.Spec.AccessModes = nil
		noSource := &corev1.PersistentVolume{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
			ObjectMeta: metav1.ObjectMeta{Name: "no-source"},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			},
		}
		recycle := corev1.PersistentVolumeReclaimRecycle
		badClass := &storagev1.StorageClass{
			TypeMeta:      metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
			ObjectMeta:    metav1.ObjectMeta{Name: "bad"},
			Provisioner:   "example.com/x",
			ReclaimPolicy: &recycle,
		}
		for _, tc := range []struct {
			name, path, field, message string
			body                       any
		}{
			{"negative size", pvcPath("default", ""), "spec.resources[storage]", "must be greater than zero", claim("negative", "-1Gi")},
			{"no access modes", pvcPath("default", ""), "spec.accessModes", "at least 1 access mode is required", noModes},
			{"volume without a source", pvsPath, "spec", "must specify a volume type", noSource},
			{"class that recycles", classesPath, "reclaimPolicy", "Unsupported value", badClass},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := revision(t, env)
				st := do(t, env, http.MethodPost, tc.path, jsonType, tc.body).
					wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
				var fields []string
				if st.Details != nil {
					for _, c := range st.Details.Causes {
						fields = append(fields, c.Field)
					}
				}
				if !slices.Contains(fields, tc.field) || !strings.Contains(st.Message, tc.message) {
					t.Errorf("causes name %v, message %q; want %s and %q", fields, st.Message, tc.field, tc.message)
				}
				if after := revision(t, env); after != before {
					t.Errorf("etcd revision moved from %d to %d: something was written", before, after)
				}
			})
		}
	})

	t.Run("the standard class exists from the start and is the default", func(t *testing.T) {
		sc := get[storagev1.StorageClass](t, env, classesPath+"/standard")
		if sc.Provisioner != "sim.minictl.io/hostpath" || *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
			*sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer ||
			sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" {
			t.Errorf("standard class = %+v", sc)
		}
	})

	t.Run("a claim naming no class gets the default and the protection finalizer", func(t *testing.T) {
		pvc := create[corev1.PersistentVolumeClaim](t, env, pvcPath("default", ""), claim("data", "1Gi"))
		if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "standard" {
			t.Errorf("storageClassName = %v, want standard", pvc.Spec.StorageClassName)
		}
		if !slices.Contains(pvc.Finalizers, "kubernetes.io/pvc-protection") {
			t.Errorf("finalizers = %v, want kubernetes.io/pvc-protection", pvc.Finalizers)
		}
		if pvc.Status.Phase != corev1.ClaimPending || *pvc.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
			t.Errorf("phase %q volumeMode %v, want Pending and Filesystem", pvc.Status.Phase, *pvc.Spec.VolumeMode)
		}

		none := claim("classless", "1Gi")
		none.Spec.StorageClassName = new(string)
		got := create[corev1.PersistentVolumeClaim](t, env, pvcPath("default", ""), none)
		if got.Spec.StorageClassName == nil || *got.Spec.StorageClassName != "" {
			t.Errorf("a claim asking for no class got %v", got.Spec.StorageClassName)
		}
	})

	t.Run("a volume gets its defaults and the protection finalizer; status only through /status", func(t *testing.T) {
		pv := &corev1.PersistentVolume{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
			ObjectMeta: metav1.ObjectMeta{Name: "pv1"},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/pv1"}},
			},
			Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
		}
		got := create[corev1.PersistentVolume](t, env, pvsPath, pv)
		if got.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || got.Status.Phase != corev1.VolumePending ||
			!slices.Contains(got.Finalizers, "kubernetes.io/pv-protection") {
			t.Errorf("reclaim %q phase %q finalizers %v, want Retain, Pending, kubernetes.io/pv-protection",
				got.Spec.PersistentVolumeReclaimPolicy, got.Status.Phase, got.Finalizers)
		}
		got.Status.Phase = corev1.VolumeAvailable
		got.Spec.StorageClassName = "manual"
		updated := update[corev1.PersistentVolume](t, env, pvsPath+"/pv1", got)
		if updated.Status.Phase != corev1.VolumePending || updated.Spec.StorageClassName != "manual" {
			t.Errorf("main update: phase %q class %q, want the phase kept and the class changed", updated.Status.Phase, updated.Spec.StorageClassName)
		}
		updated.Status.Phase = corev1.VolumeAvailable
		status := update[corev1.PersistentVolume](t, env, pvsPath+"/pv1/status", updated)
		if status.Status.Phase != corev1.VolumeAvailable || status.Status.LastPhaseTransitionTime == nil {
			t.Errorf("status update: phase %q transition %v", status.Status.Phase, status.Status.LastPhaseTransitionTime)
		}
	})

	t.Run("a class's provisioner is fixed, and a claim may not grow unless its class allows it", func(t *testing.T) {
		sc := get[storagev1.StorageClass](t, env, classesPath+"/standard")
		sc.Provisioner = "example.com/other"
		do(t, env, http.MethodPut, classesPath+"/standard", jsonType, sc).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)

		pvc := get[corev1.PersistentVolumeClaim](t, env, pvcPath("default", "data"))
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		st := do(t, env, http.MethodPut, pvcPath("default", "data"), jsonType, pvc).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if !strings.Contains(st.Message, "spec is immutable after creation") {
			t.Errorf("growing a Pending claim: %q", st.Message)
		}
		pvc.Status.Phase = corev1.ClaimBound
		bound := update[corev1.PersistentVolumeClaim](t, env, pvcPath("default", "data")+"/status", pvc)
		bound.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		do(t, env, http.MethodPut, pvcPath("default", "data"), jsonType, bound).wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
	})
}
