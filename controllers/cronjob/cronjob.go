// Package cronjob is the CronJob controller: it starts a Job from each
// CronJob's template at the times its schedule names, as
// kube-controller-manager's cronjob controller does.
//
// Design, one line per file:
//
//   - cronjob.go: the controller (Options, New, Run, the sync story) and
//     its event handlers.
//   - schedule.go: the schedule arithmetic (the most recent unmet time,
//     the wait for the next one), the Job made from the template, and
//     small helpers on status.active.
//
// A sync reads, for one CronJob, the Jobs it controls, and then:
//
//  1. forgets finished Jobs in status.active (SawCompletedJob), keeps the
//     latest completion as status.lastSuccessfulTime, and drops Jobs that
//     are gone (MissingJob);
//  2. deletes the oldest finished Jobs beyond successfulJobsHistoryLimit
//     and failedJobsHistoryLimit (SuccessfulDelete);
//  3. unless the CronJob is being deleted or is suspended, finds the most
//     recent schedule time not yet met, on the controller's clock and in
//     spec.timeZone; a time older than startingDeadlineSeconds is missed
//     (MissSchedule), more than 100 missed times are reported
//     (TooManyMissedTimes);
//  4. applies concurrencyPolicy: Forbid waits while a Job is active
//     (JobAlreadyActive), Replace deletes the active ones first, Allow
//     does neither;
//  5. creates the Job "<cronjob>-<scheduled time in minutes since the
//     epoch>" (SuccessfulCreate), and records it in status.active and
//     status.lastScheduleTime;
//  6. writes the status if it changed, and looks again just after the next
//     schedule time (the workqueue's AddAfter).
//
// Properties:
//
//   - A Job's name is a function of its schedule time: a time is never
//     started twice, even after a crash between the create and the status
//     write (the Job found under that name is taken back into
//     status.active).
//   - Jobs are found by controller reference, never by labels; deletes
//     propagate in the background, so a deleted Job's pods go too.
//   - The controller's clock is the only time it reads: a fake clock moves
//     every schedule.
//
// Handlers only enqueue keys; every decision is made in sync and logged as
// one line, with the CronJob as its object: "scheduled
// 2026-05-10T12:05:00Z → create job hello-29634725".
package cronjob

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// controllerKind is what the Jobs' owner references say.
var controllerKind = batchv1.SchemeGroupVersion.WithKind("CronJob")

// Name is the controller's kube-controller-manager name: its --controllers
// name, its logger's controller attribute and its workqueue's name.
const Name = "cronjob"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required); it has no knobs of its own. Its Clock
// is the time schedules are read against.
type Options struct {
	controller.Common
}

// Controller is the CronJob controller. Create it with New, then Run it.
type Controller struct {
	cjClient  *client.Client[*batchv1.CronJob]
	jobClient *client.Client[*batchv1.Job]

	cjLister   informer.Lister[*batchv1.CronJob]
	jobIndexer informer.Indexer // with controller.ControllerUIDIndex
	hasSynced  []func() bool

	queue *workqueue.Queue[string]

	recorder record.EventRecorder
	log      *slog.Logger
	clock    clock.Clock
	// skew observes how late each Job was created after its schedule time.
	skew prometheus.Observer
}

// New returns a controller reading CronJobs and Jobs from opts.Informers,
// with its event handlers registered; it adds controller.ControllerUIDIndex
// to the Job informer. Nothing runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	cjInformer := informer.For[*batchv1.CronJob](opts.Informers)
	jobInformer := informer.For[*batchv1.Job](opts.Informers)
	if err := controller.EnsureControllerUIDIndex(jobInformer); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	skew, err := newSkewMetric(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c := &Controller{
		cjClient:   client.For[*batchv1.CronJob](opts.Client),
		jobClient:  client.For[*batchv1.Job](opts.Client),
		cjLister:   cjInformer.Lister(),
		jobIndexer: jobInformer.GetIndexer(),
		queue:      controller.NewQueue[string](Name, opts.Common),
		recorder:   opts.Recorder,
		log:        opts.Logger,
		clock:      opts.Clock,
		skew:       skew,
	}
	cjReg, err := cjInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueueCronJob(obj) },
		UpdateFunc: c.updateCronJob,
		DeleteFunc: c.enqueueCronJob,
	})
	if err != nil {
		c.queue.ShutDown() // its goroutine and metrics go with it
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	jobReg, err := jobInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueueJobOwner(obj) },
		UpdateFunc: c.updateJob,
		DeleteFunc: c.enqueueJobOwner,
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c.hasSynced = []func() bool{cjReg.HasSynced, jobReg.HasSynced}
	return c, nil
}

