package job

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
)

// trackStatus counts the finished pods into the status without ever
// counting one twice, the way kube tracks Jobs with finalizers:
//
//  1. Each finished pod that still carries the tracking finalizer, and may
//     let it go, is recorded: its uid in status.uncountedTerminatedPods
//     (an Indexed Job's success: its index in completedIndexes), and that
//     status written.
//  2. Its finalizer is removed.
//  3. The uids of uncounted pods that no longer carry the finalizer move
//     to status.succeeded and status.failed.
//  4. Once nothing is uncounted and no pod is terminating, a Job heading
//     to an end gets its final condition, Complete or Failed, after the
//     interim SuccessCriteriaMet or FailureTarget recorded in step 1.
//
// A crash between any two steps loses nothing: a pod is uncounted until
// its finalizer is gone, and counted only once it is.
func (c *Controller) trackStatus(ctx context.Context, jc *jobContext, shared *batchv1.Job) error {
	job := jc.job
	uncounted := job.Status.UncountedTerminatedPods
	withFinalizer := map[types.UID]bool{}
	var toRemove []*corev1.Pod
	var newSucceededIndexes []int
	needsFlush := false
	for _, pod := range jc.pods {
		if !hasTrackingFinalizer(pod) {
			continue
		}
		withFinalizer[pod.UID] = true
		if jc.expectedRemovals[pod.UID] {
			continue
		}
		failed := isPodFailed(pod, job)
		if !c.canRemoveFinalizer(jc, pod, failed) {
			continue
		}
		toRemove = append(toRemove, pod)
		switch {
		case pod.Status.Phase == corev1.PodSucceeded && !jc.uncountedFailed[pod.UID]:
			if isIndexed(job) {
				if ix := validIndex(job, pod); ix != noIndex && !jc.prevSucceededIndexes.has(ix) && !jc.failedIndexes.has(ix) {
					newSucceededIndexes = append(newSucceededIndexes, ix)
				}
			} else if !jc.uncountedSucceeded[pod.UID] {
				uncounted.Succeeded = append(uncounted.Succeeded, pod.UID)
				jc.uncountedSucceeded[pod.UID] = true
				needsFlush = true
			}
		case failed || (jc.finished != nil && jc.finished.Type != batchv1.JobSuccessCriteriaMet):
			// A Job that fails counts every pod it stops as failed.
			if jc.uncountedFailed[pod.UID] || (isIndexed(job) && validIndex(job, pod) == noIndex) {
				continue
			}
			m := matchPodFailurePolicy(job.Spec.PodFailurePolicy, pod)
			if m.action != nil {
				c.metrics.failuresByPolicy.WithLabelValues(string(*m.action)).Inc()
			}
			if m.counts {
				uncounted.Failed = append(uncounted.Failed, pod.UID)
				jc.uncountedFailed[pod.UID] = true
				needsFlush = true
			}
		}
	}
	if isIndexed(job) {
		jc.succeededIndexes = jc.prevSucceededIndexes.with(newSucceededIndexes)
		job.Status.CompletedIndexes = jc.succeededIndexes.String()
		job.Status.Succeeded = int32(jc.succeededIndexes.total())
		if hasBackoffLimitPerIndex(job) {
			job.Status.FailedIndexes = new(jc.failedIndexes.String())
		}
		needsFlush = needsFlush || job.Status.CompletedIndexes != shared.Status.CompletedIndexes ||
			deref(job.Status.FailedIndexes, "") != deref(shared.Status.FailedIndexes, "")
	}
	if f := jc.finished; f != nil && f.Type == batchv1.JobFailureTarget {
		job.Status.Conditions = append(job.Status.Conditions, *f)
		needsFlush = true
		c.log.Info(fmt.Sprintf("%s → failing: %s", f.Reason, f.Message), slog.String("object", jc.key), slog.String("reason", f.Reason))
		jc.finished = c.newFinalCondition(batchv1.JobFailed, f)
	}
	if f := jc.finished; f != nil && f.Type == batchv1.JobSuccessCriteriaMet {
		if findCondition(job.Status.Conditions, batchv1.JobSuccessCriteriaMet) == nil {
			job.Status.Conditions = append(job.Status.Conditions, *f)
			needsFlush = true
			c.log.Info(fmt.Sprintf("%s → completing: %s", f.Reason, f.Message), slog.String("object", jc.key), slog.String("reason", f.Reason))
		}
		jc.finished = c.newFinalCondition(batchv1.JobComplete, f)
	}

	// Steps 1 to 3.
	if needsFlush {
		if err := c.writeStatus(ctx, jc); err != nil {
			return err
		}
		c.backoffs.store(jc.key, jc.backoff)
		job, uncounted = jc.job, jc.job.Status.UncountedTerminatedPods
	}
	removed, removeErr := c.removeFinalizers(ctx, jc.key, toRemove)
	for _, uid := range removed {
		delete(withFinalizer, uid)
	}
	moved := countUncounted(&job.Status, withFinalizer)
	if removeErr != nil {
		if moved {
			if err := c.writeStatus(ctx, jc); err != nil {
				return err
			}
		}
		return removeErr
	}

	// Step 4.
	finishedNow := c.enactFinished(jc)
	if !finishedNow && apiequality.Semantic.DeepEqual(job.Status, shared.Status) {
		return nil
	}
	before := shared.Status
	if err := c.writeStatus(ctx, jc); err != nil {
		return err
	}
	c.recordPodsFinished(jc.job, before)
	if finishedNow {
		c.recordFinished(jc)
	}
	return nil
}

