package api

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func minimalPV() *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv1"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/pv1"}},
		},
	}
}

func minimalPVC() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

func minimalClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: "example.com/fast"}
}

func TestDefaultStorageKinds(t *testing.T) {
	pv := minimalPV()
	PersistentVolumes.Default(pv)
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("PV reclaim policy = %q, want Retain for a volume made by hand", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	if pv.Spec.VolumeMode == nil || *pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("PV volumeMode = %v, want Filesystem", pv.Spec.VolumeMode)
	}
	checkErrors(t, PersistentVolumes.Validate(pv))

	pvc := minimalPVC()
	PersistentVolumeClaims.Default(pvc)
	if pvc.Spec.VolumeMode == nil || *pvc.Spec.VolumeMode != corev1.PersistentVolumeFilesystem || pvc.Status.Phase != corev1.ClaimPending {
		t.Errorf("PVC volumeMode %v phase %q, want Filesystem and Pending", pvc.Spec.VolumeMode, pvc.Status.Phase)
	}
	checkErrors(t, PersistentVolumeClaims.Validate(pvc))

	sc := minimalClass()
	StorageClasses.Default(sc)
	if *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete || *sc.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		t.Errorf("class reclaimPolicy %v bindingMode %v, want Delete and Immediate", *sc.ReclaimPolicy, *sc.VolumeBindingMode)
	}
	checkErrors(t, StorageClasses.Validate(sc))
}

func TestValidatePersistentVolumeClaim(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.PersistentVolumeClaim)
		want   []string
		detail string
	}{
		{"valid", func(*corev1.PersistentVolumeClaim) {}, nil, ""},
		{"negative size", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("-1Gi")
		}, []string{"spec.resources[storage]: Invalid value"}, "must be greater than zero"},
		{"zero size", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("0")
		}, []string{"spec.resources[storage]: Invalid value"}, "must be greater than zero"},
		{"no size", func(c *corev1.PersistentVolumeClaim) { c.Spec.Resources.Requests = nil },
			[]string{"spec.resources[storage]: Required value"}, ""},
		{"no access modes", func(c *corev1.PersistentVolumeClaim) { c.Spec.AccessModes = nil },
			[]string{"spec.accessModes: Required value"}, "at least 1 access mode is required"},
		{"unknown access mode", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadSometimes"}
		},
			[]string{"spec.accessModes: Unsupported value"}, ""},
		{"ReadWriteOncePod with another", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.AccessModes = append(c.Spec.AccessModes, corev1.ReadWriteOncePod)
		}, []string{"spec.accessModes: Forbidden"}, "may not use ReadWriteOncePod with other access modes"},
		{"bad class name", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptrTo("Fast_Disks") },
			[]string{"spec.storageClassName: Invalid value"}, ""},
		{"bad volume mode", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = ptrTo(corev1.PersistentVolumeMode("Tape")) },
			[]string{"spec.volumeMode: Unsupported value"}, ""},
		{"bad selector", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "In"}}}
		}, []string{"spec.selector.matchExpressions[0].values: Required value"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pvc := minimalPVC()
			PersistentVolumeClaims.Default(pvc)
			tt.mutate(pvc)
			errs := PersistentVolumeClaims.Validate(pvc)
			checkErrors(t, errs, tt.want...)
			if tt.detail != "" {
				checkDetail(t, errs, tt.detail)
			}
		})
	}
}