// newSkewMetric is kube's cronjob_controller_job_creation_skew_duration_seconds,
// registered on reg if set.
func newSkewMetric(reg prometheus.Registerer) (prometheus.Observer, error) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: "cronjob_controller", Name: "job_creation_skew_duration_seconds",
		Help:    "Time between when a cronjob is scheduled to be run, and when the corresponding job is created",
		Buckets: prometheus.ExponentialBuckets(1, 2, 10),
	})
	if reg == nil {
		return h, nil
	}
	return controller.Register(reg, h)
}

// Run waits for the caches to sync, runs workers workers, and blocks until
// ctx is done; then it shuts the queue down and waits for the workers to
// finish what they are doing.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	c.log.Info("starting", "workers", workers)
	if !informer.WaitForCacheSync(ctx, c.hasSynced...) {
		c.log.Info("stopped before the caches synced")
		return
	}
	var wg sync.WaitGroup
	for range controller.Workers(workers) {
		wg.Go(func() {
			for c.processNextWorkItem(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	c.log.Info("stopped")
}

// processNextWorkItem syncs one key, and leaves it to controller.HandleErr
// to decide whether to retry it, forget it or look again at the next
// schedule time. It returns false once the queue is shut down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	controller.HandleErr(ctx, c.log, c.queue, key, c.sync(ctx, key))
	return true
}

// sync brings one CronJob up to date with its Jobs and its schedule, as the
// package doc tells, and writes its status once.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		c.log.Error("bad key", "key", key, "err", err)
		return nil // a malformed key never gets better
	}
	cached, err := c.cjLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		return nil // the cronjob is gone; the garbage collector takes its jobs
	}
	if err != nil {
		return err
	}
	jobs, err := c.ownedJobs(cached)
	if err != nil {
		return err
	}
	cj := cached.DeepCopy() // the story below updates its status as it goes
	statusChanged, err := c.reconcileActive(ctx, cj, jobs)
	if err != nil {
		return err
	}
	if c.cleanupFinishedJobs(ctx, cj, jobs) {
		statusChanged = true
	}
	requeue, scheduled, syncErr := c.syncSchedule(ctx, cj)
	statusChanged = statusChanged || scheduled
	if statusChanged {
		if _, err := c.cjClient.UpdateStatus(ctx, cj); err != nil {
			return fmt.Errorf("update cronjob status: %w", err)
		}
	}
	if syncErr != nil {
		return syncErr
	}
	if requeue > 0 {
		return workqueue.RequeueAfter(requeue, "the next schedule time")
	}
	return nil // suspended, being deleted or unschedulable: an update enqueues it again
}

