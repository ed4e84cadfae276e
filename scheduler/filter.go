package scheduler

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/scheduler/nodeports"
	"github.com/minictl/minictl/scheduler/placement"
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
	if node.Spec.Unschedulable && !placement.TolerationsTolerateTaint(pod.Spec.Tolerations, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}) {
		return []string{reasonUnschedulable}
	}
	for _, taint := range effectiveTaints(node) {
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !placement.TolerationsTolerateTaint(pod.Spec.Tolerations, taint) {
			return []string{fmt.Sprintf(reasonTaintFmt, taint.Key, taint.Value)}
		}
	}
	if !placement.MatchesNodeSelector(&pod.Spec, node) {
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
