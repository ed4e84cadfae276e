package deployment

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
)

// A rolling update moves one step per sync: scale the new ReplicaSet up as
// far as maxSurge allows, or else scale old ones down as far as
// maxUnavailable allows, and let the ReplicaSet controllers and the
// kubelets act before the next step.
//
// The steps read ReplicaSet status, which lags the spec the step just
// wrote until each ReplicaSet controller catches up. Two counts are read
// so that the lag can only make a step smaller, never break a bound:
//
//   - the pods a ReplicaSet may have is the larger of spec.replicas and
//     status.replicas (a ReplicaSet just scaled down still has its pods
//     until its controller has deleted them), for the surge bound;
//   - the pods a ReplicaSet surely has available is the smaller of
//     spec.replicas and status.availableReplicas (a ReplicaSet scaled
//     down keeps its ready pods first), for the availability bound.
//
// Upstream reads spec.replicas and status.availableReplicas alone, which
// a slow ReplicaSet controller can make overshoot for a moment.

// rolloutRolling takes one step of a RollingUpdate.
func (c *Controller) rolloutRolling(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, true)
	if err != nil {
		return err
	}
	allRSs := append(slices.Clone(oldRSs), newRS)

	scaledUp, err := c.reconcileNewReplicaSet(ctx, allRSs, newRS, oldRSs, d)
	if err != nil {
		return err
	}
	if scaledUp {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}
	scaledDown, err := c.reconcileOldReplicaSets(ctx, allRSs, activeReplicaSets(oldRSs), newRS, d)
	if err != nil {
		return err
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}
	if deploymentComplete(d, &d.Status) {
		if err := c.cleanupDeployment(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, allRSs, newRS, d)
}

// reconcileNewReplicaSet scales the new ReplicaSet towards spec.replicas,
// no further than maxSurge above it in total.
func (c *Controller) reconcileNewReplicaSet(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	key := d.Namespace + "/" + d.Name
	want := replicasOf(d)
	if specReplicas(newRS) == want {
		return false, nil
	}
	size := want
	if specReplicas(newRS) < want {
		var err error
		if size, err = newRSNewReplicas(d, allRSs, newRS); err != nil {
			return false, err
		}
	}
	if size == specReplicas(newRS) {
		c.log.Debug(story(newRS, oldRSs)+" → no room to surge", slog.String("object", key))
		return false, nil
	}
	c.log.Info(fmt.Sprintf("%s → scale new to %d", story(newRS, oldRSs), size),
		scaleAttrs(key, newRS, size)...)
	scaled, _, err := c.scaleReplicaSet(ctx, d, newRS, size)
	return scaled, err
}

// newRSNewReplicas is the size the new ReplicaSet may grow to now: for
// RollingUpdate, as far as spec.replicas + maxSurge pods in total allow;
// for Recreate, spec.replicas.
func newRSNewReplicas(d *appsv1.Deployment, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (int32, error) {
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		return replicasOf(d), nil
	}
	if _, _, err := resolveFenceposts(d); err != nil {
		return 0, err
	}
	current := int64(0)
	for _, rs := range allRSs {
		current += int64(podsMayHave(rs))
	}
	most := maxTotalPods(d)
	if current >= most {
		return specReplicas(newRS), nil // no room
	}
	grow := min(most-current, int64(replicasOf(d))-int64(specReplicas(newRS)))
	return specReplicas(newRS) + int32(max(grow, 0)), nil
}

// reconcileOldReplicaSets scales old ReplicaSets down: first their
// unavailable pods, then available ones while at least spec.replicas -
// maxUnavailable stay available.
func (c *Controller) reconcileOldReplicaSets(ctx context.Context, allRSs, oldRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	if sumSpecReplicas(oldRSs) == 0 {
		return false, nil // nothing left to scale down
	}
	key := d.Namespace + "/" + d.Name
	minAvailable := replicasOf(d) - maxUnavailable(d)
	// Pods of the new ReplicaSet that are not available yet must not be
	// paid for by taking available old pods away.
	newUnavailable := specReplicas(newRS) - surelyAvailable(newRS)
	maxScaledDown := sumSpecReplicas(allRSs) - int64(minAvailable) - int64(newUnavailable)
	if maxScaledDown <= 0 {
		c.log.Debug(fmt.Sprintf("%s → wait: %d must stay available", story(newRS, oldRSs), minAvailable),
			slog.String("object", key), slog.Int("minAvailable", int(minAvailable)))
		return false, nil
	}

	// Unavailable old pods go first: removing them costs no availability,
	// and they would otherwise block the rollout.
	oldRSs, cleaned, err := c.cleanupUnhealthyReplicas(ctx, oldRSs, d, newRS, maxScaledDown)
	if err != nil {
		return false, err
	}
	allRSs = append(slices.Clone(oldRSs), newRS)
	scaledDown, err := c.scaleDownOldReplicaSetsForRollingUpdate(ctx, allRSs, oldRSs, newRS, d)
	if err != nil {
		return false, err
	}
	return cleaned+scaledDown > 0, nil
}

