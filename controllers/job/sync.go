package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
)

// maxPodCreateDeletePerSync caps the creates or deletes of one sync, as
// upstream's MaxPodCreateDeletePerSync.
const maxPodCreateDeletePerSync = 500

// The messages of the conditions, kube's words.
const (
	msgCompletionsReached = "Reached expected number of succeeded pods"
	msgBackoffLimit       = "Job has reached the specified backoff limit"
	msgDeadline           = "Job was active longer than specified deadline"
	msgMaxFailedIndexes   = "Job has exceeded the specified maximal number of failed indexes"
	msgFailedIndexes      = "Job has failed indexes"
)

// jobContext is what one sync knows of one Job: its copy of the Job,
// whose status it edits, the pods the Job controls, and the counts and
// decision it derives from them.
type jobContext struct {
	key    string
	job    *batchv1.Job
	pods   []*corev1.Pod // every pod the Job controls, finished or not
	active []*corev1.Pod // not finished, not being deleted

	uncountedSucceeded, uncountedFailed map[types.UID]bool
	expectedRemovals                    map[types.UID]bool // finalizers being removed, not yet observed

	newSucceeded, newFailed []*corev1.Pod // finished, still carrying the finalizer, not yet uncounted
	succeeded, failed       int32
	ready, terminating      int32

	// finished is the condition the Job is heading to: an interim
	// FailureTarget or SuccessCriteriaMet, or the final Failed or
	// Complete once the interim one is recorded. nil: still running.
	finished *batchv1.JobCondition

	prevSucceededIndexes, succeededIndexes, failedIndexes indexSet
	// delayed holds, per index, the failed pod whose finalizer stays until
	// a replacement carries its failure count (backoffLimitPerIndex).
	delayed map[int]*corev1.Pod

	backoff backoffRecord // the failure history, with this sync's new failures
}

// sync brings one Job one step closer to done; see the package doc.
func (c *Controller) sync(ctx context.Context, key string) error {
	start := c.clock.Now()
	defer func() { c.metrics.syncDuration.Observe(c.clock.Now().Sub(start).Seconds()) }()
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		c.log.Error("bad key", "key", key, "err", err)
		return nil // a malformed key never gets better
	}
	shared, err := c.jobLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		c.forget(key)
		return nil // the job is gone; its pods' finalizers are the orphan queue's
	}
	if err != nil {
		return err
	}
	if isFinished(shared) {
		c.backoffs.forget(key)
		return nil // done; nothing of it runs any more
	}
	if mb := shared.Spec.ManagedBy; mb != nil && *mb != batchv1.JobControllerName {
		return nil // another controller keeps this Job
	}
	selector, err := metav1.LabelSelectorAsSelector(shared.Spec.Selector)
	if err != nil {
		c.log.Error("invalid selector", slog.String("object", key), slog.Any("err", err))
		return nil // retrying will not fix the selector
	}
	job := shared.DeepCopy()
	if job.Status.UncountedTerminatedPods == nil {
		job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}

	// Read the expectations before the pods: a pod observed in between
	// then makes us wait once more, rather than act on a cache that lacks it.
	satisfied := c.expectations.Satisfied(key)
	pods, err := c.claimPods(ctx, job, selector)
	if err != nil {
		return err
	}
	jc := c.newJobContext(key, job, pods)
	if job.Status.StartTime == nil && !isSuspended(job) {
		job.Status.StartTime = &metav1.Time{Time: c.clock.Now()}
	}
	c.decideFinished(jc)

	var manageErr error
	if jc.finished != nil {
		// Done one way or the other: nothing may run any more.
		if n := len(jc.active); n > 0 {
			c.log.Info(fmt.Sprintf("%s → delete %d active pods", jc.finished.Reason, n),
				slog.String("object", key), slog.String("reason", jc.finished.Reason), slog.Int("delete", n))
		}
		deleted, deletedReady, err := c.deletePods(ctx, jc, jc.active, false)
		if deleted != len(jc.active) || !satisfied {
			jc.finished = nil // pods are still going, or the cache is behind: finish later
		}
		jc.ready -= deletedReady
		jc.terminating += int32(deleted)
		job.Status.Active = int32(len(jc.active) - deleted)
		manageErr = err
	} else {
		active := int32(len(jc.active))
		managed := false
		if satisfied && job.DeletionTimestamp == nil {
			active, manageErr = c.manageJob(ctx, jc)
			managed = true
		} else if !satisfied {
			adds, dels := c.expectations.Pending(key)
			c.log.Debug(fmt.Sprintf("waiting to observe %d creates and %d deletes → status only", adds, dels), slog.String("object", key))
		}
		job.Status.Active = active
		var complete bool
		if job.Spec.Completions == nil {
			complete = jc.succeeded > 0 && active == 0 // a work queue is done once one pod succeeded and none runs
		} else {
			complete = jc.succeeded >= *job.Spec.Completions && active == 0
		}
		switch {
		case complete:
			jc.finished = c.newCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, msgCompletionsReached)
		case managed:
			c.updateSuspendedCondition(jc)
		}
	}
	job.Status.Ready = new(jc.ready)
	job.Status.Terminating = new(jc.terminating)
	if err := c.trackStatus(ctx, jc, shared); err != nil {
		return errors.Join(manageErr, fmt.Errorf("tracking status: %w", err))
	}
	return manageErr
}

