package daemonset

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/controllers/internal/controller"
)

// rollingUpdate replaces the pods of old templates, within the strategy's
// bounds, as kube's rollingUpdate (pkg/controller/daemon/update.go) does.
//
// Without surge, old pods are deleted and manage creates their
// replacements on the next sync: an old pod that is not available goes
// at once; available ones go while fewer than maxUnavailable nodes lack
// an available pod of the current template.
//
// With surge, a new pod is created beside the old one: at once when the
// old one is not available, otherwise on at most maxSurge nodes at a time;
// the old pod is deleted once its replacement is available.
func (c *Controller) rollingUpdate(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, nodeToPods map[string][]*corev1.Pod, hash string) error {
	maxSurge, maxUnavailable, desired := c.updateBounds(ds, nodes)
	// Every node that should run a pod is considered, with or without one.
	byNode := make(map[string][]*corev1.Pod, len(nodeToPods))
	for name, pods := range nodeToPods {
		byNode[name] = pods
	}
	nodeByName := make(map[string]*corev1.Node, len(nodes))
	for _, node := range nodes {
		nodeByName[node.Name] = node
		if shouldRun, _ := nodeShouldRunDaemonPod(node, ds); shouldRun {
			if _, ok := byNode[node.Name]; !ok {
				byNode[node.Name] = nil
			}
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range byNode {
			if !yield(name) {
				return
			}
		}
	})
	now := c.clock.Now()
	available := func(pod *corev1.Pod) bool { return controller.IsPodAvailable(pod, ds.Spec.MinReadySeconds, now) }
	gen := api.TemplateGeneration(ds)

	if maxSurge == 0 {
		var numUnavailable int
		var replace, candidates []string
		for _, name := range names {
			newPod, oldPod, ok := splitPodsOnNode(byNode[name], hash, gen)
			switch {
			case !ok:
				numUnavailable++ // extra pods: manage prunes them first
			case oldPod == nil && newPod == nil, oldPod != nil && newPod != nil:
				numUnavailable++ // manage creates or deletes here
			case newPod != nil:
				if !available(newPod) {
					numUnavailable++
				}
			case !available(oldPod):
				replace = append(replace, oldPod.Name)
				numUnavailable++
			case numUnavailable < maxUnavailable:
				candidates = append(candidates, oldPod.Name)
			}
		}
		n := min(max(maxUnavailable-numUnavailable, 0), len(candidates))
		toDelete := append(replace, candidates[:n]...)
		c.logRollout(ds, fmt.Sprintf("maxUnavailable %d, %d unavailable → delete %d old pods", maxUnavailable, numUnavailable, len(toDelete)),
			len(toDelete) > 0, slog.Int("maxUnavailable", maxUnavailable), slog.Int("unavailable", numUnavailable), slog.Any("delete", toDelete))
		return c.syncNodes(ctx, ds, toDelete, nil, hash)
	}

	var toDelete, notWantedOld, allowedNew, candidateNew []string
	var numSurge, numAvailable int
	for _, name := range names {
		newPod, oldPod, ok := splitPodsOnNode(byNode[name], hash, gen)
		if !ok {
			numSurge++ // extra pods: manage prunes them first
			continue
		}
		switch {
		case oldPod != nil && available(oldPod), oldPod == nil && newPod != nil && available(newPod):
			numAvailable++
		}
		switch {
		case oldPod == nil:
			// Nothing to replace: manage keeps this node.
		case newPod == nil:
			node := nodeByName[name]
			shouldRun := false
			if node != nil {
				shouldRun, _ = nodeShouldRunDaemonPod(node, ds)
			}
			switch {
			case !available(oldPod) && !shouldRun:
				toDelete = append(toDelete, oldPod.Name)
			case !available(oldPod):
				allowedNew = append(allowedNew, name)
			case !shouldRun:
				notWantedOld = append(notWantedOld, oldPod.Name)
			case numSurge < maxSurge:
				candidateNew = append(candidateNew, name)
			}
		case !available(newPod):
			numSurge++ // surged here, waiting for the new pod
		default:
			toDelete = append(toDelete, oldPod.Name) // the new pod is available
		}
	}
	// With surge the owner expects full availability: a pod on a node
	// that no longer qualifies goes only once another is available.
	if deletable := min(numAvailable-desired, len(notWantedOld)); deletable > 0 {
		toDelete = append(toDelete, notWantedOld[:deletable]...)
	}
	n := min(max(maxSurge-numSurge, 0), len(candidateNew))
	create := append(allowedNew, candidateNew[:n]...)
	c.logRollout(ds, fmt.Sprintf("maxSurge %d, %d surging → create %d new pods, delete %d old", maxSurge, numSurge, len(create), len(toDelete)),
		len(create)+len(toDelete) > 0, slog.Int("maxSurge", maxSurge), slog.Int("surging", numSurge),
		slog.Any("create", create), slog.Any("delete", toDelete))
	return c.syncNodes(ctx, ds, toDelete, create, hash)
}

func (c *Controller) logRollout(ds *appsv1.DaemonSet, msg string, acting bool, attrs ...any) {
	attrs = append([]any{slog.String("object", dsKey(ds))}, attrs...)
	if acting {
		c.log.Info("rolling update: "+msg, attrs...)
	} else {
		c.log.Debug("rolling update: "+msg, attrs...)
	}
}

// updateBounds returns maxSurge and maxUnavailable as numbers of nodes,
// percentages of the desired number rounded up, and the desired number.
// A DaemonSet that allows neither (the API server refuses it) may have one
// node unavailable.
func (c *Controller) updateBounds(ds *appsv1.DaemonSet, nodes []*corev1.Node) (maxSurge, maxUnavailable, desired int) {
	for _, node := range nodes {
		if shouldRun, _ := nodeShouldRunDaemonPod(node, ds); shouldRun {
			desired++
		}
	}
	maxSurge = surgeCount(ds, desired)
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		maxUnavailable, _ = intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, desired, true)
	}
	if desired > 0 && maxSurge == 0 && maxUnavailable == 0 {
		c.log.Info("neither surge nor unavailability allowed → one node may be unavailable", slog.String("object", dsKey(ds)))
		maxUnavailable = 1
	}
	return maxSurge, maxUnavailable, desired
}

// surgeCount is maxSurge as a number of the desired nodes, rounded up; 0
// for OnDelete.
func surgeCount(ds *appsv1.DaemonSet, desired int) int {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil || ru.MaxSurge == nil {
		return 0
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, desired, true)
	if err != nil {
		return 0
	}
	return n
}

// allowsSurge reports whether ds may run two pods on a node during an
// update.
func allowsSurge(ds *appsv1.DaemonSet) bool { return surgeCount(ds, 1) > 0 }

// splitPodsOnNode returns a node's one pod of the current template and
// one of an old template (either may be nil), ignoring those being
// deleted; ok is false when it has more than one of either.
func splitPodsOnNode(pods []*corev1.Pod, hash string, gen int64) (newPod, oldPod *corev1.Pod, ok bool) {
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if isPodUpdated(pod, hash, gen) {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = pod
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = pod
		}
	}
	return newPod, oldPod, true
}
