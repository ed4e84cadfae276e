package api

import (
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The columns of `kubectl get pv,pvc,sc`, as kube-apiserver prints them.

var (
	pvSpecDoc  = corev1.PersistentVolumeSpec{}.SwaggerDoc()
	pvcSpecDoc = corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()
	scDoc      = storagev1.StorageClass{}.SwaggerDoc()
)

var persistentVolumeTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Capacity", Type: "string", Description: pvSpecDoc["capacity"]},
	{Name: "Access Modes", Type: "string", Description: pvSpecDoc["accessModes"]},
	{Name: "Reclaim Policy", Type: "string", Description: pvSpecDoc["persistentVolumeReclaimPolicy"]},
	{Name: "Status", Type: "string", Description: corev1.PersistentVolumeStatus{}.SwaggerDoc()["phase"]},
	{Name: "Claim", Type: "string", Description: pvSpecDoc["claimRef"]},
	{Name: "StorageClass", Type: "string", Description: "StorageClass of the pv"},
	{Name: "VolumeAttributesClass", Type: "string", Description: "VolumeAttributesClass of the pv"},
	{Name: "Reason", Type: "string", Description: corev1.PersistentVolumeStatus{}.SwaggerDoc()["reason"]},
	ageColumn,
	{Name: "VolumeMode", Type: "string", Priority: 1, Description: pvSpecDoc["volumeMode"]},
}, func(pv *corev1.PersistentVolume, now time.Time) []any {
	claim := ""
	if ref := pv.Spec.ClaimRef; ref != nil {
		claim = ref.Namespace + "/" + ref.Name
	}
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	phase := string(pv.Status.Phase)
	if pv.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	return []any{
		pv.Name, size.String(), AccessModesString(pv.Spec.AccessModes), string(pv.Spec.PersistentVolumeReclaimPolicy),
		phase, claim, VolumeClass(pv), orUnset(pv.Spec.VolumeAttributesClassName),
		pv.Status.Reason, age(pv.CreationTimestamp, now), orUnset((*string)(pv.Spec.VolumeMode)),
	}
})

// persistentVolumeClaimTable shows a claim's capacity and access modes
// only once it names its volume: before that they are what was asked,
// not what was got.
var persistentVolumeClaimTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Status", Type: "string", Description: corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["phase"]},
	{Name: "Volume", Type: "string", Description: pvcSpecDoc["volumeName"]},
	{Name: "Capacity", Type: "string", Description: corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["capacity"]},
	{Name: "Access Modes", Type: "string", Description: corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["accessModes"]},
	{Name: "StorageClass", Type: "string", Description: "StorageClass of the pvc"},
	{Name: "VolumeAttributesClass", Type: "string", Description: "VolumeAttributesClass of the pvc"},
	ageColumn,
	{Name: "VolumeMode", Type: "string", Priority: 1, Description: pvcSpecDoc["volumeMode"]},
}, func(pvc *corev1.PersistentVolumeClaim, now time.Time) []any {
	phase := string(pvc.Status.Phase)
	if pvc.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	capacity, modes := "", ""
	if pvc.Spec.VolumeName != "" {
		size := pvc.Status.Capacity[corev1.ResourceStorage]
		capacity, modes = size.String(), AccessModesString(pvc.Status.AccessModes)
	}
	return []any{
		pvc.Name, phase, pvc.Spec.VolumeName, capacity, modes, ClaimClass(pvc),
		orUnset(pvc.Spec.VolumeAttributesClassName), age(pvc.CreationTimestamp, now), orUnset((*string)(pvc.Spec.VolumeMode)),
	}
})

// storageClassTable marks the default class after its name, as kubectl
// users know it: "standard (default)".
var storageClassTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Provisioner", Type: "string", Description: scDoc["provisioner"]},
	{Name: "ReclaimPolicy", Type: "string", Description: scDoc["reclaimPolicy"]},
	{Name: "VolumeBindingMode", Type: "string", Description: scDoc["volumeBindingMode"]},
	{Name: "AllowVolumeExpansion", Type: "string", Description: scDoc["allowVolumeExpansion"]},
	ageColumn,
}, func(sc *storagev1.StorageClass, now time.Time) []any {
	name := sc.Name
	if IsDefaultClass(sc) {
		name += " (default)"
	}
	reclaim := string(corev1.PersistentVolumeReclaimDelete)
	if sc.ReclaimPolicy != nil {
		reclaim = string(*sc.ReclaimPolicy)
	}
	mode := string(storagev1.VolumeBindingImmediate)
	if sc.VolumeBindingMode != nil {
		mode = string(*sc.VolumeBindingMode)
	}
	// kube prints a bool here; its text is the same, and minictl's cells
	// are strings or integers.
	expand := strconv.FormatBool(sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion)
	return []any{name, sc.Provisioner, reclaim, mode, expand, age(sc.CreationTimestamp, now)}
})

// AccessModesString is kubectl's short form of access modes, in a fixed
// order whatever order they were given in: "RWO,ROX,RWX,RWOP".
func AccessModesString(modes []corev1.PersistentVolumeAccessMode) string {
	var out []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{
		{corev1.ReadWriteOnce, "RWO"}, {corev1.ReadOnlyMany, "ROX"},
		{corev1.ReadWriteMany, "RWX"}, {corev1.ReadWriteOncePod, "RWOP"},
	} {
		if contains(modes, m.mode) {
			out = append(out, m.short)
		}
	}
	return strings.Join(out, ",")
}

func orUnset[S ~string](s *S) string {
	if s == nil {
		return "<unset>"
	}
	return string(*s)
}