func TestValidatePersistentVolume(t *testing.T) {
	affinity := &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}},
	}}}}
	tests := []struct {
		name   string
		mutate func(*corev1.PersistentVolume)
		want   []string
		detail string
	}{
		{"valid", func(*corev1.PersistentVolume) {}, nil, ""},
		{"no capacity", func(pv *corev1.PersistentVolume) { pv.Spec.Capacity = nil },
			[]string{"spec.capacity: Required value", "spec.capacity: Unsupported value"}, ""},
		{"negative capacity", func(pv *corev1.PersistentVolume) {
			pv.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("-1Gi")
		}, []string{"spec.capacity[storage]: Invalid value", "spec.capacity[storage]: Invalid value"}, "must be greater than zero"},
		{"capacity other than storage", func(pv *corev1.PersistentVolume) { pv.Spec.Capacity[corev1.ResourceCPU] = resource.MustParse("1") },
			[]string{"spec.capacity: Unsupported value"}, ""},
		{"no access modes", func(pv *corev1.PersistentVolume) { pv.Spec.AccessModes = nil },
			[]string{"spec.accessModes: Required value"}, ""},
		{"no source", func(pv *corev1.PersistentVolume) { pv.Spec.HostPath = nil },
			[]string{"spec: Required value"}, "must specify a volume type"},
		{"two sources", func(pv *corev1.PersistentVolume) {
			pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: "example.com", VolumeHandle: "v"}
		}, []string{"spec.csi: Forbidden"}, "may not specify more than 1 volume type"},
		{"hostPath without path", func(pv *corev1.PersistentVolume) { pv.Spec.HostPath.Path = "" },
			[]string{"spec.hostPath.path: Required value"}, ""},
		{"hostPath climbing out", func(pv *corev1.PersistentVolume) { pv.Spec.HostPath.Path = "/data/../etc" },
			[]string{"spec.hostPath.path: Invalid value"}, "must not contain '..'"},
		{"local without node affinity", func(pv *corev1.PersistentVolume) {
			pv.Spec.HostPath, pv.Spec.Local = nil, &corev1.LocalVolumeSource{Path: "/mnt/disk"}
		}, []string{"spec.nodeAffinity: Required value"}, "Local volume requires node affinity"},
		{"local with node affinity", func(pv *corev1.PersistentVolume) {
			pv.Spec.HostPath, pv.Spec.Local, pv.Spec.NodeAffinity = nil, &corev1.LocalVolumeSource{Path: "/mnt/disk"}, affinity
		}, nil, ""},
		{"node affinity without required", func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{} },
			[]string{"spec.nodeAffinity.required: Required value"}, "must specify required node constraints"},
		{"node affinity In without values", func(pv *corev1.PersistentVolume) {
			pv.Spec.NodeAffinity = affinity.DeepCopy()
			pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values = nil
		}, []string{"spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values: Required value"}, ""},
		{"csi without handle", func(pv *corev1.PersistentVolume) {
			pv.Spec.HostPath, pv.Spec.CSI = nil, &corev1.CSIPersistentVolumeSource{Driver: "example.com"}
		}, []string{"spec.csi.volumeHandle: Required value"}, ""},
		{"unknown reclaim policy", func(pv *corev1.PersistentVolume) { pv.Spec.PersistentVolumeReclaimPolicy = "Shred" },
			[]string{"spec.persistentVolumeReclaimPolicy: Unsupported value"}, ""},
		{"recycling /", func(pv *corev1.PersistentVolume) {
			pv.Spec.HostPath.Path, pv.Spec.PersistentVolumeReclaimPolicy = "/", corev1.PersistentVolumeReclaimRecycle
		}, []string{"spec.persistentVolumeReclaimPolicy: Forbidden"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pv := minimalPV()
			PersistentVolumes.Default(pv)
			tt.mutate(pv)
			errs := PersistentVolumes.Validate(pv)
			checkErrors(t, errs, tt.want...)
			if tt.detail != "" {
				checkDetail(t, errs, tt.detail)
			}
		})
	}
}

func TestValidateStorageUpdates(t *testing.T) {
	pv := minimalPV()
	PersistentVolumes.Default(pv)
	changed := pv.DeepCopy()
	changed.Spec.HostPath.Path = "/elsewhere"
	checkErrors(t, PersistentVolumes.ValidateUpdate(changed, pv), "spec.persistentvolumesource: Forbidden")
	grown := pv.DeepCopy()
	grown.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("2Gi")
	grown.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "data"}
	checkErrors(t, PersistentVolumes.ValidateUpdate(grown, pv))

	pvc := minimalPVC()
	PersistentVolumeClaims.Default(pvc)
	bound := pvc.DeepCopy()
	bound.Spec.VolumeName = "pv1"
	checkErrors(t, PersistentVolumeClaims.ValidateUpdate(bound, pvc))
	rebound := bound.DeepCopy()
	rebound.Spec.VolumeName = "pv2"
	checkErrors(t, PersistentVolumeClaims.ValidateUpdate(rebound, bound), "spec: Forbidden")
	classed := pvc.DeepCopy()
	classed.Spec.StorageClassName = ptrTo("standard")
	checkErrors(t, PersistentVolumeClaims.ValidateUpdate(classed, pvc))
	reclassed := classed.DeepCopy()
	reclassed.Spec.StorageClassName = ptrTo("fast")
	checkErrors(t, PersistentVolumeClaims.ValidateUpdate(reclassed, classed), "spec: Forbidden")
	bigger := bound.DeepCopy()
	bigger.Status.Phase = corev1.ClaimBound
	bigger.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	checkErrors(t, PersistentVolumeClaims.ValidateUpdate(bigger, bound))
	smaller := bigger.DeepCopy()
	smaller.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1Gi")
	checkErrors(t, PersistentVolumeClaims.ValidateUpdate(smaller, bigger), "spec.resources.requests.storage: Forbidden")
	unbound := pvc.DeepCopy()
	unbound.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	checkErrors(t, PersistentVolumeClaims.ValidateUpdate(unbound, pvc), "spec: Forbidden")

	sc := minimalClass()
	StorageClasses.Default(sc)
	for name, mutate := range map[string]func(*storagev1.StorageClass){
		"provisioner: Forbidden":   func(c *storagev1.StorageClass) { c.Provisioner = "example.com/slow" },
		"parameters: Forbidden":    func(c *storagev1.StorageClass) { c.Parameters = map[string]string{"type": "ssd"} },
		"reclaimPolicy: Forbidden": func(c *storagev1.StorageClass) { c.ReclaimPolicy = ptrTo(corev1.PersistentVolumeReclaimRetain) },
		"volumeBindingMode: Invalid value": func(c *storagev1.StorageClass) {
			c.VolumeBindingMode = ptrTo(storagev1.VolumeBindingWaitForFirstConsumer)
		},
	} {
		changed := sc.DeepCopy()
		mutate(changed)
		checkErrors(t, StorageClasses.ValidateUpdate(changed, sc), name)
	}
	expandable := sc.DeepCopy()
	expandable.AllowVolumeExpansion = ptrTo(true)
	checkErrors(t, StorageClasses.ValidateUpdate(expandable, sc))
}

