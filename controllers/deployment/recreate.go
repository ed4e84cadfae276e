package deployment

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/controllers/internal/controller"
)

// rolloutRecreate takes one step of a Recreate rollout: scale every old
// ReplicaSet to zero; wait until none of their pods is left running; then
// create the new ReplicaSet (if need be) and scale it to spec.replicas.
func (c *Controller) rolloutRecreate(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	key := d.Namespace + "/" + d.Name
	// The new ReplicaSet is not created yet: its pods must not start
	// before the old ones are gone.
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	allRSs := append(slices.Clone(oldRSs), newRS)

	scaledDown := false
	for _, rs := range activeReplicaSets(oldRSs) {
		c.log.Info(fmt.Sprintf("%s → recreate: scale old %s to 0", story(newRS, oldRSs), rs.Name),
			scaleAttrs(key, rs, 0)...)
		scaled, _, err := c.scaleReplicaSet(ctx, d, rs, 0)
		if err != nil {
			return err
		}
		scaledDown = scaledDown || scaled
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}
	if running := c.oldPodsRunning(newRS, oldRSs); running > 0 {
		c.log.Info(fmt.Sprintf("%s → recreate: wait for %d old pods to go", story(newRS, oldRSs), running),
			slog.String("object", key), slog.Int("oldPods", int(running)))
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}

	if newRS == nil {
		if newRS, oldRSs, err = c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, true); err != nil {
			return err
		}
		allRSs = append(slices.Clone(oldRSs), newRS)
	}
	if specReplicas(newRS) != replicasOf(d) {
		c.log.Info(fmt.Sprintf("%s → recreate: old pods gone, scale new to %d", story(newRS, oldRSs), replicasOf(d)),
			scaleAttrs(key, newRS, replicasOf(d))...)
		if _, _, err := c.scaleReplicaSet(ctx, d, newRS, replicasOf(d)); err != nil {
			return err
		}
	}
	if deploymentComplete(d, &d.Status) {
		if err := c.cleanupDeployment(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, allRSs, newRS, d)
}

// oldPodsRunning counts the old ReplicaSets' pods that may still run: by
// their status, or, once that says none, every pod in the cache they
// control that has not finished (one being deleted still runs until its
// kubelet is done).
func (c *Controller) oldPodsRunning(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) int {
	n := 0
	for _, rs := range oldRSs {
		n += int(rs.Status.Replicas)
	}
	if n > 0 {
		return n
	}
	for _, rs := range oldRSs {
		if newRS != nil && rs.UID == newRS.UID {
			continue
		}
		pods, err := c.podIndexer.ByIndex(controller.ControllerUIDIndex, string(rs.UID))
		if err != nil {
			return 1 // cannot tell: assume the worst
		}
		for _, obj := range pods {
			pod, ok := obj.(*corev1.Pod)
			if !ok || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				continue
			}
			n++
		}
	}
	return n
}