// canRemoveFinalizer: the outcome of pod is settled, so its finalizer may
// go, when it succeeded or failed for the Job, the Job is ending or being
// deleted, or a suspension stopped it. A failed pod kept as the failure
// record of its index keeps it.
func (c *Controller) canRemoveFinalizer(jc *jobContext, pod *corev1.Pod, failed bool) bool {
	job := jc.job
	if job.DeletionTimestamp != nil || jc.finished != nil || pod.Status.Phase == corev1.PodSucceeded {
		return true
	}
	if isSuspended(job) && pod.DeletionTimestamp != nil {
		return true
	}
	if !failed {
		return false
	}
	if ix := validIndex(job, pod); ix != noIndex {
		if last, ok := jc.delayed[ix]; ok && last.UID == pod.UID {
			return false
		}
	}
	return true
}

// countUncounted moves the uncounted uids whose pods carry no finalizer
// any more into succeeded and failed, and reports whether it moved any.
func countUncounted(status *batchv1.JobStatus, withFinalizer map[types.UID]bool) bool {
	u := status.UncountedTerminatedPods
	var keepS, keepF []types.UID
	for _, uid := range u.Succeeded {
		if withFinalizer[uid] {
			keepS = append(keepS, uid)
		} else {
			status.Succeeded++
		}
	}
	for _, uid := range u.Failed {
		if withFinalizer[uid] {
			keepF = append(keepF, uid)
		} else {
			status.Failed++
		}
	}
	moved := len(keepS) != len(u.Succeeded) || len(keepF) != len(u.Failed)
	u.Succeeded, u.Failed = keepS, keepF
	return moved
}

// enactFinished gives a Job heading to an end its final condition once
// every pod is counted and none is terminating; a Complete Job gets its
// completionTime.
func (c *Controller) enactFinished(jc *jobContext) bool {
	f := jc.finished
	job := jc.job
	if f == nil {
		return false
	}
	if u := job.Status.UncountedTerminatedPods; len(u.Succeeded)+len(u.Failed) > 0 {
		return false
	}
	if deref(job.Status.Terminating, 0) > 0 || jc.terminating > 0 {
		return false
	}
	c.ensureCondition(job, f.Type, f.Status, f.Reason, f.Message)
	if f.Type == batchv1.JobComplete {
		cond := findCondition(job.Status.Conditions, batchv1.JobComplete)
		job.Status.CompletionTime = cond.LastTransitionTime.DeepCopy()
	}
	return true
}

