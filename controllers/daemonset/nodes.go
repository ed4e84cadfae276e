package daemonset

import (
	"errors"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/scheduler/placement"
)

// Which nodes a DaemonSet's pod belongs on, as kube's
// NodeShouldRunDaemonPod decides it: the pod the DaemonSet would make for
// the node, with the default tolerations every daemon pod gets, must
// match the node's name (a template's spec.nodeName), the node selector
// and required node affinity, and tolerate its NoSchedule and NoExecute
// taints. A pod already there may keep running on a node whose only
// untolerated taints are NoSchedule: those keep new pods off, not old
// ones.

// defaultTolerations are the tolerations kube adds to every daemon pod
// (AddOrUpdateDaemonPodTolerations): a daemon keeps running on a node
// that is not ready or unreachable, however long, and is placed on one
// under pressure or cordoned.
var defaultTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// hostNetworkToleration is added too when the pod uses the host's
// network, which a node without a pod network still has.
var hostNetworkToleration = corev1.Toleration{
	Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
}

// addDefaultTolerations adds to spec each default toleration it lacks
// (one with the same key and effect counts as present, as it may carry
// its own tolerationSeconds).
func addDefaultTolerations(spec *corev1.PodSpec) {
	add := func(t corev1.Toleration) {
		if !slices.ContainsFunc(spec.Tolerations, func(have corev1.Toleration) bool {
			return have.Key == t.Key && have.Effect == t.Effect
		}) {
			spec.Tolerations = append(spec.Tolerations, t)
		}
	}
	for _, t := range defaultTolerations {
		add(t)
	}
	if spec.HostNetwork {
		add(hostNetworkToleration)
	}
}

// nodeShouldRunDaemonPod reports whether ds wants a pod on node
// (shouldRun), and whether a pod already there may stay
// (shouldContinueRunning).
func nodeShouldRunDaemonPod(node *corev1.Node, ds *appsv1.DaemonSet) (shouldRun, shouldContinueRunning bool) {
	spec := ds.Spec.Template.Spec.DeepCopy()
	if spec.NodeName != "" && spec.NodeName != node.Name {
		return false, false
	}
	addDefaultTolerations(spec)
	if !placement.MatchesNodeSelector(spec, node) {
		return false, false
	}
	if untolerated(node.Spec.Taints, spec.Tolerations, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute) {
		return false, !untolerated(node.Spec.Taints, spec.Tolerations, corev1.TaintEffectNoExecute)
	}
	return true, true
}

// untolerated reports whether one of taints with one of effects is
// tolerated by none of tolerations.
func untolerated(taints []corev1.Taint, tolerations []corev1.Toleration, effects ...corev1.TaintEffect) bool {
	for _, taint := range taints {
		if !slices.Contains(effects, taint.Effect) {
			continue
		}
		if !placement.TolerationsTolerateTaint(tolerations, taint) {
			return true
		}
	}
	return false
}

// nodeAffinityFor is kube's ReplaceDaemonSetPodNodeNameNodeAffinity: the
// pod's required node affinity becomes the one term "metadata.name In
// [node]", so that the scheduler binds it there and nowhere else. The
// affinity it replaces was already checked against the node.
func nodeAffinityFor(affinity *corev1.Affinity, node string) *corev1.Affinity {
	required := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{
			Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node},
		}},
	}}}
	if affinity == nil {
		affinity = &corev1.Affinity{}
	}
	if affinity.NodeAffinity == nil {
		affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = required
	return affinity
}

var errNoTargetNode = errors.New("pod names no node: neither spec.nodeName nor a metadata.name node affinity")

// targetNode is kube's GetTargetNodeName: the node a daemon pod is bound
// to, or, before it is bound, the one its node affinity names.
func targetNode(pod *corev1.Pod) (string, error) {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName, nil
	}
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return "", errNoTargetNode
	}
	for _, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range term.MatchFields {
			if r.Key == metav1.ObjectNameField && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				return r.Values[0], nil
			}
		}
	}
	return "", errNoTargetNode
}