// ownedJobs returns the Jobs cj controls, from the cache.
func (c *Controller) ownedJobs(cj *batchv1.CronJob) ([]*batchv1.Job, error) {
	objs, err := c.jobIndexer.ByIndex(controller.ControllerUIDIndex, string(cj.UID))
	if err != nil {
		return nil, err
	}
	jobs := make([]*batchv1.Job, 0, len(objs))
	for _, o := range objs {
		if j, ok := o.(*batchv1.Job); ok && j.Namespace == cj.Namespace {
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}

// reconcileActive makes status.active the CronJob's running Jobs: finished
// ones leave it (and a success moves lastSuccessfulTime), Jobs that no
// longer exist leave it, and a running Job it does not list is reported,
// once a live read of the CronJob confirms the cache was not just behind.
// It reports whether the status changed.
func (c *Controller) reconcileActive(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) (bool, error) {
	for _, j := range jobs {
		if done, _ := finished(j); !done && !inActive(cj, j.UID) {
			// The cache may be behind our own last status write: go on
			// from the status the server has.
			live, err := c.cjClient.Get(ctx, cj.Namespace, cj.Name)
			if err != nil {
				return false, fmt.Errorf("get cronjob: %w", err)
			}
			cj.ObjectMeta, cj.Status = live.ObjectMeta, live.Status
			break
		}
	}
	changed := false
	exists := map[string]bool{}
	for _, j := range jobs {
		exists[string(j.UID)] = true
		done, how := finished(j)
		listed := inActive(cj, j.UID)
		switch {
		case !done && !listed:
			c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
		case done && listed:
			c.log.Info(fmt.Sprintf("job %s is %s → no longer active", j.Name, how),
				slog.String("object", keyOf(cj)), slog.String("job", j.Name), slog.String("condition", string(how)))
			removeActive(cj, j.UID)
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, how)
			changed = true
		}
		if done && how == batchv1.JobComplete && j.Status.CompletionTime != nil {
			if last := cj.Status.LastSuccessfulTime; last == nil || j.Status.CompletionTime.After(last.Time) {
				cj.Status.LastSuccessfulTime = j.Status.CompletionTime.DeepCopy()
				changed = true
			}
		}
	}
	for _, ref := range slices.Clone(cj.Status.Active) {
		if exists[string(ref.UID)] {
			continue
		}
		// The cache may lag behind a Job just created: ask the server.
		_, err := c.jobClient.Get(ctx, ref.Namespace, ref.Name)
		switch {
		case apierrors.IsNotFound(err):
			c.log.Info(fmt.Sprintf("active job %s is gone → no longer active", ref.Name),
				slog.String("object", keyOf(cj)), slog.String("job", ref.Name))
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "MissingJob", "Active job went missing: %v", ref.Name)
			removeActive(cj, ref.UID)
			changed = true
		case err != nil:
			return changed, fmt.Errorf("get job: %w", err)
		}
	}
	return changed, nil
}

// cleanupFinishedJobs deletes the oldest finished Jobs beyond the history
// limits, and reports whether the status changed.
func (c *Controller) cleanupFinishedJobs(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) bool {
	var succeeded, failed []*batchv1.Job
	for _, j := range jobs {
		switch _, how := finished(j); how {
		case batchv1.JobComplete:
			succeeded = append(succeeded, j)
		case batchv1.JobFailed:
			failed = append(failed, j)
		}
	}
	changed := false
	if limit := cj.Spec.SuccessfulJobsHistoryLimit; limit != nil && c.removeOldest(ctx, cj, succeeded, int(*limit), "succeeded") {
		changed = true
	}
	if limit := cj.Spec.FailedJobsHistoryLimit; limit != nil && c.removeOldest(ctx, cj, failed, int(*limit), "failed") {
		changed = true
	}
	return changed
}

// removeOldest deletes the oldest of jobs until limit remain.
func (c *Controller) removeOldest(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job, limit int, what string) bool {
	excess := len(jobs) - limit
	if excess <= 0 {
		return false
	}
	slices.SortFunc(jobs, byStartTime)
	changed := false
	for _, j := range jobs[:excess] {
		c.log.Info(fmt.Sprintf("%d %s jobs, history limit %d → delete %s", len(jobs), what, limit, j.Name),
			slog.String("object", keyOf(cj)), slog.String("job", j.Name), slog.Int("limit", limit))
		if c.deleteJob(ctx, cj, j) {
			changed = true
		}
	}
	return changed
}

// deleteJob deletes a Job and its pods, and forgets it in status.active.
func (c *Controller) deleteJob(ctx context.Context, cj *batchv1.CronJob, job *batchv1.Job) bool {
	background := metav1.DeletePropagationBackground
	err := c.jobClient.Delete(ctx, job.Namespace, job.Name, metav1.DeleteOptions{
		PropagationPolicy: &background, Preconditions: &metav1.Preconditions{UID: &job.UID},
	})
	switch {
	case apierrors.IsNotFound(err):
		removeActive(cj, job.UID)
		return true // deleted already, by an earlier sync or by someone else
	case err != nil:
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
		c.log.Warn("delete job failed", slog.String("object", keyOf(cj)), slog.String("job", job.Name), slog.Any("err", err))
		return false
	}
	removeActive(cj, job.UID)
	c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", job.Name)
	return true
}

