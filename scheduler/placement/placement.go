// Package placement decides whether a pod may go on a node by the node's
// labels, name and taints, as kube's component-helpers/scheduling/corev1
// decides it for every component that asks: the scheduler's filters, the
// DaemonSet controller's choice of nodes, and the node lifecycle
// controller's evictions for NoExecute taints.
//
// Properties:
//
//   - A toleration tolerates a taint when its effect is the taint's or
//     empty (any), its key is the taint's or empty (any, with Exists), and
//     its value is the taint's unless its operator is Exists. The Gt and
//     Lt operators are not supported: they tolerate nothing.
//   - A node matches a pod's node selection when it has every label of
//     spec.nodeSelector and matches one term of the required node
//     affinity, if there is one. A term matches when all its
//     matchExpressions hold on the node's labels and all its matchFields
//     on its name (metadata.name is the only field); an empty term, or
//     an expression with an unknown operator or invalid values, matches
//     nothing.
package placement

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// ToleratesTaint reports whether t tolerates taint.
func ToleratesTaint(t corev1.Toleration, taint corev1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		return true
	case "", corev1.TolerationOpEqual:
		return t.Value == taint.Value
	}
	return false
}

// TolerationsTolerateTaint reports whether one of tolerations tolerates
// taint.
func TolerationsTolerateTaint(tolerations []corev1.Toleration, taint corev1.Taint) bool {
	return slices.ContainsFunc(tolerations, func(t corev1.Toleration) bool { return ToleratesTaint(t, taint) })
}

// MatchesNodeSelector reports whether node matches the node selection of
// a pod with spec: its nodeSelector and its required node affinity.
func MatchesNodeSelector(spec *corev1.PodSpec, node *corev1.Node) bool {
	for k, v := range spec.NodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	aff := spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	return slices.ContainsFunc(aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms,
		func(term corev1.NodeSelectorTerm) bool { return termMatches(term, node) })
}

var selectorOps = map[corev1.NodeSelectorOperator]selection.Operator{
	corev1.NodeSelectorOpIn:           selection.In,
	corev1.NodeSelectorOpNotIn:        selection.NotIn,
	corev1.NodeSelectorOpExists:       selection.Exists,
	corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	corev1.NodeSelectorOpGt:           selection.GreaterThan,
	corev1.NodeSelectorOpLt:           selection.LessThan,
}

func termMatches(term corev1.NodeSelectorTerm, node *corev1.Node) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	match := func(reqs []corev1.NodeSelectorRequirement, set labels.Set) bool {
		for _, r := range reqs {
			op, ok := selectorOps[r.Operator]
			if !ok {
				return false
			}
			req, err := labels.NewRequirement(r.Key, op, r.Values)
			if err != nil || !req.Matches(set) {
				return false
			}
		}
		return true
	}
	return match(term.MatchExpressions, labels.Set(node.Labels)) &&
		match(term.MatchFields, labels.Set{metav1.ObjectNameField: node.Name})
}

// MatchesNodeSelectorTerms reports whether node matches any of terms, as a
// required node selector does: an empty list matches nothing.
func MatchesNodeSelectorTerms(terms []corev1.NodeSelectorTerm, node *corev1.Node) bool {
	return slices.ContainsFunc(terms, func(term corev1.NodeSelectorTerm) bool { return termMatches(term, node) })
}

// VolumeFitsNode reports whether a pod on node may use pv: a volume without
// required node affinity is reachable from every node.
func VolumeFitsNode(pv *corev1.PersistentVolume, node *corev1.Node) bool {
	aff := pv.Spec.NodeAffinity
	if aff == nil || aff.Required == nil {
		return true
	}
	return MatchesNodeSelectorTerms(aff.Required.NodeSelectorTerms, node)
}
