package api

import (
	"cmp"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func ptrTo[T any](v T) *T { return &v }

func contains[T comparable](list []T, v T) bool { return slices.Contains(list, v) }

func equalStrings(a, b []string) bool { return slices.Equal(a, b) }

// sortedKeys returns m's keys in order, so that errors come out in the same
// order on every run.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func validateNonNegativeQuantity(q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), "must be greater than or equal to 0")}
	}
	return nil
}

func validateQualifiedName(name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range isQualifiedName(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

func validateLabelValue(value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range isValidLabelValue(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

func validateDNSLabel(name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range isDNS1123Label(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}