// syncSchedule starts the Job of the most recent unmet schedule time, if
// the CronJob, its deadline and its concurrency policy allow. It returns
// how long until it should look again (0: not until the CronJob changes)
// and whether the status changed.
func (c *Controller) syncSchedule(ctx context.Context, cj *batchv1.CronJob) (time.Duration, bool, error) {
	key := keyOf(cj)
	if cj.DeletionTimestamp != nil {
		return 0, false, nil
	}
	if tz := cj.Spec.TimeZone; tz != nil {
		if _, err := time.LoadLocation(*tz); err != nil {
			c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *tz, err)
			return 0, false, nil
		}
	}
	if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
		c.log.Debug("suspended → start nothing", slog.String("object", key))
		return 0, false, nil
	}
	if strings.Contains(cj.Spec.Schedule, "TZ") {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnsupportedSchedule",
			"CRON_TZ or TZ used in schedule %q is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details", cj.Spec.Schedule)
	}
	sched, err := api.CronJobSchedule(cj)
	if err != nil {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return 0, false, nil
	}
	now := c.clock.Now()
	next := func() time.Duration { return nextScheduleDelay(cj, now, sched) }

	u, err := mostRecentScheduleTime(cj, now, sched, true)
	if err != nil {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "InvalidSchedule", "invalid schedule: %s : %s", cj.Spec.Schedule, err)
		return 0, false, nil
	}
	if u.mostRecent == nil {
		return next(), false, nil // nothing due yet
	}
	scheduled := *u.mostRecent
	if u.missed > tooManyMissed {
		c.log.Info(fmt.Sprintf("%d start times missed → start only the last, %s", u.missed, scheduled.UTC().Format(time.RFC3339)),
			slog.String("object", key), slog.Int64("missed", u.missed))
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "TooManyMissedTimes",
			"too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
	}
	story := "scheduled " + scheduled.UTC().Format(time.RFC3339)
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && scheduled.Add(time.Duration(*d)*time.Second).Before(now) {
		c.log.Info(story+fmt.Sprintf(", now %s is past the %ds deadline → missed", now.UTC().Format(time.RFC3339), *d),
			slog.String("object", key))
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", scheduled.UTC().Format(time.RFC1123Z))
		return next(), false, nil
	}
	name := jobName(cj, scheduled)
	if inActiveByName(cj, name) || (cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.Time.Equal(scheduled)) {
		return next(), false, nil // this time is started already
	}
	changed := false
	switch cj.Spec.ConcurrencyPolicy {
	case batchv1.ForbidConcurrent:
		if len(cj.Status.Active) > 0 {
			c.log.Info(fmt.Sprintf("%s, %d job(s) still active, policy Forbid → skip", story, len(cj.Status.Active)),
				slog.String("object", key))
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
			return next(), false, nil
		}
	case batchv1.ReplaceConcurrent:
		for _, ref := range slices.Clone(cj.Status.Active) {
			c.log.Info(fmt.Sprintf("%s, job %s still active, policy Replace → delete it", story, ref.Name),
				slog.String("object", key), slog.String("job", ref.Name))
			job, err := c.jobClient.Get(ctx, ref.Namespace, ref.Name)
			if err != nil {
				c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedGet", "Get job: %v", err)
				return 0, changed, err
			}
			if !c.deleteJob(ctx, cj, job) {
				return 0, changed, fmt.Errorf("could not replace job %s/%s", job.Namespace, job.Name)
			}
			changed = true
		}
	}

	job, err := c.createJob(ctx, cj, scheduled)
	if err != nil || job == nil {
		return 0, changed, err
	}
	cj.Status.Active = append(cj.Status.Active, jobRef(job))
	cj.Status.LastScheduleTime = &metav1.Time{Time: scheduled}
	return next(), true, nil
}

