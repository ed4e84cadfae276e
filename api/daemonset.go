package api

import (
	"encoding/json"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DaemonSets (apps/v1): one pod on every eligible node. Their
// ControllerRevisions hold the templates a DaemonSet has had.
//
// A DaemonSet's template generation (kube's internal
// spec.templateGeneration) travels in apps/v1 as the annotation
// deprecated.daemonset.template.generation: 1 on create, one more on each
// update that changes the template. Its pods carry it as the label
// pod-template-generation.

// The apps/v1 defaults of a DaemonSet.
const (
	DefaultDaemonSetMaxUnavailable       = 1
	DefaultDaemonSetMaxSurge             = 0
	DefaultDaemonSetRevisionHistoryLimit = 10
)

// defaultDaemonSet is kube's SetDefaults_DaemonSet: a RollingUpdate
// strategy with maxUnavailable 1 and maxSurge 0, a history of 10
// revisions, and the pod defaults in the template.
func defaultDaemonSet(ds *appsv1.DaemonSet) {
	s := &ds.Spec.UpdateStrategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if s.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if s.RollingUpdate.MaxUnavailable == nil {
			s.RollingUpdate.MaxUnavailable = ptrTo(intstr.FromInt32(DefaultDaemonSetMaxUnavailable))
		}
		if s.RollingUpdate.MaxSurge == nil {
			s.RollingUpdate.MaxSurge = ptrTo(intstr.FromInt32(DefaultDaemonSetMaxSurge))
		}
	}
	if ds.Spec.RevisionHistoryLimit == nil {
		ds.Spec.RevisionHistoryLimit = ptrTo(int32(DefaultDaemonSetRevisionHistoryLimit))
	}
	defaultPodSpec(&ds.Spec.Template.Spec)
}

// A new DaemonSet starts at generation 1 and template generation 1 (or
// the one it was given, if higher) with an empty status; an update keeps
// the status and the template generation, and moves the template
// generation up by one when the template changed and the generation when
// the spec did, as kube's daemonSetStrategy does.

func prepareDaemonSetForCreate(ds *appsv1.DaemonSet) {
	ds.Generation = 1
	ds.Status = appsv1.DaemonSetStatus{}
	setTemplateGeneration(ds, max(TemplateGeneration(ds), 1))
}

func prepareDaemonSetForUpdate(ds, old *appsv1.DaemonSet) {
	ds.Status = old.Status
	ds.Generation = nextGeneration(old, ds.Spec, old.Spec)
	gen := TemplateGeneration(old)
	if !apiequality.Semantic.DeepEqual(ds.Spec.Template, old.Spec.Template) {
		gen++
	}
	setTemplateGeneration(ds, gen)
}

// TemplateGeneration is ds's template generation, from its
// deprecated.daemonset.template.generation annotation; 0 when it has none.
func TemplateGeneration(ds *appsv1.DaemonSet) int64 {
	gen, err := strconv.ParseInt(ds.Annotations[appsv1.DeprecatedTemplateGeneration], 10, 64)
	if err != nil {
		return 0
	}
	return gen
}

func setTemplateGeneration(ds *appsv1.DaemonSet, gen int64) {
	if ds.Annotations == nil {
		ds.Annotations = map[string]string{}
	}
	ds.Annotations[appsv1.DeprecatedTemplateGeneration] = strconv.FormatInt(gen, 10)
}

// validateDaemonSet is kube's ValidateDaemonSetSpec: a non-empty selector
// that the template's labels match, a template that is a valid
// always-restarting pod without a deadline, no negative counts, and an
// update strategy that can make progress.
func validateDaemonSet(ds *appsv1.DaemonSet) field.ErrorList {
	specPath := field.NewPath("spec")
	spec := &ds.Spec
	selPath, tmplPath := specPath.Child("selector"), specPath.Child("template")
	var errs field.ErrorList
	if spec.Selector == nil {
		errs = append(errs, field.Required(selPath, ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
		if len(spec.Selector.MatchLabels)+len(spec.Selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(selPath, spec.Selector, "empty selector is invalid for daemonset"))
		}
	}
	if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && !sel.Matches(labels.Set(spec.Template.Labels)) {
		errs = append(errs, field.Invalid(tmplPath.Child("metadata", "labels"), spec.Template.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, validateLabels(spec.Template.Labels, tmplPath.Child("metadata", "labels"))...)
	errs = append(errs, validateAnnotations(spec.Template.Annotations, tmplPath.Child("metadata", "annotations"))...)
	tmplSpecPath := tmplPath.Child("spec")
	errs = append(errs, validatePodSpec(&spec.Template.Spec, tmplSpecPath)...)
	if p := spec.Template.Spec.RestartPolicy; p != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tmplSpecPath.Child("restartPolicy"), p, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if spec.Template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tmplSpecPath.Child("activeDeadlineSeconds"), "activeDeadlineSeconds in DaemonSet is not Supported"))
	}
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	errs = append(errs, validateDaemonSetUpdateStrategy(&spec.UpdateStrategy, specPath.Child("updateStrategy"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*spec.RevisionHistoryLimit), specPath.Child("revisionHistoryLimit"))...)
	}
	return errs
}

