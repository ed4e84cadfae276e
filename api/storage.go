package api

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PersistentVolumes, PersistentVolumeClaims and StorageClasses: the
// storage a pod asks for by name. A claim (namespaced) asks for a size,
// access modes and a class; a volume (cluster-wide) is a piece of storage
// with a capacity and one source; the persistentvolume-binder pairs them,
// and a class says which provisioner makes a volume for a claim nobody's
// volume fits.

// The annotations the binder, the provisioners and the scheduler use to
// speak to one another about claims and volumes, with kube's names.
const (
	// AnnBindCompleted on a claim: the binder has finished binding it.
	AnnBindCompleted = "pv.kubernetes.io/bind-completed"
	// AnnBoundByController on a claim or volume: the binder, not a user,
	// set the volume's claimRef or the claim's volumeName.
	AnnBoundByController = "pv.kubernetes.io/bound-by-controller"
	// AnnDynamicallyProvisioned on a volume: the provisioner that made it.
	AnnDynamicallyProvisioned = "pv.kubernetes.io/provisioned-by"
	// AnnStorageProvisioner (and its beta twin) on a claim: the
	// provisioner that is expected to make its volume.
	AnnStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	AnnBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	// AnnSelectedNode on a claim of a WaitForFirstConsumer class: the node
	// the scheduler chose for the first pod that uses it.
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnBetaStorageClass is the class named by annotation, from before
	// storageClassName existed; it still wins over the field on a claim.
	AnnBetaStorageClass = corev1.BetaStorageClassAnnotation
	// AnnDefaultStorageClass (or its beta twin) set to "true" makes a
	// class the default for claims that name none.
	AnnDefaultStorageClass     = "storageclass.kubernetes.io/is-default-class"
	AnnBetaDefaultStorageClass = "storageclass.beta.kubernetes.io/is-default-class"

	// PVCProtectionFinalizer holds a claim that a pod still uses;
	// PVProtectionFinalizer holds a volume a claim is still bound to.
	PVCProtectionFinalizer = "kubernetes.io/pvc-protection"
	PVProtectionFinalizer  = "kubernetes.io/pv-protection"
)

// ClaimClass is the class a claim asks for: the beta annotation when it
// has one, else spec.storageClassName, else "" (kube's
// GetPersistentVolumeClaimClass).
func ClaimClass(pvc *corev1.PersistentVolumeClaim) string {
	if class, ok := pvc.Annotations[AnnBetaStorageClass]; ok {
		return class
	}
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	return ""
}

// VolumeClass is the class a volume belongs to: the beta annotation when
// it has one, else spec.storageClassName (kube's GetPersistentVolumeClass).
func VolumeClass(pv *corev1.PersistentVolume) string {
	if class, ok := pv.Annotations[AnnBetaStorageClass]; ok {
		return class
	}
	return pv.Spec.StorageClassName
}

// IsDefaultClass reports whether a class is marked as the default.
func IsDefaultClass(sc *storagev1.StorageClass) bool {
	return sc.Annotations[AnnDefaultStorageClass] == "true" || sc.Annotations[AnnBetaDefaultStorageClass] == "true"
}

var (
	supportedAccessModes = []corev1.PersistentVolumeAccessMode{
		corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteOncePod,
	}
	supportedPVReclaimPolicies = []corev1.PersistentVolumeReclaimPolicy{
		corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle, corev1.PersistentVolumeReclaimRetain,
	}
	supportedClassReclaimPolicies = []corev1.PersistentVolumeReclaimPolicy{
		corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRetain,
	}
	supportedVolumeModes   = []corev1.PersistentVolumeMode{corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem}
	supportedBindingModes  = []storagev1.VolumeBindingMode{storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer}
	supportedHostPathTypes = []corev1.HostPathType{
		corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory, corev1.HostPathFileOrCreate,
		corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev,
	}
)

// --- PersistentVolume ---

// defaultPersistentVolume is kube's v1 default: a volume made by hand
// keeps its data when released (Retain), is a filesystem, and a hostPath
// with no type checks nothing.
func defaultPersistentVolume(pv *corev1.PersistentVolume) {
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if pv.Spec.VolumeMode == nil {
		pv.Spec.VolumeMode = ptrTo(corev1.PersistentVolumeFilesystem)
	}
	if pv.Spec.HostPath != nil && pv.Spec.HostPath.Type == nil {
		pv.Spec.HostPath.Type = ptrTo(corev1.HostPathUnset)
	}
}

