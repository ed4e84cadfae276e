package deployment

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// isScalingEvent reports whether d was resized since its ReplicaSets were
// last scaled: an active ReplicaSet's desired-replicas annotation differs
// from spec.replicas. (Upstream also syncs revisions here; the sync that
// follows does that, so this only reads.)
func isScalingEvent(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) bool {
	for _, rs := range activeReplicaSets(rsList) {
		if desired, ok := intAnnotation(rs, DesiredReplicasAnnotation); ok && desired != replicasOf(d) {
			return true
		}
	}
	return false
}

// scale brings the ReplicaSets to d's size without rolling: all of it to
// the only active (or the newest) ReplicaSet; or, when the new one is
// saturated, nothing to the old ones; or, mid-rollout, the difference
// spread over the active ReplicaSets in proportion to their size.
func (c *Controller) scale(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) error {
	key := d.Namespace + "/" + d.Name
	if rs := findActiveOrLatest(newRS, oldRSs); rs != nil {
		if specReplicas(rs) == replicasOf(d) {
			return nil
		}
		c.log.Info(fmt.Sprintf("want %d, %s → scale %s to %d", replicasOf(d), story(newRS, oldRSs), rs.Name, replicasOf(d)),
			append(scaleAttrs(key, rs, replicasOf(d)), slog.Int("want", int(replicasOf(d))))...)
		_, _, err := c.scaleReplicaSet(ctx, d, rs, replicasOf(d))
		return err
	}
	if isSaturated(d, newRS) {
		for _, old := range activeReplicaSets(oldRSs) {
			c.log.Info(fmt.Sprintf("%s → new is saturated, scale old %s to 0", story(newRS, oldRSs), old.Name),
				scaleAttrs(key, old, 0)...)
			if _, _, err := c.scaleReplicaSet(ctx, d, old, 0); err != nil {
				return err
			}
		}
		return nil
	}
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		return nil
	}

	// Mid-rollout: spread what is to be added (or removed) in proportion
	// to each ReplicaSet's share of the size it was scaled for
	// (max-replicas), biggest first; the rounding leftover goes to the
	// biggest.
	active := activeReplicaSets(append(slices.Clone(oldRSs), newRS))
	allowed := int64(0)
	if replicasOf(d) > 0 {
		allowed = maxTotalPods(d)
	}
	toAdd := allowed - sumSpecReplicas(active)
	if toAdd == 0 {
		return nil
	}
	slices.SortFunc(active, func(a, b *appsv1.ReplicaSet) int {
		if c := cmp.Compare(specReplicas(b), specReplicas(a)); c != 0 {
			return c
		}
		if toAdd > 0 {
			return byCreation(b, a) // grow the newer first
		}
		return byCreation(a, b) // shrink the older first
	})
	sizes := make([]int64, len(active))
	added := int64(0)
	for i, rs := range active {
		p := proportion(rs, d, toAdd, added)
		sizes[i] = int64(specReplicas(rs)) + p
		added += p
	}
	sizes[0] = max(sizes[0]+toAdd-added, 0)
	c.log.Info(fmt.Sprintf("want %d, %s → scale proportionally by %d", replicasOf(d), story(newRS, oldRSs), toAdd),
		slog.String("object", key), slog.Int("want", int(replicasOf(d))), slog.Int("add", int(toAdd)))
	for i, rs := range active {
		if _, _, err := c.scaleReplicaSet(ctx, d, rs, clampReplicas(sizes[i])); err != nil {
			return err
		}
	}
	return nil
}

// proportion is how many of toAdd (negative: to remove) rs takes, given
// that added have been handed out already.
func proportion(rs *appsv1.ReplicaSet, d *appsv1.Deployment, toAdd, added int64) int64 {
	if specReplicas(rs) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	fraction := replicaSetFraction(rs, d)
	left := toAdd - added
	if toAdd > 0 {
		return min(fraction, left)
	}
	return max(fraction, left)
}

// replicaSetFraction is how far rs should grow (or shrink) to keep its
// share of the Deployment's new size.
func replicaSetFraction(rs *appsv1.ReplicaSet, d *appsv1.Deployment) int64 {
	if replicasOf(d) == 0 {
		return -int64(specReplicas(rs))
	}
	total := maxTotalPods(d)
	annotated, ok := intAnnotation(rs, MaxReplicasAnnotation)
	if !ok || annotated == 0 {
		annotated = d.Status.Replicas
	}
	if annotated == 0 {
		return 0
	}
	size := float64(specReplicas(rs)) * float64(total) / float64(annotated)
	return int64(math.Round(size)) - int64(specReplicas(rs))
}

// scaleReplicaSet sets rs's replicas to size, with the replicas
// annotations of d's current size, and records a ScalingReplicaSet event.
// It reports whether the size changed, and returns rs as written.
func (c *Controller) scaleReplicaSet(ctx context.Context, d *appsv1.Deployment, rs *appsv1.ReplicaSet, size int32) (bool, *appsv1.ReplicaSet, error) {
	from := specReplicas(rs)
	desired, most := replicasOf(d), clampReplicas(maxTotalPods(d))
	if from == size && !replicasAnnotationsNeedUpdate(rs, desired, most) {
		return false, rs, nil
	}
	cp := rs.DeepCopy()
	cp.Spec.Replicas = &size
	setReplicasAnnotations(cp, desired, most)
	updated, err := c.rsClient.Update(ctx, cp)
	if err != nil {
		return false, rs, fmt.Errorf("scale replica set %s to %d: %w", rs.Name, size, err)
	}
	if from == size {
		return false, updated, nil
	}
	direction := "up"
	if size < from {
		direction = "down"
	}
	c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet",
		"Scaled %s replica set %s from %d to %d", direction, rs.Name, from, size)
	return true, updated, nil
}