// newJobContext counts jc.pods: which are active, ready, terminating, and
// which finished since the status last counted them.
func (c *Controller) newJobContext(key string, job *batchv1.Job, pods []*corev1.Pod) *jobContext {
	jc := &jobContext{
		key: key, job: job, pods: pods, active: controller.FilterActivePods(pods),
		uncountedSucceeded: uidSet(job.Status.UncountedTerminatedPods.Succeeded),
		uncountedFailed:    uidSet(job.Status.UncountedTerminatedPods.Failed),
		expectedRemovals:   c.removals.expected(key),
	}
	for _, p := range jc.active {
		if api.PodIsReady(p) {
			jc.ready++
		}
	}
	for _, p := range pods {
		if isTerminating(p) {
			jc.terminating++
		}
		if !hasTrackingFinalizer(p) || jc.expectedRemovals[p.UID] || (isIndexed(job) && validIndex(job, p) == noIndex) {
			continue // counted already, or never to be
		}
		switch {
		case p.Status.Phase == corev1.PodSucceeded && !jc.uncountedSucceeded[p.UID]:
			jc.newSucceeded = append(jc.newSucceeded, p)
		case isPodFailed(p, job) && !jc.uncountedFailed[p.UID]:
			jc.newFailed = append(jc.newFailed, p)
		}
	}
	counted := 0
	for _, p := range jc.newFailed {
		if matchPodFailurePolicy(job.Spec.PodFailurePolicy, p).counts {
			counted++
		}
	}
	jc.succeeded = job.Status.Succeeded + int32(len(jc.newSucceeded)+len(jc.uncountedSucceeded))
	jc.failed = job.Status.Failed + int32(counted+len(jc.uncountedFailed))
	jc.backoff = c.backoffs.next(key, jc.newSucceeded, jc.newFailed, c.clock.Now())
	return jc
}

// decideFinished sets jc.finished when the Job must stop: a condition it
// already has, a FailJob rule, the backoff limit, the active deadline,
// too many failed indexes, or a met success policy. Completion by count
// is decided after manageJob.
func (c *Controller) decideFinished(jc *jobContext) {
	job := jc.job
	if cond := findCondition(job.Status.Conditions, batchv1.JobSuccessCriteriaMet); cond != nil && cond.Status == corev1.ConditionTrue {
		jc.finished = cond.DeepCopy()
	} else if ft := findCondition(job.Status.Conditions, batchv1.JobFailureTarget); ft != nil && ft.Status == corev1.ConditionTrue {
		jc.finished = c.newFinalCondition(batchv1.JobFailed, ft)
	} else if msg := failJobMessage(job, jc.pods); msg != "" {
		jc.finished = c.newCondition(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, msg)
	}
	if jc.finished == nil {
		switch {
		case jc.failed > deref(job.Spec.BackoffLimit, 6) || pastBackoffLimitOnFailure(job, jc.active):
			jc.finished = c.newCondition(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, msgBackoffLimit)
		case c.pastActiveDeadline(job):
			jc.finished = c.newCondition(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, msgDeadline)
		case job.Spec.ActiveDeadlineSeconds != nil && !isSuspended(job) && job.Status.StartTime != nil:
			left := time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second - c.clock.Now().Sub(job.Status.StartTime.Time)
			c.queue.AddAfter(jc.key, left)
		}
	}
	if !isIndexed(job) {
		return
	}
	completions := deref(job.Spec.Completions, 0)
	jc.prevSucceededIndexes = parseIndexSet(job.Status.CompletedIndexes, completions)
	var newIndexes []int
	for _, p := range jc.pods {
		if ix := validIndex(job, p); ix != noIndex && p.Status.Phase == corev1.PodSucceeded && hasTrackingFinalizer(p) {
			newIndexes = append(newIndexes, ix)
		}
	}
	jc.succeededIndexes = jc.prevSucceededIndexes.with(newIndexes)
	jc.succeeded = int32(jc.succeededIndexes.total())
	if hasBackoffLimitPerIndex(job) {
		jc.failedIndexes = failedIndexes(job, jc.pods)
		if jc.finished == nil {
			failed := jc.failedIndexes.total()
			switch {
			case job.Spec.MaxFailedIndexes != nil && failed > int(*job.Spec.MaxFailedIndexes):
				jc.finished = c.newCondition(batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, msgMaxFailedIndexes)
			case failed > 0 && failed+jc.succeededIndexes.total() >= int(completions):
				jc.finished = c.newCondition(batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes, msgFailedIndexes)
			}
		}
		jc.delayed = delayedPerIndex(jc)
	}
	if jc.finished == nil {
		if msg, met := matchSuccessPolicy(job.Spec.SuccessPolicy, completions, jc.succeededIndexes); met {
			jc.finished = c.newCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonSuccessPolicy, msg)
		}
	}
}