// cleanupUnhealthyReplicas scales old ReplicaSets, oldest first, down by
// their unavailable pods, maxCleanup in total at most.
func (c *Controller) cleanupUnhealthyReplicas(ctx context.Context, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, maxCleanup int64) ([]*appsv1.ReplicaSet, int64, error) {
	oldRSs = slices.Clone(oldRSs)
	slices.SortFunc(oldRSs, byCreation)
	key := d.Namespace + "/" + d.Name
	total := int64(0)
	for i, rs := range oldRSs {
		if total >= maxCleanup {
			break
		}
		unhealthy := specReplicas(rs) - rs.Status.AvailableReplicas
		if specReplicas(rs) == 0 || unhealthy <= 0 {
			continue
		}
		n := int32(min(maxCleanup-total, int64(unhealthy)))
		size := specReplicas(rs) - n
		c.log.Info(fmt.Sprintf("%s → scale old %s to %d (unavailable pods first)", story(newRS, oldRSs), rs.Name, size),
			scaleAttrs(key, rs, size)...)
		_, updated, err := c.scaleReplicaSet(ctx, d, rs, size)
		if err != nil {
			return nil, total, err
		}
		oldRSs[i] = updated
		total += int64(n)
	}
	return oldRSs, total, nil
}

// scaleDownOldReplicaSetsForRollingUpdate scales old ReplicaSets, oldest
// first, down by as many pods as are available beyond spec.replicas -
// maxUnavailable.
func (c *Controller) scaleDownOldReplicaSetsForRollingUpdate(ctx context.Context, allRSs, oldRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (int64, error) {
	key := d.Namespace + "/" + d.Name
	minAvailable := int64(replicasOf(d) - maxUnavailable(d))
	available := int64(0)
	for _, rs := range allRSs {
		available += int64(surelyAvailable(rs))
	}
	if available <= minAvailable {
		c.log.Debug(fmt.Sprintf("%s → wait: %d available, %d must stay", story(newRS, oldRSs), available, minAvailable),
			slog.String("object", key), slog.Int("available", int(available)), slog.Int("minAvailable", int(minAvailable)))
		return 0, nil
	}
	oldRSs = slices.Clone(oldRSs)
	slices.SortFunc(oldRSs, byCreation)
	want := available - minAvailable
	total := int64(0)
	for _, rs := range oldRSs {
		if total >= want {
			break
		}
		if specReplicas(rs) == 0 {
			continue
		}
		n := int32(min(int64(specReplicas(rs)), want-total))
		size := specReplicas(rs) - n
		c.log.Info(fmt.Sprintf("%s → scale old %s to %d", story(newRS, oldRSs), rs.Name, size),
			scaleAttrs(key, rs, size)...)
		if _, _, err := c.scaleReplicaSet(ctx, d, rs, size); err != nil {
			return total, err
		}
		total += int64(n)
	}
	return total, nil
}

// podsMayHave is the most pods rs may have right now: its spec, or more
// while its controller has not yet deleted what a scale-down removed.
func podsMayHave(rs *appsv1.ReplicaSet) int32 {
	if rs == nil {
		return 0
	}
	return max(specReplicas(rs), rs.Status.Replicas)
}

// surelyAvailable is the fewest available pods rs will have once its
// controller acts on its spec: a scale-down deletes unavailable pods
// first.
func surelyAvailable(rs *appsv1.ReplicaSet) int32 {
	if rs == nil {
		return 0
	}
	return max(min(specReplicas(rs), rs.Status.AvailableReplicas), 0)
}
