package persistentvolume

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/minictl/minictl/api"
)

// bestMatch is the smallest Available volume that pvc may be bound to, or
// one already pre-bound to it; nil when none fits. node, when set, is the
// node chosen for the claim's first pod: the volume must be reachable
// there. The node is read from the API only once a volume that would
// otherwise fit has a node affinity to check, so that the syncs of a
// claim no volume fits yet (waiting for its provisioner, say) cost no
// read.
func (c *Controller) bestMatch(ctx context.Context, pvc *corev1.PersistentVolumeClaim, node string) *corev1.PersistentVolume {
	var nodeLabels labels.Set
	reachable := func(pv *corev1.PersistentVolume) bool {
		if node == "" || pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
			return true
		}
		if nodeLabels == nil {
			nodeLabels = labels.Set{corev1.LabelHostname: node}
			// A node the API cannot give is judged by its name alone.
			if n, err := c.nodes.Get(ctx, "", node); err == nil && n.Labels != nil {
				nodeLabels = n.Labels
			}
		}
		return reachableFrom(pv, nodeLabels)
	}
	var best *corev1.PersistentVolume
	for _, pv := range c.volumeList.List(labels.Everything()) {
		if pv.DeletionTimestamp != nil || mismatch(pv, pvc) != "" {
			continue
		}
		if pv.Spec.ClaimRef != nil {
			if claimRefIs(pv.Spec.ClaimRef, pvc) && reachable(pv) {
				return pv // pre-bound to this claim, by its user or its provisioner
			}
			continue
		}
		if pv.Status.Phase != corev1.VolumeAvailable {
			continue
		}
		size, bestSize := pv.Spec.Capacity[corev1.ResourceStorage], resourceOrZero(best)
		if (best == nil || size.Cmp(bestSize) < 0) && reachable(pv) {
			best = pv
		}
	}
	return best
}

func resourceOrZero(pv *corev1.PersistentVolume) (q resource.Quantity) {
	if pv != nil {
		q = pv.Spec.Capacity[corev1.ResourceStorage]
	}
	return q
}

// mismatch says why pv cannot serve pvc whatever their bindings: another
// class, too small, missing an access mode, outside the claim's selector,
// another volume mode. "" when it can.
func mismatch(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) string {
	if api.VolumeClass(pv) != api.ClaimClass(pvc) {
		return fmt.Sprintf("Cannot bind to requested volume %q: storageClassName does not match", pv.Name)
	}
	want, have := pvc.Spec.Resources.Requests[corev1.ResourceStorage], pv.Spec.Capacity[corev1.ResourceStorage]
	if have.Cmp(want) < 0 {
		return fmt.Sprintf("Cannot bind to requested volume %q: requested PV is too small", pv.Name)
	}
	for _, m := range pvc.Spec.AccessModes {
		if !hasMode(pv.Spec.AccessModes, m) {
			return fmt.Sprintf("Cannot bind to requested volume %q: incompatible accessMode", pv.Name)
		}
	}
	if pvc.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(pvc.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pv.Labels)) {
			return fmt.Sprintf("Cannot bind to requested volume %q: volume does not match the claim's selector", pv.Name)
		}
	}
	if volumeMode(pv.Spec.VolumeMode) != volumeMode(pvc.Spec.VolumeMode) {
		return fmt.Sprintf("Cannot bind to requested volume %q: requested volume mode %s does not match volume mode %s",
			pv.Name, volumeMode(pvc.Spec.VolumeMode), volumeMode(pv.Spec.VolumeMode))
	}
	return ""
}

func hasMode(modes []corev1.PersistentVolumeAccessMode, m corev1.PersistentVolumeAccessMode) bool {
	for _, have := range modes {
		if have == m {
			return true
		}
	}
	return false
}

func volumeMode(m *corev1.PersistentVolumeMode) corev1.PersistentVolumeMode {
	if m == nil {
		return corev1.PersistentVolumeFilesystem
	}
	return *m
}

// reachableFrom reports whether a node with nodeLabels satisfies pv's
// node affinity: some term whose every expression holds.
func reachableFrom(pv *corev1.PersistentVolume, nodeLabels labels.Set) bool {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil {
		return true
	}
	for _, term := range na.Required.NodeSelectorTerms {
		if termMatches(term, nodeLabels) {
			return true
		}
	}
	return false
}

func termMatches(term corev1.NodeSelectorTerm, nodeLabels labels.Set) bool {
	if len(term.MatchExpressions) == 0 {
		return false
	}
	for _, e := range term.MatchExpressions {
		var op selection.Operator
		switch e.Operator {
		case corev1.NodeSelectorOpIn:
			op = selection.In
		case corev1.NodeSelectorOpNotIn:
			op = selection.NotIn
		case corev1.NodeSelectorOpExists:
			op = selection.Exists
		case corev1.NodeSelectorOpDoesNotExist:
			op = selection.DoesNotExist
		case corev1.NodeSelectorOpGt:
			op = selection.GreaterThan
		case corev1.NodeSelectorOpLt:
			op = selection.LessThan
		default:
			return false
		}
		req, err := labels.NewRequirement(e.Key, op, e.Values)
		if err != nil || !req.Matches(nodeLabels) {
			return false
		}
	}
	return true
}