// failedIndexes are the indexes already failed and those whose pod now
// failed for good: a FailIndex rule, or backoffLimitPerIndex reached.
func failedIndexes(job *batchv1.Job, pods []*corev1.Pod) indexSet {
	prev := parseIndexSet(deref(job.Status.FailedIndexes, ""), deref(job.Spec.Completions, 0))
	var add []int
	for _, p := range pods {
		ix := validIndex(job, p)
		if ix == noIndex || !hasTrackingFinalizer(p) || !isPodFailed(p, job) {
			continue
		}
		m := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p)
		if (m.action != nil && *m.action == batchv1.PodFailurePolicyActionFailIndex) ||
			(m.counts && indexFailureCount(p) >= *job.Spec.BackoffLimitPerIndex) {
			add = append(add, ix)
		}
	}
	return prev.with(add)
}

// delayedPerIndex finds, for each index still to be retried, its failed
// pod with the most failures before it, when no pod of that index is
// running yet: that pod keeps its finalizer, and with it the index's
// failure count, until its replacement is created.
func delayedPerIndex(jc *jobContext) map[int]*corev1.Pod {
	running := map[int]bool{}
	for _, p := range jc.active {
		running[validIndex(jc.job, p)] = true
	}
	out := map[int]*corev1.Pod{}
	for _, p := range jc.pods {
		ix := validIndex(jc.job, p)
		if ix == noIndex || running[ix] || !hasTrackingFinalizer(p) || !isPodFailed(p, jc.job) ||
			jc.failedIndexes.has(ix) || jc.succeededIndexes.has(ix) {
			continue
		}
		if last := out[ix]; last == nil || absoluteFailures(last) < absoluteFailures(p) {
			out[ix] = p
		}
	}
	return out
}

func absoluteFailures(p *corev1.Pod) int32 { return indexFailureCount(p) + indexIgnoredFailureCount(p) }

// pastBackoffLimitOnFailure: with restartPolicy OnFailure, failures are
// container restarts in place; the Job fails once they reach the limit.
func pastBackoffLimitOnFailure(job *batchv1.Job, active []*corev1.Pod) bool {
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return false
	}
	var restarts int32
	for _, p := range active {
		for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			for _, cs := range list {
				restarts += cs.RestartCount
			}
		}
	}
	limit := deref(job.Spec.BackoffLimit, 6)
	return limit == 0 && restarts > 0 || limit > 0 && restarts >= limit
}

func (c *Controller) pastActiveDeadline(job *batchv1.Job) bool {
	if job.Spec.ActiveDeadlineSeconds == nil || job.Status.StartTime == nil || isSuspended(job) {
		return false
	}
	return c.clock.Now().Sub(job.Status.StartTime.Time) >= time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second
}