// recordFinished tells that the Job ended, in the log, an Event and a
// metric.
func (c *Controller) recordFinished(jc *jobContext) {
	job, f := jc.job, jc.finished
	mode := string(deref(job.Spec.CompletionMode, batchv1.NonIndexedCompletion))
	if f.Type == batchv1.JobComplete {
		c.log.Info(fmt.Sprintf("complete: %d succeeded, %d failed", job.Status.Succeeded, job.Status.Failed),
			slog.String("object", jc.key), slog.Int("succeeded", int(job.Status.Succeeded)), slog.Int("failed", int(job.Status.Failed)))
		c.recorder.Event(job, corev1.EventTypeNormal, "Completed", "Job completed")
		c.metrics.finished.WithLabelValues(mode, "succeeded", f.Reason).Inc()
		return
	}
	c.log.Info(fmt.Sprintf("failed (%s): %d succeeded, %d failed", f.Reason, job.Status.Succeeded, job.Status.Failed),
		slog.String("object", jc.key), slog.String("reason", f.Reason), slog.Int("succeeded", int(job.Status.Succeeded)), slog.Int("failed", int(job.Status.Failed)))
	c.recorder.Event(job, corev1.EventTypeWarning, f.Reason, f.Message)
	c.metrics.finished.WithLabelValues(mode, "failed", f.Reason).Inc()
}

func (c *Controller) recordPodsFinished(job *batchv1.Job, before batchv1.JobStatus) {
	mode := string(deref(job.Spec.CompletionMode, batchv1.NonIndexedCompletion))
	if d := job.Status.Succeeded - before.Succeeded; d > 0 {
		c.metrics.podsFinished.WithLabelValues(mode, "succeeded").Add(float64(d))
	}
	if d := job.Status.Failed - before.Failed; d > 0 {
		c.metrics.podsFinished.WithLabelValues(mode, "failed").Add(float64(d))
	}
}

// writeStatus writes jc.job's status and keeps what the server returned.
func (c *Controller) writeStatus(ctx context.Context, jc *jobContext) error {
	written, err := c.jobClient.UpdateStatus(ctx, jc.job)
	if err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	st := jc.job.Status
	c.log.Debug(fmt.Sprintf("status active=%d succeeded=%d failed=%d uncounted=%d/%d", st.Active, st.Succeeded, st.Failed,
		len(st.UncountedTerminatedPods.Succeeded), len(st.UncountedTerminatedPods.Failed)), slog.String("object", jc.key))
	if written.Status.UncountedTerminatedPods == nil {
		written.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	jc.job = written
	return nil
}

// removeFinalizers removes the tracking finalizer from pods, and returns
// the uids of those that no longer have it.
func (c *Controller) removeFinalizers(ctx context.Context, key string, pods []*corev1.Pod) ([]types.UID, error) {
	var mu sync.Mutex
	var removed []types.UID
	var errs []error
	var wg sync.WaitGroup
	for _, pod := range pods {
		wg.Go(func() {
			err := c.removeFinalizer(ctx, key, pod)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			removed = append(removed, pod.UID)
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return removed, fmt.Errorf("remove tracking finalizers: %w", errs[0])
	}
	return removed, nil
}

// removeFinalizer patches the tracking finalizer away from pod, expecting
// to observe it gone; a pod already gone counts as done.
func (c *Controller) removeFinalizer(ctx context.Context, key string, pod *corev1.Pod) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"$deleteFromPrimitiveList/finalizers": []string{batchv1.JobTrackingFinalizer},
		"uid":                                 pod.UID,
	}})
	if err != nil {
		return err
	}
	c.removals.expect(key, pod.UID)
	_, err = c.podClient.Patch(ctx, pod.Namespace, pod.Name, types.StrategicMergePatchType, patch)
	switch {
	case err == nil:
		return nil
	case client.IsNotFound(err):
		c.removals.observed(key, pod.UID)
		return nil
	}
	c.removals.observed(key, pod.UID)
	return fmt.Errorf("remove finalizer of pod %s: %w", pod.Name, err)
}

// Conditions.

func (c *Controller) newCondition(t batchv1.JobConditionType, reason, message string) *batchv1.JobCondition {
	now := metav1.NewTime(c.clock.Now())
	return &batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastProbeTime: now, LastTransitionTime: now}
}

// newFinalCondition is the Failed or Complete condition that follows the
// interim one, with its reason and message.
func (c *Controller) newFinalCondition(t batchv1.JobConditionType, interim *batchv1.JobCondition) *batchv1.JobCondition {
	return c.newCondition(t, interim.Reason, interim.Message)
}

