package api

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// StatefulSets (apps/v1): pods with stable names, hostnames and claims,
// started, stopped and updated in ordinal order. Like a DaemonSet's, their
// ControllerRevisions hold the templates a StatefulSet has had.

// The apps/v1 defaults of a StatefulSet.
const (
	DefaultStatefulSetReplicas             = 1
	DefaultStatefulSetRevisionHistoryLimit = 10
)

// defaultStatefulSet is kube's SetDefaults_StatefulSet: OrderedReady pod
// management, a RollingUpdate strategy from partition 0, claims retained
// on delete and on scale down, one replica, a history of 10 revisions, and
// the pod and claim defaults in the templates.
func defaultStatefulSet(ss *appsv1.StatefulSet) {
	spec := &ss.Spec
	if spec.PodManagementPolicy == "" {
		spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if spec.UpdateStrategy.Type == "" {
		spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
	}
	if spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType {
		if spec.UpdateStrategy.RollingUpdate == nil {
			spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		if spec.UpdateStrategy.RollingUpdate.Partition == nil {
			spec.UpdateStrategy.RollingUpdate.Partition = ptrTo(int32(0))
		}
	}
	if spec.PersistentVolumeClaimRetentionPolicy == nil {
		spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	rp := spec.PersistentVolumeClaimRetentionPolicy
	if rp.WhenDeleted == "" {
		rp.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if rp.WhenScaled == "" {
		rp.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if spec.Replicas == nil {
		spec.Replicas = ptrTo(int32(DefaultStatefulSetReplicas))
	}
	if spec.RevisionHistoryLimit == nil {
		spec.RevisionHistoryLimit = ptrTo(int32(DefaultStatefulSetRevisionHistoryLimit))
	}
	defaultPodSpec(&spec.Template.Spec)
	for i := range spec.VolumeClaimTemplates {
		defaultPersistentVolumeClaim(&spec.VolumeClaimTemplates[i])
		// A template is not a claim: it has no status of its own.
		spec.VolumeClaimTemplates[i].Status = corev1.PersistentVolumeClaimStatus{}
	}
}

// A new StatefulSet starts at generation 1 with an empty status; an update
// keeps the status and bumps the generation when the spec changed, as
// kube's statefulSetStrategy does.

func prepareStatefulSetForCreate(ss *appsv1.StatefulSet) {
	ss.Generation = 1
	ss.Status = appsv1.StatefulSetStatus{}
}

func prepareStatefulSetForUpdate(ss, old *appsv1.StatefulSet) {
	ss.Status = old.Status
	ss.Generation = nextGeneration(old, ss.Spec, old.Spec)
}

// validateStatefulSet is kube's ValidateStatefulSetSpec.
func validateStatefulSet(ss *appsv1.StatefulSet) field.ErrorList {
	specPath := field.NewPath("spec")
	spec := &ss.Spec
	var errs field.ErrorList

	switch spec.PodManagementPolicy {
	case "":
		errs = append(errs, field.Required(specPath.Child("podManagementPolicy"), ""))
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		errs = append(errs, field.Invalid(specPath.Child("podManagementPolicy"), spec.PodManagementPolicy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
	}

	strategyPath := specPath.Child("updateStrategy")
	switch spec.UpdateStrategy.Type {
	case "":
		errs = append(errs, field.Required(strategyPath, ""))
	case appsv1.OnDeleteStatefulSetStrategyType:
		if spec.UpdateStrategy.RollingUpdate != nil {
			errs = append(errs, field.Invalid(strategyPath.Child("rollingUpdate"), spec.UpdateStrategy.RollingUpdate,
				fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType)))
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if ru := spec.UpdateStrategy.RollingUpdate; ru != nil {
			errs = append(errs, validateRollingUpdateStatefulSet(ru, strategyPath.Child("rollingUpdate"))...)
		}
	default:
		errs = append(errs, field.Invalid(strategyPath, spec.UpdateStrategy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType)))
	}

	errs = append(errs, validateClaimRetentionPolicy(spec.PersistentVolumeClaimRetentionPolicy, specPath.Child("persistentVolumeClaimRetentionPolicy"))...)
	if spec.Replicas != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*spec.Replicas), specPath.Child("replicas"))...)
	}
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	if spec.Ordinals != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.Ordinals.Start), specPath.Child("ordinals.start"))...)
	}
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*spec.RevisionHistoryLimit), specPath.Child("revisionHistoryLimit"))...)
	}
	// The template is not validated as a pod, as kube's is not: its
	// containers mount the volumeClaimTemplates by name, volumes the pod
	// gets only when the controller makes it, and a pod the template makes
	// that is still invalid is refused then, a FailedCreate event on the set.
	errs = append(errs, validateSelectorAndTemplateMeta("statefulset", spec.Selector, &spec.Template, specPath)...)
	errs = append(errs, validateTemplateRestart("StatefulSet", &spec.Template, specPath.Child("template", "spec"))...)
	claimsPath := specPath.Child("volumeClaimTemplates")
	for i := range spec.VolumeClaimTemplates {
		t := &spec.VolumeClaimTemplates[i]
		p := claimsPath.Index(i)
		if t.Name == "" {
			errs = append(errs, field.Required(p.Child("metadata", "name"), "name or generateName is required"))
		} else {
			for _, msg := range apivalidation.NameIsDNSSubdomain(t.Name, false) {
				errs = append(errs, field.Invalid(p.Child("metadata", "name"), t.Name, msg))
			}
		}
		errs = append(errs, ValidatePersistentVolumeClaimSpec(&t.Spec, p.Child("spec"))...)
	}
	return errs
}