// A new volume is Pending, since the phase transition it records; the
// binder makes it Available. Its status is written through /status only,
// and each change of phase records when it happened, as kube's
// persistentvolume strategy does.

func preparePersistentVolumeForCreate(pv *corev1.PersistentVolume) {
	pv.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: transitionTime(pv)}
}

func preparePersistentVolumeForUpdate(pv, old *corev1.PersistentVolume) {
	pv.Status = old.Status
}

func preparePersistentVolumeForStatusUpdate(pv, old *corev1.PersistentVolume) {
	if pv.Status.Phase != old.Status.Phase {
		pv.Status.LastPhaseTransitionTime = ptrTo(metav1.Now().Rfc3339Copy())
	}
}

// transitionTime is the creation time of a volume being created: the
// moment it became Pending.
func transitionTime(pv *corev1.PersistentVolume) *metav1.Time {
	if t := pv.CreationTimestamp; !t.IsZero() {
		return &t
	}
	return ptrTo(metav1.Now().Rfc3339Copy())
}

// validatePersistentVolume is kube's ValidatePersistentVolumeSpec: access
// modes, a positive storage capacity and nothing else, a known reclaim
// policy and volume mode, node affinity that names nodes, and exactly one
// volume source, checked.
func validatePersistentVolume(pv *corev1.PersistentVolume) field.ErrorList {
	specPath := field.NewPath("spec")
	spec := &pv.Spec
	errs := validateAccessModes(spec.AccessModes, specPath.Child("accessModes"), "")
	capPath := specPath.Child("capacity")
	if len(spec.Capacity) == 0 {
		errs = append(errs, field.Required(capPath, ""))
	}
	if _, ok := spec.Capacity[corev1.ResourceStorage]; !ok || len(spec.Capacity) > 1 {
		errs = append(errs, field.NotSupported(capPath, spec.Capacity, []corev1.ResourceName{corev1.ResourceStorage}))
	}
	for _, name := range sortedKeys(spec.Capacity) {
		q := spec.Capacity[name]
		if q.Value() < 0 {
			errs = append(errs, field.Invalid(capPath.Key(string(name)), q.Value(), "must be a valid resource quantity"))
		}
		if q.Sign() <= 0 {
			errs = append(errs, field.Invalid(capPath.Key(string(name)), q.String(), "must be greater than zero"))
		}
	}
	if p := spec.PersistentVolumeReclaimPolicy; p != "" && !contains(supportedPVReclaimPolicies, p) {
		errs = append(errs, field.NotSupported(specPath.Child("persistentVolumeReclaimPolicy"), p, supportedPVReclaimPolicies))
	}
	hasAffinity := spec.NodeAffinity != nil
	if hasAffinity {
		errs = append(errs, validateVolumeNodeAffinity(spec.NodeAffinity, specPath.Child("nodeAffinity"))...)
	}
	errs = append(errs, validatePersistentVolumeSource(&spec.PersistentVolumeSource, hasAffinity, specPath)...)
	if spec.HostPath != nil && path.Clean(spec.HostPath.Path) == "/" && spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRecycle {
		errs = append(errs, field.Forbidden(specPath.Child("persistentVolumeReclaimPolicy"), "may not be 'recycle' for a hostPath mount of '/'"))
	}
	if spec.StorageClassName != "" {
		for _, msg := range isDNS1123Subdomain(spec.StorageClassName) {
			errs = append(errs, field.Invalid(specPath.Child("storageClassName"), spec.StorageClassName, msg))
		}
	}
	if m := spec.VolumeMode; m != nil && !contains(supportedVolumeModes, *m) {
		errs = append(errs, field.NotSupported(specPath.Child("volumeMode"), *m, supportedVolumeModes))
	}
	return errs
}