// manageJob creates or deletes pods so that as many run as the Job wants:
// none while suspended; else parallelism, but never more than the
// completions still missing, and, for a work queue that has seen a
// success, no new ones. Deletes win over creates within one sync. It
// returns the active pods there will be.
func (c *Controller) manageJob(ctx context.Context, jc *jobContext) (int32, error) {
	job, key := jc.job, jc.key
	active := int32(len(jc.active))
	if isSuspended(job) {
		if active == 0 {
			return 0, nil
		}
		c.log.Info(fmt.Sprintf("suspended → delete %d active pods", active), slog.String("object", key), slog.Int("delete", int(active)))
		deleted, deletedReady, err := c.deletePods(ctx, jc, jc.active, true)
		jc.ready -= deletedReady
		return active - int32(deleted), err
	}
	parallelism := deref(job.Spec.Parallelism, 1)
	var want int32
	switch {
	case job.Spec.Completions == nil && jc.succeeded > 0:
		want = active // one succeeded: let the others finish, start none
	case job.Spec.Completions == nil:
		want = parallelism
	default:
		want = max(0, min(*job.Spec.Completions-jc.succeeded, parallelism))
	}
	if extra := active - want; extra > 0 {
		victims := podsForRemoval(job, jc.active, int(min(extra, maxPodCreateDeletePerSync)))
		c.log.Info(fmt.Sprintf("want %d active, have %d → delete %d", want, active, len(victims)),
			slog.String("object", key), slog.Int("want", int(want)), slog.Int("active", int(active)), slog.Int("delete", len(victims)))
		deleted, deletedReady, err := c.deletePods(ctx, jc, victims, false)
		jc.ready -= deletedReady
		return active - int32(deleted), err
	}
	var terminating int32
	if onlyReplaceFailedPods(job) {
		terminating = jc.terminating // a pod being deleted is replaced once it has failed
	}
	diff := want - terminating - active
	if diff <= 0 {
		return active, nil
	}
	if !hasBackoffLimitPerIndex(job) {
		if wait := jc.backoff.remaining(c.clock.Now(), c.backoffBase, c.backoffMax); wait > 0 {
			level := slog.LevelDebug
			if c.backoffs.firstTelling(key, jc.backoff) {
				level = slog.LevelInfo
			}
			c.log.Log(ctx, level, fmt.Sprintf("%d failed pods in a row → back off %s before creating pods", jc.backoff.failures, wait.Round(time.Millisecond)),
				slog.String("object", key), slog.Duration("wait", wait))
			c.queue.AddAfter(key, wait)
			return active, nil
		}
	}
	diff = min(diff, maxPodCreateDeletePerSync)
	indexes := make([]int, 0, diff)
	if isIndexed(job) {
		pending := firstPendingIndexes(jc, int(diff))
		if hasBackoffLimitPerIndex(job) {
			var wait time.Duration
			if pending, wait = c.indexesDueNow(jc, pending); len(pending) == 0 && wait > 0 {
				c.queue.AddAfter(key, wait)
				return active, nil
			}
		}
		indexes = pending
		diff = int32(len(indexes))
	} else {
		for range diff {
			indexes = append(indexes, noIndex)
		}
	}
	if diff == 0 {
		return active, nil
	}
	c.log.Info(fmt.Sprintf("want %d active, have %d → create %d", want, active, diff),
		slog.String("object", key), slog.Int("want", int(want)), slog.Int("active", int(active)), slog.Int("create", int(diff)))
	created, err := c.createPods(ctx, jc, indexes)
	return active + int32(created), err
}

// firstPendingIndexes returns up to n indexes, lowest first, that have
// neither succeeded nor failed for good nor a pod running for them.
func firstPendingIndexes(jc *jobContext, n int) []int {
	taken := map[int]bool{}
	for _, p := range jc.active {
		taken[validIndex(jc.job, p)] = true
	}
	if onlyReplaceFailedPods(jc.job) {
		for _, p := range jc.pods {
			if isTerminating(p) {
				taken[validIndex(jc.job, p)] = true
			}
		}
	}
	var out []int
	for i := 0; i < int(deref(jc.job.Spec.Completions, 0)) && len(out) < n; i++ {
		if !taken[i] && !jc.succeededIndexes.has(i) && !jc.failedIndexes.has(i) {
			out = append(out, i)
		}
	}
	return out
}