// setReplicasAnnotations records d's size on rs; it reports whether rs
// changed.
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, most int32) bool {
	if !replicasAnnotationsNeedUpdate(rs, desired, most) {
		return false
	}
	rs.Annotations = withLabel(rs.Annotations, DesiredReplicasAnnotation, strconv.Itoa(int(desired)))
	rs.Annotations[MaxReplicasAnnotation] = strconv.Itoa(int(most))
	return true
}

func replicasAnnotationsNeedUpdate(rs *appsv1.ReplicaSet, desired, most int32) bool {
	return rs.Annotations[DesiredReplicasAnnotation] != strconv.Itoa(int(desired)) ||
		rs.Annotations[MaxReplicasAnnotation] != strconv.Itoa(int(most))
}

func intAnnotation(rs *appsv1.ReplicaSet, name string) (int32, bool) {
	v, ok := rs.Annotations[name]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// findActiveOrLatest returns the only active ReplicaSet, or, when none is
// active, the new one or else the newest old one; nil when several are
// active.
func findActiveOrLatest(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(oldRSs) == 0 {
		return nil
	}
	active := activeReplicaSets(append(slices.Clone(oldRSs), newRS))
	switch len(active) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return slices.MaxFunc(oldRSs, byCreation)
	case 1:
		return active[0]
	}
	return nil
}

// isSaturated reports whether the new ReplicaSet has all of d: its size,
// recorded for d's size, and every pod available.
func isSaturated(d *appsv1.Deployment, newRS *appsv1.ReplicaSet) bool {
	if newRS == nil {
		return false
	}
	desired, ok := intAnnotation(newRS, DesiredReplicasAnnotation)
	return ok && desired == replicasOf(d) && specReplicas(newRS) == replicasOf(d) &&
		newRS.Status.AvailableReplicas == replicasOf(d)
}

// resolveFenceposts turns maxSurge and maxUnavailable into numbers for d's
// size: surge rounds up, unavailable rounds down, and they are never both
// zero (unavailable becomes 1), or no rollout could move.
func resolveFenceposts(d *appsv1.Deployment) (surge, unavailable int32, err error) {
	ru := d.Spec.Strategy.RollingUpdate
	if ru == nil {
		ru = &appsv1.RollingUpdateDeployment{}
	}
	zero := intstr.FromInt32(0)
	s, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(ru.MaxSurge, zero), int(replicasOf(d)), true)
	if err != nil {
		return 0, 0, fmt.Errorf("maxSurge: %w", err)
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(ru.MaxUnavailable, zero), int(replicasOf(d)), false)
	if err != nil {
		return 0, 0, fmt.Errorf("maxUnavailable: %w", err)
	}
	if s == 0 && u == 0 {
		u = 1
	}
	// A surge over 100% of a size near the limit is more than an int32.
	return clampReplicas(int64(s)), clampReplicas(int64(u)), nil
}

// maxSurge is d's maxSurge as a number; 0 for Recreate.
func maxSurge(d *appsv1.Deployment) int32 {
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		return 0
	}
	s, _, _ := resolveFenceposts(d)
	return s
}

// maxUnavailable is d's maxUnavailable as a number, at most its size; 0
// for Recreate.
func maxUnavailable(d *appsv1.Deployment) int32 {
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || replicasOf(d) == 0 {
		return 0
	}
	_, u, _ := resolveFenceposts(d)
	return min(u, replicasOf(d))
}

// maxTotalPods is the most pods d may have during a rollout:
// spec.replicas + maxSurge, in int64, since near the int32 limit the sum
// does not fit in one.
func maxTotalPods(d *appsv1.Deployment) int64 {
	return int64(replicasOf(d)) + int64(maxSurge(d))
}

// clampReplicas is n as a number of replicas: sums and totals are computed
// in int64, and what is written back is at least 0 and at most
// math.MaxInt32.
func clampReplicas(n int64) int32 {
	return int32(min(max(n, 0), math.MaxInt32))
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func specReplicas(rs *appsv1.ReplicaSet) int32 {
	if rs == nil || rs.Spec.Replicas == nil {
		return 0
	}
	return *rs.Spec.Replicas
}

// activeReplicaSets returns the ReplicaSets that want pods; nil entries
// (no new ReplicaSet yet) are skipped.
func activeReplicaSets(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if specReplicas(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

func sumSpecReplicas(rss []*appsv1.ReplicaSet) int64 {
	var n int64
	for _, rs := range rss {
		n += int64(specReplicas(rs))
	}
	return n
}

// story describes the ReplicaSets for a log line: "new rs web-7d9f (1/3),
// old rs web-5c4b (2)", the new one with available/wanted, the old ones
// with their wanted replicas.
func story(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) string {
	s := "no new rs"
	if newRS != nil {
		s = fmt.Sprintf("new rs %s (%d/%d)", newRS.Name, newRS.Status.AvailableReplicas, specReplicas(newRS))
	}
	for _, rs := range activeReplicaSets(oldRSs) {
		s += fmt.Sprintf(", old rs %s (%d)", rs.Name, specReplicas(rs))
	}
	return s
}

// scaleAttrs are the data of a decision to scale rs, of the Deployment
// key, to size: the object, the ReplicaSet, from and to.
func scaleAttrs(key string, rs *appsv1.ReplicaSet, size int32) []any {
	return []any{slog.String("object", key), slog.String("replicaSet", rs.Name),
		slog.Int("from", int(specReplicas(rs))), slog.Int("to", int(size))}
}