// validatePersistentVolumeSource counts the sources a volume names: it
// must name exactly one, and each is checked. minictl's nodes are
// simulated, so only the sources a learner writes by hand (hostPath,
// local, csi, nfs) are checked beyond being there.
func validatePersistentVolumeSource(src *corev1.PersistentVolumeSource, hasAffinity bool, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	one := func(name string, set bool, check func(*field.Path) field.ErrorList) {
		if !set {
			return
		}
		if n > 0 {
			errs = append(errs, field.Forbidden(specPath.Child(name), "may not specify more than 1 volume type"))
			return
		}
		n++
		if check != nil {
			errs = append(errs, check(specPath.Child(name))...)
		}
	}
	one("hostPath", src.HostPath != nil, func(p *field.Path) field.ErrorList { return validateHostPathSource(src.HostPath, p) })
	one("gcePersistentDisk", src.GCEPersistentDisk != nil, nil)
	one("awsElasticBlockStore", src.AWSElasticBlockStore != nil, nil)
	one("glusterfs", src.Glusterfs != nil, nil)
	one("nfs", src.NFS != nil, func(p *field.Path) field.ErrorList { return validateNFSSource(src.NFS, p) })
	one("rbd", src.RBD != nil, nil)
	one("quobyte", src.Quobyte != nil, nil)
	one("cephFS", src.CephFS != nil, nil)
	one("iscsi", src.ISCSI != nil, nil)
	one("cinder", src.Cinder != nil, nil)
	one("fc", src.FC != nil, nil)
	one("flexVolume", src.FlexVolume != nil, nil)
	one("azureFile", src.AzureFile != nil, nil)
	one("vsphereVolume", src.VsphereVolume != nil, nil)
	one("photonPersistentDisk", src.PhotonPersistentDisk != nil, nil)
	one("portworxVolume", src.PortworxVolume != nil, nil)
	one("azureDisk", src.AzureDisk != nil, nil)
	one("scaleIO", src.ScaleIO != nil, nil)
	one("local", src.Local != nil, func(p *field.Path) field.ErrorList {
		errs := validateLocalSource(src.Local, p)
		if !hasAffinity {
			errs = append(errs, field.Required(specPath.Child("nodeAffinity"), "Local volume requires node affinity"))
		}
		return errs
	})
	one("storageos", src.StorageOS != nil, nil)
	one("csi", src.CSI != nil, func(p *field.Path) field.ErrorList { return validateCSISource(src.CSI, p) })
	if n == 0 {
		errs = append(errs, field.Required(specPath, "must specify a volume type"))
	}
	return errs
}

func validateHostPathSource(hp *corev1.HostPathVolumeSource, fldPath *field.Path) field.ErrorList {
	if hp.Path == "" {
		return field.ErrorList{field.Required(fldPath.Child("path"), "")}
	}
	errs := validateNoBacksteps(hp.Path, fldPath.Child("path"))
	if hp.Type != nil && !contains(supportedHostPathTypes, *hp.Type) {
		errs = append(errs, field.NotSupported(fldPath.Child("type"), *hp.Type, supportedHostPathTypes))
	}
	return errs
}

func validateLocalSource(ls *corev1.LocalVolumeSource, fldPath *field.Path) field.ErrorList {
	if ls.Path == "" {
		return field.ErrorList{field.Required(fldPath.Child("path"), "")}
	}
	return validateNoBacksteps(ls.Path, fldPath.Child("path"))
}

func validateNFSSource(nfs *corev1.NFSVolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if nfs.Server == "" {
		errs = append(errs, field.Required(fldPath.Child("server"), ""))
	}
	switch {
	case nfs.Path == "":
		errs = append(errs, field.Required(fldPath.Child("path"), ""))
	case !path.IsAbs(nfs.Path):
		errs = append(errs, field.Invalid(fldPath.Child("path"), nfs.Path, "must be an absolute path"))
	}
	return errs
}

func validateCSISource(csi *corev1.CSIPersistentVolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if csi.Driver == "" {
		errs = append(errs, field.Required(fldPath.Child("driver"), ""))
	} else {
		errs = append(errs, validateQualifiedName(strings.ToLower(csi.Driver), fldPath.Child("driver"))...)
	}
	if csi.VolumeHandle == "" {
		errs = append(errs, field.Required(fldPath.Child("volumeHandle"), ""))
	}
	return errs
}

// validateNoBacksteps refuses a path with a ".." element, which could
// climb out of the directory it names.
func validateNoBacksteps(p string, fldPath *field.Path) field.ErrorList {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return field.ErrorList{field.Invalid(fldPath, p, "must not contain '..'")}
		}
	}
	return nil
}

