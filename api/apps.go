package api

import (
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The apps/v1 defaults of a Deployment.
const (
	DefaultDeploymentMaxSurge                = "25%"
	DefaultDeploymentMaxUnavailable          = "25%"
	DefaultDeploymentRevisionHistoryLimit    = 10
	DefaultDeploymentProgressDeadlineSeconds = 600
)

var replicaSetFieldLabels = []string{"status.replicas"}

func defaultReplicaSet(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = ptrTo(int32(1))
	}
	defaultPodSpec(&rs.Spec.Template.Spec)
}

func defaultDeployment(d *appsv1.Deployment) {
	spec := &d.Spec
	if spec.Replicas == nil {
		spec.Replicas = ptrTo(int32(1))
	}
	if spec.Strategy.Type == "" {
		spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if spec.Strategy.RollingUpdate == nil {
			spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		ru := spec.Strategy.RollingUpdate
		if ru.MaxUnavailable == nil {
			ru.MaxUnavailable = ptrTo(intstr.FromString(DefaultDeploymentMaxUnavailable))
		}
		if ru.MaxSurge == nil {
			ru.MaxSurge = ptrTo(intstr.FromString(DefaultDeploymentMaxSurge))
		}
	}
	if spec.RevisionHistoryLimit == nil {
		spec.RevisionHistoryLimit = ptrTo(int32(DefaultDeploymentRevisionHistoryLimit))
	}
	if spec.ProgressDeadlineSeconds == nil {
		spec.ProgressDeadlineSeconds = ptrTo(int32(DefaultDeploymentProgressDeadlineSeconds))
	}
	defaultPodSpec(&spec.Template.Spec)
}

// A new ReplicaSet or Deployment starts at generation 1 with an empty
// status; an update keeps the status and bumps the generation when the
// spec changed, which is how its controller's status.observedGeneration
// tells a scale or template change it has not acted on yet.

func prepareReplicaSetForCreate(rs *appsv1.ReplicaSet) {
	rs.Generation = 1
	rs.Status = appsv1.ReplicaSetStatus{}
}

func prepareReplicaSetForUpdate(rs, old *appsv1.ReplicaSet) {
	rs.Status = old.Status
	rs.Generation = nextGeneration(old, rs.Spec, old.Spec)
}

func prepareDeploymentForCreate(d *appsv1.Deployment) {
	d.Generation = 1
	d.Status = appsv1.DeploymentStatus{}
}

// prepareDeploymentForUpdate also bumps the generation on an annotation
// change, because the deployment controller copies annotations to its
// replica sets.
func prepareDeploymentForUpdate(d, old *appsv1.Deployment) {
	d.Status = old.Status
	d.Generation = nextGeneration(old,
		[]any{d.Spec, d.Annotations}, []any{old.Spec, old.Annotations})
}

// prepareDeploymentForStatusUpdate keeps the labels, as kube's status
// strategy for Deployments does: the status writer (the deployment
// controller) must not move them.
func prepareDeploymentForStatusUpdate(d, old *appsv1.Deployment) {
	d.Labels = old.Labels
}

func validateReplicaSet(rs *appsv1.ReplicaSet) field.ErrorList {
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	if rs.Spec.Replicas != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*rs.Spec.Replicas), specPath.Child("replicas"))...)
	}
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(rs.Spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	return append(errs, validateSelectorAndTemplate("replicaset", rs.Spec.Selector, &rs.Spec.Template, specPath)...)
}

func validateReplicaSetUpdate(rs, old *appsv1.ReplicaSet) field.ErrorList {
	return apivalidation.ValidateImmutableField(rs.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))
}