// validateDaemonSetUpdate is kube's ValidateDaemonSetUpdate for apps/v1:
// the selector may not change.
func validateDaemonSetUpdate(ds, old *appsv1.DaemonSet) field.ErrorList {
	return apivalidation.ValidateImmutableField(ds.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))
}

func validateDaemonSetUpdateStrategy(s *appsv1.DaemonSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
		return nil
	case appsv1.RollingUpdateDaemonSetStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "")}
		}
		return validateRollingUpdateDaemonSet(s.RollingUpdate, fldPath.Child("rollingUpdate"))
	default:
		return field.ErrorList{field.NotSupported(fldPath, s,
			[]string{string(appsv1.RollingUpdateDaemonSetStrategyType), string(appsv1.OnDeleteDaemonSetStrategyType)})}
	}
}

// validateRollingUpdateDaemonSet is kube's ValidateRollingUpdateDaemonSet:
// each of maxUnavailable and maxSurge a non-negative number or a
// percentage of at most 100%, and exactly one of them non-zero.
func validateRollingUpdateDaemonSet(ru *appsv1.RollingUpdateDaemonSet, fldPath *field.Path) field.ErrorList {
	unavailPath, surgePath := fldPath.Child("maxUnavailable"), fldPath.Child("maxSurge")
	var errs field.ErrorList
	errs = append(errs, validateIntOrPercent(ru.MaxUnavailable, unavailPath)...)
	errs = append(errs, validateIntOrPercent(ru.MaxSurge, surgePath)...)
	errs = append(errs, notMoreThan100Percent(ru.MaxUnavailable, unavailPath)...)
	errs = append(errs, notMoreThan100Percent(ru.MaxSurge, surgePath)...)
	hasUnavailable := intOrPercentValue(ru.MaxUnavailable) != 0
	hasSurge := intOrPercentValue(ru.MaxSurge) != 0
	switch {
	case hasUnavailable && hasSurge:
		errs = append(errs, field.Invalid(surgePath, ru.MaxSurge, "may not be set when maxUnavailable is non-zero"))
	case !hasUnavailable && !hasSurge:
		errs = append(errs, field.Required(unavailPath, "cannot be 0 when maxSurge is 0"))
	}
	return errs
}

func notMoreThan100Percent(v *intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if v == nil || v.Type != intstr.String || intOrPercentValue(v) <= 100 {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath, v, "must not be greater than 100%")}
}

// validateControllerRevision is kube's ValidateControllerRevision: data is
// mandatory and the revision is not negative.
func validateControllerRevision(cr *appsv1.ControllerRevision) field.ErrorList {
	var errs field.ErrorList
	if len(cr.Data.Raw) == 0 && cr.Data.Object == nil {
		errs = append(errs, field.Required(field.NewPath("data"), "data is mandatory"))
	}
	return append(errs, apivalidation.ValidateNonnegativeField(cr.Revision, field.NewPath("revision"))...)
}

// validateControllerRevisionUpdate: a revision's data never changes (its
// number may, when an old template becomes current again).
func validateControllerRevisionUpdate(cr, old *appsv1.ControllerRevision) field.ErrorList {
	if sameJSON(cr.Data.Raw, old.Data.Raw) {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("data"), string(cr.Data.Raw), apivalidation.FieldImmutableErrorMsg)}
}

// sameJSON reports whether a and b are the same JSON value, however
// spaced or ordered.
func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return string(a) == string(b)
	}
	return apiequality.Semantic.DeepEqual(va, vb)
}