// validateVolumeNodeAffinity: a volume's node affinity is its required
// node selector, which must be there and be valid.
func validateVolumeNodeAffinity(na *corev1.VolumeNodeAffinity, fldPath *field.Path) field.ErrorList {
	if na.Required == nil {
		return field.ErrorList{field.Required(fldPath.Child("required"), "must specify required node constraints")}
	}
	return validateNodeSelector(na.Required, fldPath.Child("required"))
}

// validateNodeSelector is kube's ValidateNodeSelector: at least one term,
// each requirement with a label key and the values its operator needs.
func validateNodeSelector(ns *corev1.NodeSelector, fldPath *field.Path) field.ErrorList {
	termsPath := fldPath.Child("nodeSelectorTerms")
	if len(ns.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(termsPath, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i, term := range ns.NodeSelectorTerms {
		termPath := termsPath.Index(i)
		for j, req := range term.MatchExpressions {
			errs = append(errs, validateNodeSelectorRequirement(req, termPath.Child("matchExpressions").Index(j), true)...)
		}
		for j, req := range term.MatchFields {
			errs = append(errs, validateNodeSelectorRequirement(req, termPath.Child("matchFields").Index(j), false)...)
		}
	}
	return errs
}

func validateNodeSelectorRequirement(req corev1.NodeSelectorRequirement, fldPath *field.Path, label bool) field.ErrorList {
	var errs field.ErrorList
	valuesPath := fldPath.Child("values")
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) == 0 {
			errs = append(errs, field.Required(valuesPath, "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(req.Values) > 0 {
			errs = append(errs, field.Forbidden(valuesPath, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(req.Values) != 1 {
			errs = append(errs, field.Required(valuesPath, "must be specified single value when `operator` is 'Lt' or 'Gt'"))
		}
	default:
		errs = append(errs, field.Invalid(fldPath.Child("operator"), req.Operator, "not a valid selector operator"))
	}
	if label {
		errs = append(errs, metav1validation.ValidateLabelName(req.Key, fldPath.Child("key"))...)
	}
	return errs
}

// validatePersistentVolumeUpdate is kube's ValidatePersistentVolumeUpdate:
// the source and the volume mode are fixed at creation, and node affinity
// once set may not change.
func validatePersistentVolumeUpdate(pv, old *corev1.PersistentVolume) field.ErrorList {
	var errs field.ErrorList
	if !apiequality.Semantic.DeepEqual(pv.Spec.PersistentVolumeSource, old.Spec.PersistentVolumeSource) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "persistentvolumesource"), "spec.persistentvolumesource is immutable after creation"))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(pv.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)
	if old.Spec.NodeAffinity != nil && !apiequality.Semantic.DeepEqual(pv.Spec.NodeAffinity, old.Spec.NodeAffinity) {
		errs = append(errs, field.Invalid(field.NewPath("nodeAffinity"), pv.Spec.NodeAffinity, apivalidation.FieldImmutableErrorMsg))
	}
	return errs
}

// --- PersistentVolumeClaim ---

// defaultPersistentVolumeClaim: a claim is a filesystem unless it asks
// for a block device.
func defaultPersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
	if pvc.Spec.VolumeMode == nil {
		pvc.Spec.VolumeMode = ptrTo(corev1.PersistentVolumeFilesystem)
	}
}

// A new claim is Pending with an empty status; only /status changes it.

func preparePersistentVolumeClaimForCreate(pvc *corev1.PersistentVolumeClaim) {
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
}

func preparePersistentVolumeClaimForUpdate(pvc, old *corev1.PersistentVolumeClaim) {
	pvc.Status = old.Status
}

// validatePersistentVolumeClaim is kube's
// ValidatePersistentVolumeClaimSpec.
func validatePersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) field.ErrorList {
	return ValidatePersistentVolumeClaimSpec(&pvc.Spec, field.NewPath("spec"))
}