func validateDeployment(d *appsv1.Deployment) field.ErrorList {
	specPath := field.NewPath("spec")
	spec := &d.Spec
	var errs field.ErrorList
	if spec.Replicas != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*spec.Replicas), specPath.Child("replicas"))...)
	}
	errs = append(errs, validateSelectorAndTemplate("deployment", spec.Selector, &spec.Template, specPath)...)
	errs = append(errs, validateDeploymentStrategy(&spec.Strategy, specPath.Child("strategy"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*spec.RevisionHistoryLimit), specPath.Child("revisionHistoryLimit"))...)
	}
	if pds := spec.ProgressDeadlineSeconds; pds != nil {
		pdsPath := specPath.Child("progressDeadlineSeconds")
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*pds), pdsPath)...)
		if *pds <= spec.MinReadySeconds {
			errs = append(errs, field.Invalid(pdsPath, *pds, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

func validateDeploymentUpdate(d, old *appsv1.Deployment) field.ErrorList {
	return apivalidation.ValidateImmutableField(d.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))
}

// validateSelectorAndTemplate checks what a ReplicaSet and a Deployment
// share: a non-empty selector that the pod template's labels match, and a
// template that is a valid always-restarting pod.
func validateSelectorAndTemplate(kind string, sel *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec, specPath *field.Path) field.ErrorList {
	errs := validateSelectorAndTemplateMeta(kind, sel, tmpl, specPath)
	tmplSpecPath := specPath.Child("template", "spec")
	errs = append(errs, validatePodSpec(&tmpl.Spec, tmplSpecPath)...)
	return append(errs, validateTemplateRestart(kind, tmpl, tmplSpecPath)...)
}

// validateSelectorAndTemplateMeta is the part of
// validateSelectorAndTemplate that leaves the template's pod spec alone: a
// non-empty selector that the template's labels match, and the template's
// labels and annotations.
func validateSelectorAndTemplateMeta(kind string, sel *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	selPath := specPath.Child("selector")
	tmplPath := specPath.Child("template")
	if sel == nil {
		errs = append(errs, field.Required(selPath, ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
		if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(selPath, sel, "empty selector is invalid for "+kind))
		}
	}
	if sel != nil && len(errs) == 0 {
		selector, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			errs = append(errs, field.Invalid(selPath, sel, "invalid label selector"))
		} else if !selector.Matches(labels.Set(tmpl.Labels)) {
			errs = append(errs, field.Invalid(tmplPath.Child("metadata", "labels"), tmpl.Labels, "`selector` does not match template `labels`"))
		}
	}

	errs = append(errs, validateLabels(tmpl.Labels, tmplPath.Child("metadata", "labels"))...)
	return append(errs, validateAnnotations(tmpl.Annotations, tmplPath.Child("metadata", "annotations"))...)
}

// validateTemplateRestart: a controller's pods restart Always and run
// without a deadline.
func validateTemplateRestart(kind string, tmpl *corev1.PodTemplateSpec, tmplSpecPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p := tmpl.Spec.RestartPolicy; p != "" && p != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tmplSpecPath.Child("restartPolicy"), p, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if tmpl.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tmplSpecPath.Child("activeDeadlineSeconds"), "activeDeadlineSeconds in "+kind+" is not Supported"))
	}
	return errs
}

func validateDeploymentStrategy(s *appsv1.DeploymentStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Forbidden(fldPath.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'")}
		}
		return nil
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "this should be defaulted and never be nil")}
		}
		return validateRollingUpdate(s.RollingUpdate, fldPath.Child("rollingUpdate"))
	case "":
		return nil // defaulting sets it
	default:
		return field.ErrorList{field.NotSupported(fldPath.Child("type"), s.Type,
			[]appsv1.DeploymentStrategyType{appsv1.RecreateDeploymentStrategyType, appsv1.RollingUpdateDeploymentStrategyType})}
	}
}

func validateRollingUpdate(ru *appsv1.RollingUpdateDeployment, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	unavailPath, surgePath := fldPath.Child("maxUnavailable"), fldPath.Child("maxSurge")
	errs = append(errs, validateIntOrPercent(ru.MaxUnavailable, unavailPath)...)
	errs = append(errs, validateIntOrPercent(ru.MaxSurge, surgePath)...)
	if len(errs) > 0 {
		return errs
	}
	if intOrPercentValue(ru.MaxUnavailable) == 0 && intOrPercentValue(ru.MaxSurge) == 0 {
		errs = append(errs, field.Invalid(unavailPath, ru.MaxUnavailable, "may not be 0 when `maxSurge` is 0"))
	}
	if v := ru.MaxUnavailable; v != nil && v.Type == intstr.String && intOrPercentValue(v) > 100 {
		errs = append(errs, field.Invalid(unavailPath, v, "must not be greater than 100%"))
	}
	return errs
}

// validateIntOrPercent checks a non-negative integer or a percentage
// ("25%"); nil is left to defaulting.
func validateIntOrPercent(v *intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	switch {
	case v == nil:
		return nil
	case v.Type == intstr.Int:
		return apivalidation.ValidateNonnegativeField(int64(v.IntVal), fldPath)
	default:
		var errs field.ErrorList
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(fldPath, v, msg))
		}
		return errs
	}
}

// intOrPercentValue returns the number in a validated int-or-percent.
func intOrPercentValue(v *intstr.IntOrString) int {
	if v == nil {
		return 0
	}
	if v.Type == intstr.Int {
		return int(v.IntVal)
	}
	n, _ := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	return n
}

func replicaSetFields(rs *appsv1.ReplicaSet) fields.Set {
	return fields.Set{"status.replicas": strconv.Itoa(int(rs.Status.Replicas))}
}
