package api

import (
	"slices"

	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PodDisruptionBudgets (policy/v1): how many of a set of pods voluntary
// disruptions (evictions) may take down at once. policy/v1 has no
// defaults: a budget without unhealthyPodEvictionPolicy behaves as
// IfHealthyBudget, and its spec may change after creation.

// A new budget starts at generation 1 with an empty status; an update
// keeps the status and bumps the generation when the spec changed.

func preparePodDisruptionBudgetForCreate(pdb *policyv1.PodDisruptionBudget) {
	pdb.Generation = 1
	pdb.Status = policyv1.PodDisruptionBudgetStatus{}
}

func preparePodDisruptionBudgetForUpdate(pdb, old *policyv1.PodDisruptionBudget) {
	pdb.Status = old.Status
	pdb.Generation = nextGeneration(old, pdb.Spec, old.Spec)
}

// unhealthyPodEvictionPolicies are the values spec.unhealthyPodEvictionPolicy
// may take, sorted as kube lists them.
var unhealthyPodEvictionPolicies = []string{string(policyv1.AlwaysAllow), string(policyv1.IfHealthyBudget)}

// validatePodDisruptionBudget is kube's ValidatePodDisruptionBudget (the
// spec) and, since a status write is validated whole,
// ValidatePodDisruptionBudgetStatusUpdate (the status).
func validatePodDisruptionBudget(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
	errs := validatePodDisruptionBudgetSpec(&pdb.Spec, field.NewPath("spec"))
	return append(errs, validatePodDisruptionBudgetStatus(&pdb.Status, field.NewPath("status"))...)
}

// validatePodDisruptionBudgetSpec: at most one of minAvailable and
// maxUnavailable, each a non-negative integer or a percentage up to 100%;
// a valid selector; a known unhealthyPodEvictionPolicy.
func validatePodDisruptionBudgetSpec(spec *policyv1.PodDisruptionBudgetSpec, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.MinAvailable != nil && spec.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(specPath, spec, "minAvailable and maxUnavailable cannot be both set"))
	}
	errs = append(errs, validateBudgetValue(spec.MinAvailable, specPath.Child("minAvailable"))...)
	errs = append(errs, validateBudgetValue(spec.MaxUnavailable, specPath.Child("maxUnavailable"))...)
	errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, specPath.Child("selector"))...)
	if p := spec.UnhealthyPodEvictionPolicy; p != nil && !slices.Contains(unhealthyPodEvictionPolicies, string(*p)) {
		errs = append(errs, field.NotSupported(specPath.Child("unhealthyPodEvictionPolicy"), *p, unhealthyPodEvictionPolicies))
	}
	return errs
}

// validateBudgetValue is kube's ValidatePositiveIntOrPercent and
// IsNotMoreThan100Percent.
func validateBudgetValue(v *intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	errs := validateIntOrPercent(v, fldPath)
	if len(errs) == 0 && v != nil && v.Type == intstr.String && intOrPercentValue(v) > 100 {
		errs = append(errs, field.Invalid(fldPath, v, "must not be greater than 100%"))
	}
	return errs
}

// validatePodDisruptionBudgetStatus: no negative counts, and conditions
// as metav1.Condition requires them.
func validatePodDisruptionBudgetStatus(status *policyv1.PodDisruptionBudgetStatus, statusPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(status.DisruptionsAllowed), statusPath.Child("disruptionsAllowed"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(status.CurrentHealthy), statusPath.Child("currentHealthy"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(status.DesiredHealthy), statusPath.Child("desiredHealthy"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(status.ExpectedPods), statusPath.Child("expectedPods"))...)
	return append(errs, metav1validation.ValidateConditions(status.Conditions, statusPath.Child("conditions"))...)
}

// PodDisruptionBudgetMatches reports whether pdb's selector selects a pod
// with podLabels. In policy/v1 an empty selector selects every pod in the
// namespace and a null one none; an invalid one selects none.
func PodDisruptionBudgetMatches(pdb *policyv1.PodDisruptionBudget, podLabels map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(podLabels))
}

// SetDisruptionAllowedCondition sets pdb's DisruptionAllowed condition from
// its disruptionsAllowed, as kube's UpdateDisruptionAllowedCondition does:
// True with SufficientPods while it allows a disruption, False with
// InsufficientPods otherwise. The eviction subresource and the disruption
// controller both call it.
func SetDisruptionAllowedCondition(pdb *policyv1.PodDisruptionBudget) {
	c := metav1.Condition{
		Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: policyv1.InsufficientPodsReason,
		ObservedGeneration: pdb.Status.ObservedGeneration,
	}
	if pdb.Status.DisruptionsAllowed > 0 {
		c.Status, c.Reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
	}
	if pdb.Status.Conditions == nil {
		pdb.Status.Conditions = []metav1.Condition{}
	}
	apimeta.SetStatusCondition(&pdb.Status.Conditions, c)
}
