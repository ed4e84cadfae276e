package controller

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
)

// PodDeletionCostAnnotation lets a user say which pods of a ReplicaSet go
// first on scale-down: lower cost first (an int32; absent is 0).
const PodDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// PodKey is the key of pod in an informer's cache and in Expectations.
func PodKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// IsPodActive reports whether pod counts towards its controller's
// replicas: it has not finished (Succeeded, Failed) and is not being
// deleted.
func IsPodActive(pod *corev1.Pod) bool {
	return !api.IsPodTerminal(pod) && pod.DeletionTimestamp == nil
}

// FilterActivePods returns the active pods of pods.
func FilterActivePods(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if IsPodActive(p) {
			out = append(out, p)
		}
	}
	return out
}

// IsPodAvailable reports whether pod has been Ready for at least
// minReadySeconds at now.
func IsPodAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	c := podReadyCondition(pod)
	if c == nil || c.Status != corev1.ConditionTrue {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	minReady := time.Duration(minReadySeconds) * time.Second
	return !c.LastTransitionTime.IsZero() && !c.LastTransitionTime.Add(minReady).After(now)
}

func podReadyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// PodsToDelete returns the n pods of pods to delete first when scaling
// down, in the order upstream's ReplicaSet controller prefers, the pods
// doing least work first:
//
//  1. not yet scheduled before scheduled;
//  2. Pending before Unknown before Running;
//  3. not ready before ready;
//  4. lower pod-deletion-cost annotation before higher;
//  5. pods sharing their node with more of pods before fewer (spread the
//     survivors);
//  6. ready for less time before ready longer;
//  7. more container restarts before fewer;
//  8. newer before older.
//
// pods is not modified.
func PodsToDelete(pods []*corev1.Pod, n int) []*corev1.Pod {
	if n <= 0 {
		return nil
	}
	perNode := map[string]int{}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			perNode[p.Spec.NodeName]++
		}
	}
	ranked := slices.Clone(pods)
	slices.SortStableFunc(ranked, func(a, b *corev1.Pod) int {
		return compareForDeletion(a, b, perNode)
	})
	return ranked[:min(n, len(ranked))]
}

var phaseOrder = map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}

// compareForDeletion is negative when a should be deleted before b.
func compareForDeletion(a, b *corev1.Pod, perNode map[string]int) int {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return boolFirst(a.Spec.NodeName == "")
	}
	if c := cmp.Compare(phaseOrder[a.Status.Phase], phaseOrder[b.Status.Phase]); c != 0 {
		return c
	}
	aReady, bReady := api.PodIsReady(a), api.PodIsReady(b)
	if aReady != bReady {
		return boolFirst(!aReady)
	}
	if c := cmp.Compare(deletionCost(a), deletionCost(b)); c != 0 {
		return c
	}
	if c := cmp.Compare(perNode[b.Spec.NodeName], perNode[a.Spec.NodeName]); c != 0 {
		return c // more pods on a's node: a first
	}
	if aReady && bReady {
		if c := newerFirst(readySince(a), readySince(b)); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(maxRestarts(b), maxRestarts(a)); c != 0 {
		return c
	}
	return newerFirst(a.CreationTimestamp, b.CreationTimestamp)
}

// boolFirst orders the side that is true first.
func boolFirst(aFirst bool) int {
	if aFirst {
		return -1
	}
	return 1
}

// newerFirst orders a zero time first, then later times before earlier.
func newerFirst(a, b metav1.Time) int {
	switch {
	case a.Equal(&b):
		return 0
	case a.IsZero():
		return -1
	case b.IsZero():
		return 1
	}
	return b.Compare(a.Time)
}

func readySince(pod *corev1.Pod) metav1.Time {
	if c := podReadyCondition(pod); c != nil {
		return c.LastTransitionTime
	}
	return metav1.Time{}
}

func deletionCost(pod *corev1.Pod) int32 {
	v, ok := pod.Annotations[PodDeletionCostAnnotation]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

func maxRestarts(pod *corev1.Pod) int32 {
	var n int32
	for _, s := range pod.Status.ContainerStatuses {
		n = max(n, s.RestartCount)
	}
	return n
}