// createJob creates the Job of a schedule time. A Job of that name that cj
// controls and does not list as active is taken back (nil, nil: another
// actor's Job is left alone).
func (c *Controller) createJob(ctx context.Context, cj *batchv1.CronJob, scheduled time.Time) (*batchv1.Job, error) {
	key := keyOf(cj)
	want, err := jobFromTemplate(cj, scheduled)
	if err != nil {
		return nil, fmt.Errorf("job from template: %w", err)
	}
	created, err := c.jobClient.Create(ctx, want)
	switch {
	case apierrors.IsAlreadyExists(err):
		existing, err := c.jobClient.Get(ctx, want.Namespace, want.Name)
		if err != nil {
			return nil, fmt.Errorf("get job: %w", err)
		}
		if !metav1.IsControlledBy(existing, cj) || inActive(cj, existing.UID) {
			return nil, nil
		}
		c.log.Info(fmt.Sprintf("job %s exists already → active again", existing.Name),
			slog.String("object", key), slog.String("job", existing.Name))
		return existing, nil
	case err != nil:
		if !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		}
		return nil, fmt.Errorf("create job: %w", err)
	}
	c.skew.Observe(created.CreationTimestamp.Sub(scheduled).Seconds())
	c.log.Info(fmt.Sprintf("scheduled %s → create job %s", scheduled.UTC().Format(time.RFC3339), created.Name),
		slog.String("object", key), slog.String("job", created.Name), slog.Time("scheduled", scheduled))
	c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", created.Name)
	return created, nil
}

func keyOf(cj *batchv1.CronJob) string { return cj.Namespace + "/" + cj.Name }

// Event handlers: they only find the CronJobs a change concerns and
// enqueue them.

func (c *Controller) enqueueCronJob(obj any) {
	if cj, ok := controller.ObjectFromDelete[*batchv1.CronJob](obj); ok {
		c.queue.Add(keyOf(cj))
	}
}

// updateCronJob looks at a CronJob again now, or, when its schedule or time
// zone changed, just after its next schedule time under the new one.
func (c *Controller) updateCronJob(oldObj, newObj any) {
	old, ok1 := oldObj.(*batchv1.CronJob)
	cj, ok2 := newObj.(*batchv1.CronJob)
	if !ok1 || !ok2 {
		return
	}
	if old.Spec.Schedule == cj.Spec.Schedule && deref(old.Spec.TimeZone) == deref(cj.Spec.TimeZone) {
		c.queue.Add(keyOf(cj))
		return
	}
	sched, err := api.CronJobSchedule(cj)
	if err != nil {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnParseableCronJobSchedule", "unparseable schedule for cronjob: %s", cj.Spec.Schedule)
		return
	}
	c.queue.AddAfter(keyOf(cj), nextScheduleDelay(cj, c.clock.Now(), sched))
}

// enqueueJobOwner enqueues the CronJob that controls a Job.
func (c *Controller) enqueueJobOwner(obj any) {
	job, ok := controller.ObjectFromDelete[*batchv1.Job](obj)
	if !ok {
		return
	}
	if cj := c.resolveControllerRef(job.Namespace, metav1.GetControllerOf(job)); cj != nil {
		c.queue.Add(keyOf(cj))
	}
}

// updateJob enqueues the CronJob controlling a Job, and the one that did
// before, if its controller reference changed.
func (c *Controller) updateJob(oldObj, newObj any) {
	old, ok1 := oldObj.(*batchv1.Job)
	job, ok2 := newObj.(*batchv1.Job)
	if !ok1 || !ok2 || old.ResourceVersion == job.ResourceVersion {
		return
	}
	oldRef, ref := metav1.GetControllerOf(old), metav1.GetControllerOf(job)
	if oldRef != nil && (ref == nil || oldRef.UID != ref.UID) {
		if cj := c.resolveControllerRef(old.Namespace, oldRef); cj != nil {
			c.queue.Add(keyOf(cj))
		}
	}
	if cj := c.resolveControllerRef(job.Namespace, ref); cj != nil {
		c.queue.Add(keyOf(cj))
	}
}

// resolveControllerRef returns the CronJob ref names, if it is one and it
// is the same object (same uid) as the cache's.
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *batchv1.CronJob {
	if ref == nil || ref.Kind != controllerKind.Kind {
		return nil
	}
	cj, err := c.cjLister.Get(namespace, ref.Name)
	if err != nil || cj.UID != ref.UID {
		return nil
	}
	return cj
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
