package deployment

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The reasons of the Deployment conditions, Kubernetes' own.
const (
	// Available.
	MinimumReplicasAvailable   = "MinimumReplicasAvailable"
	MinimumReplicasUnavailable = "MinimumReplicasUnavailable"

	// Progressing, True.
	NewReplicaSetReason     = "NewReplicaSetCreated"
	FoundNewRSReason        = "FoundNewReplicaSet"
	ReplicaSetUpdatedReason = "ReplicaSetUpdated"
	NewRSAvailableReason    = "NewReplicaSetAvailable"
	// Progressing, False.
	TimedOutReason       = "ProgressDeadlineExceeded"
	FailedRSCreateReason = "ReplicaSetCreateError"
	// Progressing, Unknown.
	PausedDeployReason  = "DeploymentPaused"
	ResumedDeployReason = "DeploymentResumed"
)

// calculateStatus returns d's status from its ReplicaSets' statuses, with
// the Available condition: True while at least spec.replicas -
// maxUnavailable pods are available.
func (c *Controller) calculateStatus(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) appsv1.DeploymentStatus {
	var replicas, ready, available int32
	for _, rs := range allRSs {
		if rs == nil {
			continue
		}
		replicas += rs.Status.Replicas
		ready += rs.Status.ReadyReplicas
		available += rs.Status.AvailableReplicas
	}
	status := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            replicas,
		ReadyReplicas:       ready,
		AvailableReplicas:   available,
		UnavailableReplicas: clampReplicas(sumSpecReplicas(allRSs) - int64(available)),
		CollisionCount:      d.Status.CollisionCount,
		Conditions:          append([]appsv1.DeploymentCondition(nil), d.Status.Conditions...),
	}
	if newRS != nil {
		status.UpdatedReplicas = newRS.Status.Replicas
	}
	if available >= replicasOf(d)-maxUnavailable(d) {
		setCondition(&status, c.newCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue,
			MinimumReplicasAvailable, "Deployment has minimum availability."))
	} else {
		setCondition(&status, c.newCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse,
			MinimumReplicasUnavailable, "Deployment does not have minimum availability."))
	}
	return status
}

// syncDeploymentStatus writes d's status when it changed (no progress
// estimate: for scaling, pausing and deletion).
func (c *Controller) syncDeploymentStatus(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	status := c.calculateStatus(allRSs, newRS, d)
	if apiequality.Semantic.DeepEqual(d.Status, status) {
		return nil
	}
	d.Status = status
	return c.updateStatus(ctx, d)
}

// syncRolloutStatus writes d's status after a rollout step, with the
// Progressing condition: NewReplicaSetAvailable once the rollout is
// complete, ReplicaSetUpdated (its lastUpdateTime moved) whenever pods
// moved forward, ProgressDeadlineExceeded when nothing moved for
// progressDeadlineSeconds.
func (c *Controller) syncRolloutStatus(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	status := c.calculateStatus(allRSs, newRS, d)
	if !hasProgressDeadline(d) {
		removeCondition(&status, appsv1.DeploymentProgressing)
	}
	current := getCondition(d.Status, appsv1.DeploymentProgressing)
	complete := status.Replicas == status.UpdatedReplicas && current != nil && current.Reason == NewRSAvailableReason
	if hasProgressDeadline(d) && !complete {
		name := fmt.Sprintf("Deployment %q", d.Name)
		if newRS != nil {
			name = fmt.Sprintf("ReplicaSet %q", newRS.Name)
		}
		switch {
		case deploymentComplete(d, &status):
			setCondition(&status, c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue,
				NewRSAvailableReason, name+" has successfully progressed."))
		case deploymentProgressing(d, &status):
			// Progress moves lastUpdateTime even when the reason stays:
			// that is the clock the deadline runs on.
			cond := c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue,
				ReplicaSetUpdatedReason, name+" is progressing.")
			if current != nil {
				if current.Status == corev1.ConditionTrue {
					cond.LastTransitionTime = current.LastTransitionTime
				}
				removeCondition(&status, appsv1.DeploymentProgressing)
			}
			setCondition(&status, cond)
		case c.deploymentTimedOut(d, &status):
			setCondition(&status, c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse,
				TimedOutReason, name+" has timed out progressing."))
		}
	}
	if failure := replicaFailure(allRSs, newRS); failure != nil {
		setCondition(&status, *failure)
	} else {
		removeCondition(&status, appsv1.DeploymentReplicaFailure)
	}

	if apiequality.Semantic.DeepEqual(d.Status, status) {
		c.requeueStuckDeployment(d, status)
		return nil
	}
	if prev := getCondition(d.Status, appsv1.DeploymentProgressing); prev == nil || prev.Reason != TimedOutReason {
		if cur := getCondition(status, appsv1.DeploymentProgressing); cur != nil && cur.Reason == TimedOutReason {
			c.log.Info(fmt.Sprintf("no progress for %ds → ProgressDeadlineExceeded", *d.Spec.ProgressDeadlineSeconds),
				slog.String("object", d.Namespace+"/"+d.Name), slog.Int("progressDeadlineSeconds", int(*d.Spec.ProgressDeadlineSeconds)))
		}
	}
	d.Status = status
	return c.updateStatus(ctx, d)
}