// indexesDueNow keeps the indexes whose own back-off has passed, and says
// how long until the first of the others is due.
func (c *Controller) indexesDueNow(jc *jobContext, indexes []int) ([]int, time.Duration) {
	var due []int
	var next time.Duration
	now := c.clock.Now()
	for _, ix := range indexes {
		last := jc.delayed[ix]
		if last == nil {
			due = append(due, ix)
			continue
		}
		rec := backoffRecord{failures: absoluteFailures(last) + 1, lastFailure: finishTime(last, now)}
		if wait := rec.remaining(now, c.backoffBase, c.backoffMax); wait > 0 {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		due = append(due, ix)
	}
	return due, next
}

// podsForRemoval picks n of the active pods to delete: for an Indexed Job
// first those with a missing, out-of-range or repeated index, then the
// pods doing least work.
func podsForRemoval(job *batchv1.Job, active []*corev1.Pod, n int) []*corev1.Pod {
	if !isIndexed(job) {
		return controller.PodsToDelete(active, n)
	}
	var first, rest []*corev1.Pod
	seen := map[int]bool{}
	for _, p := range controller.PodsToDelete(active, len(active)) {
		ix := validIndex(job, p)
		if ix == noIndex || seen[ix] {
			first = append(first, p)
			continue
		}
		seen[ix] = true
		rest = append(rest, p)
	}
	all := append(first, rest...)
	return all[:min(n, len(all))]
}

// createPods creates one pod per entry of indexes (noIndex for a
// NonIndexed Job) in doubling batches, each with the tracking finalizer
// and, for an Indexed Job, its index as annotation, label, environment
// variable and hostname. It returns how many were created.
func (c *Controller) createPods(ctx context.Context, jc *jobContext, indexes []int) (int, error) {
	job, key := jc.job, jc.key
	template := job.Spec.Template.DeepCopy()
	template.Finalizers = appendIfMissing(template.Finalizers, batchv1.JobTrackingFinalizer)
	if isIndexed(job) {
		addIndexEnv(template)
	}
	ref := controller.NewControllerRef(job, controllerKind)
	next := make(chan int, len(indexes))
	for _, ix := range indexes {
		next <- ix
	}
	close(next)
	c.expectations.ExpectCreations(key, len(indexes))
	created, err := controller.SlowStartBatch(len(indexes), 1, func() error {
		ix := <-next
		tmpl, generateName := template, ""
		if ix != noIndex {
			tmpl = template.DeepCopy()
			if tmpl.Annotations == nil {
				tmpl.Annotations = map[string]string{}
			}
			if tmpl.Labels == nil {
				tmpl.Labels = map[string]string{}
			}
			tmpl.Annotations[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(ix)
			tmpl.Labels[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(ix)
			tmpl.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, ix)
			generateName = podGenerateName(job.Name, ix)
			if hasBackoffLimitPerIndex(job) {
				failures, ignored := newIndexFailureCounts(job, jc.delayed[ix])
				tmpl.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(int(failures))
				if ignored > 0 {
					tmpl.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(int(ignored))
				}
			}
		}
		err := c.createPod(ctx, job, tmpl, ref, generateName)
		if client.IsTimeout(err) {
			return nil // the server may still create it: keep expecting it
		}
		return err
	})
	for range len(indexes) - created {
		c.expectations.CreationObserved(key) // never made, never observed
	}
	if err != nil {
		return created, fmt.Errorf("create pods: %w", err)
	}
	return created, nil
}

func (c *Controller) createPod(ctx context.Context, job *batchv1.Job, tmpl *corev1.PodTemplateSpec, ref *metav1.OwnerReference, generateName string) error {
	pod, err := controller.PodFromTemplate(tmpl, job, ref)
	if err != nil {
		return err
	}
	if generateName != "" {
		pod.GenerateName = generateName
	}
	created, err := c.podClient.Create(ctx, pod)
	if err != nil {
		c.recorder.Eventf(job, corev1.EventTypeWarning, controller.FailedCreateReason, "Error creating: %v", err)
		return err
	}
	c.recorder.Eventf(job, corev1.EventTypeNormal, controller.SuccessfulCreateReason, "Created pod: %s", created.Name)
	return nil
}

// newIndexFailureCounts are the failure counts a replacement of the failed
// pod last of its index carries: one more counted, or ignored, failure.
func newIndexFailureCounts(job *batchv1.Job, last *corev1.Pod) (failures, ignored int32) {
	if last == nil {
		return 0, 0
	}
	failures, ignored = indexFailureCount(last), indexIgnoredFailureCount(last)
	if matchPodFailurePolicy(job.Spec.PodFailurePolicy, last).counts {
		failures++
	} else {
		ignored++
	}
	return failures, ignored
}

// addIndexEnv gives every container JOB_COMPLETION_INDEX, read from the
// pod's completion index annotation, unless it sets it itself.
func addIndexEnv(template *corev1.PodTemplateSpec) {
	env := corev1.EnvVar{Name: "JOB_COMPLETION_INDEX", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		APIVersion: "v1", FieldPath: fmt.Sprintf("metadata.annotations['%s']", batchv1.JobCompletionIndexAnnotation),
	}}}
	for _, list := range [][]corev1.Container{template.Spec.InitContainers, template.Spec.Containers} {
		for i := range list {
			has := false
			for _, e := range list[i].Env {
				has = has || e.Name == env.Name
			}
			if !has {
				list[i].Env = append(list[i].Env, env)
			}
		}
	}
}