// ValidatePersistentVolumeClaimSpec checks a claim's spec, as a claim or
// as a StatefulSet's claim template: at least one access mode, a positive
// storage request (its errors name spec.resources[storage], as kube's
// do), a valid selector, class and volume mode, and a data source that
// names a claim or a typed object.
func ValidatePersistentVolumeClaimSpec(spec *corev1.PersistentVolumeClaimSpec, fldPath *field.Path) field.ErrorList {
	errs := validateAccessModes(spec.AccessModes, fldPath.Child("accessModes"), "at least 1 access mode is required")
	if spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, fldPath.Child("selector"))...)
	}
	storagePath := fldPath.Child("resources").Key(string(corev1.ResourceStorage))
	if q, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(storagePath, ""))
	} else if q.Sign() <= 0 {
		errs = append(errs, field.Invalid(storagePath, q.String(), "must be greater than zero"))
	}
	if c := spec.StorageClassName; c != nil && *c != "" {
		for _, msg := range isDNS1123Subdomain(*c) {
			errs = append(errs, field.Invalid(fldPath.Child("storageClassName"), *c, msg))
		}
	}
	if m := spec.VolumeMode; m != nil && !contains(supportedVolumeModes, *m) {
		errs = append(errs, field.NotSupported(fldPath.Child("volumeMode"), *m, supportedVolumeModes))
	}
	if ds := spec.DataSource; ds != nil {
		errs = append(errs, validateDataSource(ds.Name, ds.Kind, ds.APIGroup, fldPath.Child("dataSource"))...)
	}
	if ds := spec.DataSourceRef; ds != nil {
		errs = append(errs, validateDataSource(ds.Name, ds.Kind, ds.APIGroup, fldPath.Child("dataSourceRef"))...)
	}
	return errs
}

func validateDataSource(name, kind string, group *string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	}
	if kind == "" {
		errs = append(errs, field.Required(fldPath.Child("kind"), ""))
	}
	if (group == nil || *group == "") && kind != "PersistentVolumeClaim" {
		errs = append(errs, field.Invalid(fldPath, kind, "must be 'PersistentVolumeClaim' when referencing the default apiGroup"))
	}
	if group != nil && *group != "" {
		for _, msg := range isDNS1123Subdomain(*group) {
			errs = append(errs, field.Invalid(fldPath.Child("apiGroup"), *group, msg))
		}
	}
	return errs
}

// validateAccessModes: at least one, each known, and ReadWriteOncePod
// alone. required is the Required error's detail (kube's differs between
// claims and volumes).
func validateAccessModes(modes []corev1.PersistentVolumeAccessMode, fldPath *field.Path, required string) field.ErrorList {
	var errs field.ErrorList
	if len(modes) == 0 {
		errs = append(errs, field.Required(fldPath, required))
	}
	oncePod, other := false, false
	for _, m := range modes {
		switch {
		case !contains(supportedAccessModes, m):
			errs = append(errs, field.NotSupported(fldPath, m, supportedAccessModes))
		case m == corev1.ReadWriteOncePod:
			oncePod = true
		default:
			other = true
		}
	}
	if oncePod && other {
		errs = append(errs, field.Forbidden(fldPath, "may not use ReadWriteOncePod with other access modes"))
	}
	return errs
}

// validatePersistentVolumeClaimUpdate is kube's
// ValidatePersistentVolumeClaimUpdate: a claim's spec is fixed at creation
// (so that quota and limits cannot be gamed), except that volumeName may
// be set once (by the binder), a class may be given to a claim that had
// none (the default class, given late), and a bound claim may ask for
// more storage, never less.
func validatePersistentVolumeClaimUpdate(pvc, old *corev1.PersistentVolumeClaim) field.ErrorList {
	var errs field.ErrorList
	newSpec, oldSpec := pvc.Spec.DeepCopy(), old.Spec.DeepCopy()
	if oldSpec.VolumeName == "" {
		oldSpec.VolumeName = newSpec.VolumeName
	}
	oldAnn, hadAnn := old.Annotations[AnnBetaStorageClass]
	if oldSpec.StorageClassName == nil && newSpec.StorageClassName != nil && (!hadAnn || *newSpec.StorageClassName == oldAnn) {
		oldSpec.StorageClassName = newSpec.StorageClassName
	}
	if a := pvc.Annotations[AnnBetaStorageClass]; a != old.Annotations[AnnBetaStorageClass] {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "annotations", AnnBetaStorageClass), a, apivalidation.FieldImmutableErrorMsg))
	}
	if pvc.Status.Phase == corev1.ClaimBound && newSpec.Resources.Requests != nil {
		if q, ok := oldSpec.Resources.Requests[corev1.ResourceStorage]; ok {
			newSpec.Resources.Requests[corev1.ResourceStorage] = q
		}
	}
	if !apiequality.Semantic.DeepEqual(newSpec, oldSpec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"))
	}
	newSize, oldSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage], old.Spec.Resources.Requests[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) < 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "resources", "requests", "storage"), "field can not be less than previous value"))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(pvc.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)
	return errs
}