// replicaFailure returns a ReplicaSet's ReplicaFailure condition as the
// Deployment's, the new ReplicaSet's first.
func replicaFailure(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) *appsv1.DeploymentCondition {
	rss := allRSs
	if newRS != nil {
		rss = append([]*appsv1.ReplicaSet{newRS}, allRSs...)
	}
	for _, rs := range rss {
		if rs == nil {
			continue
		}
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure {
				return &appsv1.DeploymentCondition{
					Type: appsv1.DeploymentReplicaFailure, Status: c.Status, Reason: c.Reason, Message: c.Message,
					LastUpdateTime: c.LastTransitionTime, LastTransitionTime: c.LastTransitionTime,
				}
			}
		}
	}
	return nil
}

// requeueStuckDeployment looks at a Deployment whose rollout is making no
// progress again when its progress deadline passes, so that
// ProgressDeadlineExceeded is reported even though nothing changes.
func (c *Controller) requeueStuckDeployment(d *appsv1.Deployment, status appsv1.DeploymentStatus) {
	cond := getCondition(d.Status, appsv1.DeploymentProgressing)
	if !hasProgressDeadline(d) || cond == nil || cond.Reason == TimedOutReason || deploymentComplete(d, &status) {
		return
	}
	deadline := cond.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second)
	after := deadline.Sub(c.clock.Now())
	key := d.Namespace + "/" + d.Name
	if after < time.Second {
		c.queue.AddRateLimited(key)
		return
	}
	c.queue.AddAfter(key, after+time.Second) // a second late: the deadline has surely passed
}

// checkPausedConditions records a pause and a resume in the Progressing
// condition (Unknown), unless the deadline was already exceeded.
func (c *Controller) checkPausedConditions(ctx context.Context, d *appsv1.Deployment) error {
	if !hasProgressDeadline(d) {
		return nil
	}
	cond := getCondition(d.Status, appsv1.DeploymentProgressing)
	if cond != nil && cond.Reason == TimedOutReason {
		return nil // a timeout stays reported
	}
	pausedRecorded := cond != nil && cond.Reason == PausedDeployReason
	switch {
	case d.Spec.Paused && !pausedRecorded:
		setCondition(&d.Status, c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown,
			PausedDeployReason, "Deployment is paused"))
	case !d.Spec.Paused && pausedRecorded:
		setCondition(&d.Status, c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown,
			ResumedDeployReason, "Deployment is resumed"))
	default:
		return nil
	}
	return c.updateStatus(ctx, d)
}

// deploymentComplete: every pod wanted is updated and available, and no
// old pod is left, for the current generation.
func deploymentComplete(d *appsv1.Deployment, s *appsv1.DeploymentStatus) bool {
	want := replicasOf(d)
	return s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want &&
		s.ObservedGeneration >= d.Generation
}

// deploymentProgressing: compared with d's recorded status, more pods are
// updated, ready or available, or fewer old ones are left.
func deploymentProgressing(d *appsv1.Deployment, s *appsv1.DeploymentStatus) bool {
	old := d.Status
	return s.UpdatedReplicas > old.UpdatedReplicas ||
		s.Replicas-s.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		s.ReadyReplicas > old.ReadyReplicas ||
		s.AvailableReplicas > old.AvailableReplicas
}

// deploymentTimedOut: the Progressing condition has not moved for
// progressDeadlineSeconds.
func (c *Controller) deploymentTimedOut(d *appsv1.Deployment, s *appsv1.DeploymentStatus) bool {
	cond := getCondition(*s, appsv1.DeploymentProgressing)
	switch {
	case cond == nil || cond.Reason == NewRSAvailableReason:
		return false
	case cond.Reason == TimedOutReason:
		return true
	}
	deadline := cond.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second)
	return deadline.Before(c.clock.Now())
}

// hasProgressDeadline: the deadline is set and not "never" (MaxInt32).
func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

func (c *Controller) newCondition(t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, message string) appsv1.DeploymentCondition {
	now := metav1.NewTime(c.clock.Now())
	return appsv1.DeploymentCondition{
		Type: t, Status: status, Reason: reason, Message: message,
		LastUpdateTime: now, LastTransitionTime: now,
	}
}

func getCondition(s appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// setCondition sets cond in s, unless s has it with the same status and
// reason already; a condition whose status does not change keeps its
// lastTransitionTime.
func setCondition(s *appsv1.DeploymentStatus, cond appsv1.DeploymentCondition) {
	cur := getCondition(*s, cond.Type)
	if cur != nil && cur.Status == cond.Status && cur.Reason == cond.Reason {
		return
	}
	if cur != nil && cur.Status == cond.Status {
		cond.LastTransitionTime = cur.LastTransitionTime
	}
	removeCondition(s, cond.Type)
	s.Conditions = append(s.Conditions, cond)
}

func removeCondition(s *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var out []appsv1.DeploymentCondition
	for _, c := range s.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	s.Conditions = out
}