// deletePods deletes pods on the Job's behalf, and returns how many are
// going and how many of those were ready. dropFinalizer first removes the
// tracking finalizer: a pod a suspension stops is neither a success nor a
// failure.
func (c *Controller) deletePods(ctx context.Context, jc *jobContext, pods []*corev1.Pod, dropFinalizer bool) (int, int32, error) {
	if len(pods) == 0 {
		return 0, 0, nil
	}
	key := jc.key
	podKeys := make([]string, len(pods))
	for i, p := range pods {
		podKeys[i] = controller.PodKey(p)
	}
	c.expectations.ExpectDeletions(key, podKeys)
	errs := make([]error, len(pods))
	var mu sync.Mutex
	var deleted int
	var deletedReady int32
	var wg sync.WaitGroup
	for i, pod := range pods {
		wg.Go(func() {
			if dropFinalizer && hasTrackingFinalizer(pod) {
				if err := c.removeFinalizer(ctx, key, pod); err != nil {
					errs[i] = err
					c.expectations.DeletionObserved(key, controller.PodKey(pod))
					return
				}
			}
			err := c.podControl.DeletePod(ctx, pod.Namespace, pod.Name, jc.job)
			if err != nil {
				c.expectations.DeletionObserved(key, controller.PodKey(pod)) // never to be observed
				if !client.IsNotFound(err) {
					errs[i] = fmt.Errorf("delete pod %s: %w", pod.Name, err)
					return
				}
			}
			mu.Lock()
			defer mu.Unlock()
			deleted++
			if api.PodIsReady(pod) {
				deletedReady++
			}
		})
	}
	wg.Wait()
	return deleted, deletedReady, errors.Join(errs...)
}

// updateSuspendedCondition records a suspension or a resumption, with an
// Event; a resumed Job's startTime starts again, so that the active
// deadline counts only time spent running.
func (c *Controller) updateSuspendedCondition(jc *jobContext) {
	job := jc.job
	if isSuspended(job) {
		if c.ensureCondition(job, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended") {
			c.log.Info("suspended", slog.String("object", jc.key))
			c.recorder.Event(job, corev1.EventTypeNormal, "Suspended", "Job suspended")
		}
		return
	}
	if c.ensureCondition(job, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed") {
		c.log.Info("resumed → startTime reset", slog.String("object", jc.key))
		c.recorder.Event(job, corev1.EventTypeNormal, "Resumed", "Job resumed")
		job.Status.StartTime = &metav1.Time{Time: c.clock.Now()}
	}
}

// claimPods returns every pod the Job controls, finished ones included,
// after adopting matching orphans and releasing pods that stopped
// matching.
func (c *Controller) claimPods(ctx context.Context, job *batchv1.Job, selector labels.Selector) ([]*corev1.Pod, error) {
	namespace, name, uid := job.Namespace, job.Name, job.UID
	candidates, err := controller.OwnedAndOrphans[*corev1.Pod](c.podIndexer, namespace, uid)
	if err != nil {
		return nil, err
	}
	m := &controller.RefManager[*corev1.Pod]{
		Owner: job, OwnerKind: controllerKind, Selector: selector, Client: c.podClient,
		Finalizers: []string{batchv1.JobTrackingFinalizer}, // an adopted pod is counted as one of ours
		CanAdopt: controller.RecheckOwner(func(ctx context.Context) (*batchv1.Job, error) {
			return c.jobClient.Get(ctx, namespace, name)
		}, uid),
	}
	pods, err := m.Claim(ctx, candidates)
	if err != nil {
		return nil, fmt.Errorf("claim pods: %w", err)
	}
	return pods, nil
}

func uidSet(uids []types.UID) map[types.UID]bool {
	out := make(map[types.UID]bool, len(uids))
	for _, u := range uids {
		out[u] = true
	}
	return out
}

func appendIfMissing(list []string, s string) []string {
	for _, v := range list {
		if v == s {
			return list
		}
	}
	return append(list, s)
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
