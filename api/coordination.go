package api

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateLease checks a Lease: a positive duration and a count of
// transitions that does not go below zero. Leases have no defaults; the
// holder that renews one fills every field it uses.
func validateLease(l *coordinationv1.Lease) field.ErrorList {
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(specPath.Child("leaseDurationSeconds"), *d, "must be greater than 0"))
	}
	if t := l.Spec.LeaseTransitions; t != nil && *t < 0 {
		errs = append(errs, field.Invalid(specPath.Child("leaseTransitions"), *t, "must be greater than or equal to 0"))
	}
	return errs
}