// ensureCondition sets the condition of type t on job, as kube's
// ensureJobConditionStatus: a change of status, reason or message
// replaces it; a False condition is not added where none was. It reports
// whether anything changed.
func (c *Controller) ensureCondition(job *batchv1.Job, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string) bool {
	cond := c.newCondition(t, reason, message)
	cond.Status = status
	if existing := findCondition(job.Status.Conditions, t); existing != nil {
		if existing.Status == status && existing.Reason == reason && existing.Message == message {
			return false
		}
		*existing = *cond
		return true
	}
	if status == corev1.ConditionFalse {
		return false
	}
	job.Status.Conditions = append(job.Status.Conditions, *cond)
	return true
}

func findCondition(conds []batchv1.JobCondition, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// isFinished: the Job has its Complete or Failed condition.
func isFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// backoffRecord is a Job's failure history: failures in a row since the
// last success, and when the last of them ended.
type backoffRecord struct {
	failures    int32
	lastFailure time.Time
}

// remaining is how long to wait, at now, before the next pod.
func (r backoffRecord) remaining(now time.Time, base, maxDelay time.Duration) time.Duration {
	if r.failures == 0 {
		return 0
	}
	wait := backoff(r.failures, base, maxDelay) - now.Sub(r.lastFailure)
	return max(wait, 0)
}

// backoffStore keeps each Job's backoffRecord between syncs, and which
// back-off it last told of.
type backoffStore struct {
	mu    sync.Mutex
	byKey map[string]backoffRecord
	told  map[string]backoffRecord
}

// firstTelling reports whether rec's back-off is news for key: the syncs
// that wait it out say it once.
func (s *backoffStore) firstTelling(key string, rec backoffRecord) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.told == nil {
		s.told = map[string]backoffRecord{}
	}
	if s.told[key] == rec {
		return false
	}
	s.told[key] = rec
	return true
}

// next returns key's record with the newly finished pods added: a success
// later than every new failure starts the count again.
func (s *backoffStore) next(key string, succeeded, failed []*corev1.Pod, now time.Time) backoffRecord {
	s.mu.Lock()
	rec := s.byKey[key]
	s.mu.Unlock()
	var lastSuccess time.Time
	for _, p := range succeeded {
		if t := finishTime(p, now); t.After(lastSuccess) {
			lastSuccess = t
		}
	}
	var lastFailure time.Time
	for _, p := range failed {
		if t := finishTime(p, now); t.After(lastFailure) {
			lastFailure = t
		}
	}
	switch {
	case len(failed) == 0 && len(succeeded) > 0:
		return backoffRecord{}
	case len(failed) == 0:
		return rec
	case lastSuccess.After(lastFailure):
		return backoffRecord{}
	}
	return backoffRecord{failures: rec.failures + int32(len(failed)), lastFailure: lastFailure}
}

func (s *backoffStore) store(key string, rec backoffRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKey == nil {
		s.byKey = map[string]backoffRecord{}
	}
	s.byKey[key] = rec
}

func (s *backoffStore) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byKey, key)
	delete(s.told, key)
}

// removalExpectations remembers, per Job, the pods whose finalizer the
// controller removed but has not yet seen removed in its cache: until it
// does, their outcome is being counted and must not be counted again.
type removalExpectations struct {
	mu    sync.Mutex
	byKey map[string]map[types.UID]bool
}

func (e *removalExpectations) expect(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byKey == nil {
		e.byKey = map[string]map[types.UID]bool{}
	}
	if e.byKey[key] == nil {
		e.byKey[key] = map[types.UID]bool{}
	}
	e.byKey[key][uid] = true
}

func (e *removalExpectations) observed(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byKey[key], uid)
	if len(e.byKey[key]) == 0 {
		delete(e.byKey, key)
	}
}

// expected returns a copy of key's expected removals.
func (e *removalExpectations) expected(key string) map[types.UID]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[types.UID]bool, len(e.byKey[key]))
	for uid := range e.byKey[key] {
		out[uid] = true
	}
	return out
}

func (e *removalExpectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byKey, key)
}