func TestValidateStorageClass(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*storagev1.StorageClass)
		want   []string
	}{
		{"no provisioner", func(c *storagev1.StorageClass) { c.Provisioner = "" }, []string{"provisioner: Required value"}},
		{"bad provisioner", func(c *storagev1.StorageClass) { c.Provisioner = "not a name" }, []string{"provisioner: Invalid value"}},
		{"Recycle", func(c *storagev1.StorageClass) { c.ReclaimPolicy = ptrTo(corev1.PersistentVolumeReclaimRecycle) },
			[]string{"reclaimPolicy: Unsupported value"}},
		{"unknown binding mode", func(c *storagev1.StorageClass) { c.VolumeBindingMode = ptrTo(storagev1.VolumeBindingMode("Later")) },
			[]string{"volumeBindingMode: Unsupported value"}},
		{"empty parameter key", func(c *storagev1.StorageClass) { c.Parameters = map[string]string{"": "x"} },
			[]string{"parameters: Invalid value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := minimalClass()
			StorageClasses.Default(sc)
			tt.mutate(sc)
			checkErrors(t, StorageClasses.Validate(sc), tt.want...)
		})
	}
}

func TestStorageTables(t *testing.T) {
	now := time.Now()
	pv := minimalPV()
	PersistentVolumes.Default(pv)
	pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce}
	pv.Spec.StorageClassName = "standard"
	pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "data"}
	pv.Status.Phase = corev1.VolumeBound
	pv.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
	checkRow(t, PersistentVolumes, pv, now,
		"pv1", "1Gi", "RWO,RWX", "Retain", "Bound", "default/data", "standard", "<unset>", "", "60s", "Filesystem")

	pvc := minimalPVC()
	PersistentVolumeClaims.Default(pvc)
	pvc.Spec.StorageClassName = ptrTo("standard")
	pvc.CreationTimestamp = pv.CreationTimestamp
	checkRow(t, PersistentVolumeClaims, pvc, now, "data", "Pending", "", "", "", "standard", "<unset>", "60s", "Filesystem")
	pvc.Spec.VolumeName = "pv1"
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: pv.Spec.AccessModes, Capacity: pv.Spec.Capacity}
	checkRow(t, PersistentVolumeClaims, pvc, now, "data", "Bound", "pv1", "1Gi", "RWO,RWX", "standard", "<unset>", "60s", "Filesystem")

	sc := minimalClass()
	StorageClasses.Default(sc)
	sc.Annotations = map[string]string{AnnDefaultStorageClass: "true"}
	sc.CreationTimestamp = pv.CreationTimestamp
	checkRow(t, StorageClasses, sc, now, "fast (default)", "example.com/fast", "Delete", "Immediate", "false", "60s")
}

func checkRow(t *testing.T, r *Resource, obj Object, now time.Time, want ...any) {
	t.Helper()
	row := r.TableRow(obj, now)
	if len(row.Cells) != len(r.TableColumns()) {
		t.Fatalf("%s: %d cells for %d columns", r.Kind, len(row.Cells), len(r.TableColumns()))
	}
	for i, w := range want {
		if row.Cells[i] != w {
			t.Errorf("%s column %s = %#v, want %#v", r.Kind, r.TableColumns()[i].Name, row.Cells[i], w)
		}
	}
}
