package scheduler

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/minictl/minictl/scheduler/nodeports"
)

// The reasons a node is filtered out, in kube-scheduler's words, so that
// a FailedScheduling event reads as it would in a real cluster.
const (
	reasonUnschedulable   = "node(s) were unschedulable"
	reasonNodeAffinity    = "node(s) didn't match Pod's node affinity/selector"
	reasonTooManyPods     = "Too many pods"
	reasonInsufficientFmt = "Insufficient %s"
	reasonTaintFmt        = "node(s) had untolerated taint {%s: %s}"
)

// filter reports why pod cannot run on node, given what the pods already
// there use: nil when it can. Like kube-scheduler's filter plugins, the
// checks run in order and the first that fails gives the reasons:
//
//  1. NodeUnschedulable: a cordoned node takes only pods that tolerate
//     node.kubernetes.io/unschedulable:NoSchedule.
//  2. TaintToleration: every NoSchedule and NoExecute taint must be
//     tolerated. A node that is not Ready counts as tainted
//     node.kubernetes.io/not-ready (Ready False) or
//     node.kubernetes.io/unreachable (Ready Unknown or missing) with effect
//     NoSchedule, as the node lifecycle controller taints it.
//  3. NodeAffinity: spec.nodeSelector and required node affinity.
//  4. NodePorts: every host port the pod asks for (protocol, port, host
//     IP, 0.0.0.0 meaning all) is free on the node.
//  5. NodeResourcesFit: the pod count, and each resource the pod requests,
//     against the node's allocatable minus what its pods request.
func filter(pod *corev1.Pod, node *corev1.Node, used *nodeUsage) []string {
	if node.Spec.Unschedulable && !tolerates(pod.Spec.Tolerations, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}) {
		return []string{reasonUnschedulable}
	}
	for _, taint := range effectiveTaints(node) {
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !tolerates(pod.Spec.Tolerations, taint) {
			return []string{fmt.Sprintf(reasonTaintFmt, taint.Key, taint.Value)}
		}
	}
	if !matchesNodeSelector(pod, node) {
		return []string{reasonNodeAffinity}
	}
	if used != nil && !used.ports.Fit(nodeports.Of(pod)) {
		return []string{nodeports.ErrReason}
	}
	return insufficientResources(pod, node, used)
}

// effectiveTaints is node's taints plus the one its Ready condition
// implies, unless the node already carries it.
func effectiveTaints(node *corev1.Node) []corev1.Taint {
	key := corev1.TaintNodeUnreachable
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		switch c.Status {
		case corev1.ConditionTrue:
			return node.Spec.Taints
		case corev1.ConditionFalse:
			key = corev1.TaintNodeNotReady
		}
	}
	if slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key }) {
		return node.Spec.Taints
	}
	return append(slices.Clone(node.Spec.Taints), corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
}

// tolerates reports whether one of tolerations tolerates taint: same
// effect (or any, when the toleration names none), same key (or any, for
// an empty key), and same value unless the operator is Exists. The Gt and
// Lt operators are not supported and tolerate nothing.
func tolerates(tolerations []corev1.Toleration, taint corev1.Taint) bool {
	for _, t := range tolerations {
		if t.Effect != "" && t.Effect != taint.Effect {
			continue
		}
		if t.Key != "" && t.Key != taint.Key {
			continue
		}
		switch t.Operator {
		case corev1.TolerationOpExists:
			return true
		case "", corev1.TolerationOpEqual:
			if t.Value == taint.Value {
				return true
			}
		}
	}
	return false
}

// matchesNodeSelector reports whether node carries every label of the
// pod's spec.nodeSelector and matches one of the terms of its required
// node affinity (a term matches when all its expressions do; an empty
// term matches nothing).
func matchesNodeSelector(pod *corev1.Pod, node *corev1.Node) bool {
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	aff := pod.Spec.Affinity
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
	// metadata.name is the only field a term may match.
	return match(term.MatchExpressions, labels.Set(node.Labels)) &&
		match(term.MatchFields, labels.Set{"metadata.name": node.Name})
}

// insufficientResources names each resource the node is short of for pod:
// "Too many pods" first, then cpu, memory and the rest by name.
func insufficientResources(pod *corev1.Pod, node *corev1.Node, used *nodeUsage) []string {
	allocatable := toAmounts(node.Status.Allocatable)
	var reasons []string
	if used.pods+1 > allocatable[corev1.ResourcePods] {
		reasons = append(reasons, reasonTooManyPods)
	}
	requests := podRequests(pod, false)
	names := make([]corev1.ResourceName, 0, len(requests))
	for name := range requests {
		names = append(names, name)
	}
	rank := func(n corev1.ResourceName) int {
		switch n {
		case corev1.ResourceCPU:
			return 0
		case corev1.ResourceMemory:
			return 1
		}
		return 2
	}
	slices.SortFunc(names, func(a, b corev1.ResourceName) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(string(a), string(b))
	})
	for _, name := range names {
		want := requests[name]
		if want > 0 && allocatable[name]-used.requested[name] < want {
			reasons = append(reasons, fmt.Sprintf(reasonInsufficientFmt, name))
		}
	}
	return reasons
}

// fitErrorMessage is kube-scheduler's FitError message: how many nodes
// there are, then how many nodes gave each reason, sorted:
// "0/3 nodes are available: 1 node(s) had untolerated taint {a: b}, 2 Insufficient cpu."
func fitErrorMessage(numNodes int, reasonsByNode map[string][]string) string {
	if numNodes == 0 {
		return "no nodes available to schedule pods"
	}
	count := map[string]int{}
	for _, reasons := range reasonsByNode {
		for _, r := range reasons {
			count[r]++
		}
	}
	histogram := make([]string, 0, len(count))
	for r, n := range count {
		histogram = append(histogram, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(histogram)
	return fmt.Sprintf("0/%d nodes are available: %s.", numNodes, strings.Join(histogram, ", "))
}