// --- StorageClass ---

// defaultStorageClass is kube's v1 default: a class deletes the volumes
// it provisioned once released, and binds them at once.
func defaultStorageClass(sc *storagev1.StorageClass) {
	if sc.ReclaimPolicy == nil {
		sc.ReclaimPolicy = ptrTo(corev1.PersistentVolumeReclaimDelete)
	}
	if sc.VolumeBindingMode == nil {
		sc.VolumeBindingMode = ptrTo(storagev1.VolumeBindingImmediate)
	}
}

// The limits kube puts on a class's parameters.
const (
	maxProvisionerParameters    = 512
	maxProvisionerParameterSize = 256 << 10
)

// validateStorageClass is kube's ValidateStorageClass: a provisioner that
// is a qualified name, parameters with keys, a reclaim policy of Delete
// or Retain, a binding mode, and topologies that name labels.
func validateStorageClass(sc *storagev1.StorageClass) field.ErrorList {
	var errs field.ErrorList
	provPath := field.NewPath("provisioner")
	if sc.Provisioner == "" {
		errs = append(errs, field.Required(provPath, ""))
	} else {
		errs = append(errs, validateQualifiedName(strings.ToLower(sc.Provisioner), provPath)...)
	}
	paramsPath := field.NewPath("parameters")
	if len(sc.Parameters) > maxProvisionerParameters {
		errs = append(errs, field.TooLong(paramsPath, "Provisioner Parameters exceeded max allowed", maxProvisionerParameters))
	} else {
		size := 0
		for _, k := range sortedKeys(sc.Parameters) {
			if k == "" {
				errs = append(errs, field.Invalid(paramsPath, k, "field can not be empty."))
			}
			size += len(k) + len(sc.Parameters[k])
		}
		if size > maxProvisionerParameterSize {
			errs = append(errs, field.TooLong(paramsPath, "", maxProvisionerParameterSize))
		}
	}
	if p := sc.ReclaimPolicy; p != nil && !contains(supportedClassReclaimPolicies, *p) {
		errs = append(errs, field.NotSupported(field.NewPath("reclaimPolicy"), *p, supportedClassReclaimPolicies))
	}
	modePath := field.NewPath("volumeBindingMode")
	switch m := sc.VolumeBindingMode; {
	case m == nil:
		errs = append(errs, field.Required(modePath, ""))
	case !contains(supportedBindingModes, *m):
		errs = append(errs, field.NotSupported(modePath, *m, supportedBindingModes))
	}
	topoPath := field.NewPath("allowedTopologies")
	for i, term := range sc.AllowedTopologies {
		termPath := topoPath.Index(i)
		if len(term.MatchLabelExpressions) == 0 {
			errs = append(errs, field.Required(termPath.Child("matchLabelExpressions"), "must have at least one label expression"))
		}
		for j, expr := range term.MatchLabelExpressions {
			exprPath := termPath.Child("matchLabelExpressions").Index(j)
			errs = append(errs, metav1validation.ValidateLabelName(expr.Key, exprPath.Child("key"))...)
			if len(expr.Values) == 0 {
				errs = append(errs, field.Required(exprPath.Child("values"), "must specify as least one value"))
			}
		}
	}
	return errs
}

// validateStorageClassUpdate: what a class provisions with is fixed, so
// that its volumes stay what their claims were promised.
func validateStorageClassUpdate(sc, old *storagev1.StorageClass) field.ErrorList {
	var errs field.ErrorList
	if !apiequality.Semantic.DeepEqual(sc.Parameters, old.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	if sc.Provisioner != old.Provisioner {
		errs = append(errs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
	}
	if !apiequality.Semantic.DeepEqual(sc.ReclaimPolicy, old.ReclaimPolicy) {
		errs = append(errs, field.Forbidden(field.NewPath("reclaimPolicy"), "updates to reclaimPolicy are forbidden."))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(sc.VolumeBindingMode, old.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
	return errs
}
