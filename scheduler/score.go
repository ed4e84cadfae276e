package scheduler

import (
	corev1 "k8s.io/api/core/v1"
)

// maxNodeScore is the best score a node can get.
const maxNodeScore int64 = 100

// leastAllocatedScore scores a node that fits pod by how much of it would
// stay free with the pod on it: the average, over cpu and memory, of
// (allocatable - requested) * 100 / allocatable, where requested counts
// every pod with the scoring defaults (kube-scheduler's
// NodeResourcesFit with the LeastAllocated strategy). Emptier nodes score
// higher, so pods spread.
func leastAllocatedScore(pod *corev1.Pod, node *corev1.Node, used *nodeUsage) int64 {
	allocatable := toAmounts(node.Status.Allocatable)
	want := podRequests(pod, true)
	var total int64
	resources := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}
	for _, name := range resources {
		capacity := allocatable[name]
		requested := used.nonZero[name] + want[name]
		if capacity == 0 || requested > capacity {
			continue // scores 0
		}
		total += (capacity - requested) * maxNodeScore / capacity
	}
	return total / int64(len(resources))
}

// scoredNode is a node that fits, with its score.
type scoredNode struct {
	name  string
	score int64
}

// selectHost picks the node with the highest score; among equals, the
// first by name, so that a decision can be explained and tests repeat.
func selectHost(nodes []scoredNode) string {
	best := nodes[0]
	for _, n := range nodes[1:] {
		if n.score > best.score || (n.score == best.score && n.name < best.name) {
			best = n
		}
	}
	return best.name
}
