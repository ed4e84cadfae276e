package quota

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Add returns a + b: every name in either list, summed where both have it.
func Add(a, b corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, max(len(a), len(b)))
	for name, q := range a {
		sum := q.DeepCopy()
		if other, ok := b[name]; ok {
			sum.Add(other)
		}
		out[name] = sum
	}
	for name, q := range b {
		if _, ok := out[name]; !ok {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// Subtract returns a - b: every name in either list; a name only b has
// comes out negated.
func Subtract(a, b corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, max(len(a), len(b)))
	for name, q := range a {
		diff := q.DeepCopy()
		if other, ok := b[name]; ok {
			diff.Sub(other)
		}
		out[name] = diff
	}
	for name, q := range b {
		if _, ok := out[name]; !ok {
			neg := q.DeepCopy()
			neg.Neg()
			out[name] = neg
		}
	}
	return out
}

// Mask returns the entries of list whose names are in names.
func Mask(list corev1.ResourceList, names []corev1.ResourceName) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, name := range names {
		if q, ok := list[name]; ok {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// LessThanOrEqual reports whether a ≤ b for every name both lists have; a
// name only one of them has is not compared. When it is false, exceeded
// holds the names where a > b, sorted.
func LessThanOrEqual(a, b corev1.ResourceList) (ok bool, exceeded []corev1.ResourceName) {
	for name, limit := range b {
		if q, found := a[name]; found && q.Cmp(limit) > 0 {
			exceeded = append(exceeded, name)
		}
	}
	slices.Sort(exceeded)
	return len(exceeded) == 0, exceeded
}

// Equals reports whether a and b have the same names with equal quantities
// (compared by value: "1000m" equals "1", "1Gi" equals "1073741824").
func Equals(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		other, ok := b[name]
		if !ok || q.Cmp(other) != 0 {
			return false
		}
	}
	return true
}

// ResourceNames returns the names in list, sorted.
func ResourceNames(list corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(list))
	for name := range list {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Format prints list as Kubernetes' quota messages do: "name=value" pairs
// sorted by name, joined by commas, each value as Quantity.String prints
// it ("limits.cpu=500m,pods=1").
func Format(list corev1.ResourceList) string {
	parts := make([]string, 0, len(list))
	for _, name := range ResourceNames(list) {
		q := list[name]
		parts = append(parts, string(name)+"="+q.String())
	}
	return strings.Join(parts, ",")
}

// formatNames prints names sorted and joined by commas.
func formatNames(names []corev1.ResourceName) string {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	parts := make([]string, len(sorted))
	for i, n := range sorted {
		parts[i] = string(n)
	}
	return strings.Join(parts, ",")
}

// intersect returns the names of a that are also in b, in a's order,
// without repeats.
func intersect(a, b []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, name := range a {
		if slices.Contains(b, name) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}