// validateRollingUpdateStatefulSet: a partition that is not negative and
// a maxUnavailable that is a positive number or percentage of at most
// 100%.
func validateRollingUpdateStatefulSet(ru *appsv1.RollingUpdateStatefulSetStrategy, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ru.Partition != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*ru.Partition), fldPath.Child("partition"))...)
	}
	if ru.MaxUnavailable != nil {
		p := fldPath.Child("maxUnavailable")
		errs = append(errs, validateIntOrPercent(ru.MaxUnavailable, p)...)
		if intOrPercentValue(ru.MaxUnavailable) == 0 {
			errs = append(errs, field.Invalid(p, ru.MaxUnavailable, "cannot be 0"))
		}
		errs = append(errs, notMoreThan100Percent(ru.MaxUnavailable, p)...)
	}
	return errs
}

// validateClaimRetentionPolicy is kube's
// ValidatePersistentVolumeClaimRetentionPolicy: each of whenDeleted and
// whenScaled is Retain or Delete.
func validateClaimRetentionPolicy(rp *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy, fldPath *field.Path) field.ErrorList {
	if rp == nil {
		return nil
	}
	supported := []appsv1.PersistentVolumeClaimRetentionPolicyType{
		appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
	}
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		v    appsv1.PersistentVolumeClaimRetentionPolicyType
	}{{"whenDeleted", rp.WhenDeleted}, {"whenScaled", rp.WhenScaled}} {
		if !contains(supported, f.v) {
			errs = append(errs, field.NotSupported(fldPath.Child(f.name), f.v, supported))
		}
	}
	return errs
}

// statefulSetMutableSpecMessage is kube's, word for word.
const statefulSetMutableSpecMessage = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"

// validateStatefulSetUpdate is kube's ValidateStatefulSetUpdate: only the
// fields the message names may change.
func validateStatefulSetUpdate(ss, old *appsv1.StatefulSet) field.ErrorList {
	spec := ss.Spec.DeepCopy()
	spec.Replicas = old.Spec.Replicas
	spec.Ordinals = old.Spec.Ordinals
	spec.Template = old.Spec.Template
	spec.UpdateStrategy = old.Spec.UpdateStrategy
	spec.RevisionHistoryLimit = old.Spec.RevisionHistoryLimit
	spec.PersistentVolumeClaimRetentionPolicy = old.Spec.PersistentVolumeClaimRetentionPolicy
	spec.MinReadySeconds = old.Spec.MinReadySeconds
	if apiequality.Semantic.DeepEqual(*spec, old.Spec) {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec"), statefulSetMutableSpecMessage)}
}

var statefulSetScale = &Scale{
	Get: func(obj Object) (int32, int32, string, error) {
		ss := obj.(*appsv1.StatefulSet)
		return deref(ss.Spec.Replicas), ss.Status.Replicas, selectorString(ss.Spec.Selector), nil
	},
	Set: func(obj Object, n int32) error { obj.(*appsv1.StatefulSet).Spec.Replicas = &n; return nil },
}

// statefulSetTable is kube-apiserver's: READY is ready of desired.
var statefulSetTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
	ageColumn, containersColumn, imagesColumn,
}, func(ss *appsv1.StatefulSet, now time.Time) []any {
	names, images := containerCells(ss.Spec.Template.Spec.Containers)
	return []any{
		ss.Name, fmt.Sprintf("%d/%d", ss.Status.ReadyReplicas, deref(ss.Spec.Replicas)),
		age(ss.CreationTimestamp, now), names, images,
	}
})
