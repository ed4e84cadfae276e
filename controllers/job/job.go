// Package job is the Job controller: it runs each Job's pods until enough
// of them succeed, or the Job fails, as kube-controller-manager's job
// controller does.
//
// For each Job, sync reads the Job and the pods it controls (adopting
// matching orphans), counts the pods that finished since its status last
// counted them, and decides whether the Job must end: a FailJob rule of its
// pod failure policy, more failures than backoffLimit, activeDeadlineSeconds
// passed, too many failed indexes, or its success policy met. If not, it
// creates or deletes pods until min(parallelism, completions still
// missing) run, none while suspended, after an exponential back-off once
// pods failed. Then it records the finished pods in
// status.uncountedTerminatedPods, removes their tracking finalizers, moves
// them to succeeded and failed, and, when nothing is left uncounted or
// terminating, writes the Job's final condition.
//
// Design, one line per part:
//
//   - job.go: the controller, its event handlers, and the orphan queue that
//     frees pods whose Job is gone or finished of their finalizer.
//   - sync.go: the reconcile: counting, deciding, creating and deleting.
//   - tracking.go: counting finished pods through their finalizers, the
//     conditions, the back-off records.
//   - policy.go: the pod failure policy, the success policy, back-off
//     arithmetic.
//   - indexes.go: completion indexes and kube's "1,3-5" interval lists.
//   - metrics.go: kube's job_controller_* metrics.
//
// Properties:
//
//   - Never more than parallelism active pods: creates wait until the
//     informer has observed the previous ones (expectations), and deletes
//     win over creates.
//   - Every pod the controller creates carries the finalizer
//     batch.kubernetes.io/job-tracking; its outcome is counted exactly
//     once, even across restarts, because it is written to
//     uncountedTerminatedPods before the finalizer goes and moved to the
//     counts only after.
//   - The final Complete or Failed condition comes after the interim
//     SuccessCriteriaMet or FailureTarget, and only once no pod of the Job
//     is terminating; a Job with either final condition is never synced
//     again.
//   - An Indexed Job's pods carry their index as the annotation and label
//     batch.kubernetes.io/job-completion-index, the environment variable
//     JOB_COMPLETION_INDEX and the hostname <job>-<index>.
//   - Events are kube's: SuccessfulCreate, SuccessfulDelete,
//     FailedCreate, Suspended, Resumed, Completed, and the failure reason
//     (BackoffLimitExceeded, DeadlineExceeded, PodFailurePolicy, ...).
package job

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's kube-controller-manager name.
const Name = "job"

// The back-off before a failed Job's next pod: DefaultBackoffBase after
// the first failure, doubling with each further one, at most
// DefaultBackoffMax (kube's DefaultJobPodFailureBackOff and
// MaxJobPodFailureBackOff).
const (
	DefaultBackoffBase = 10 * time.Second
	DefaultBackoffMax  = 6 * time.Minute
)

var controllerKind = batchv1.SchemeGroupVersion.WithKind("Job")

// Options is what the controller needs: the options every controller takes
// (Client and Informers required), and its own.
type Options struct {
	controller.Common
	// BackoffBase and BackoffMax shape the back-off between failed pods;
	// 0 means DefaultBackoffBase and DefaultBackoffMax.
	BackoffBase, BackoffMax time.Duration
}

// Controller is the Job controller. Create it with New, then Run it.
type Controller struct {
	jobClient  *client.Client[*batchv1.Job]
	podClient  *client.Client[*corev1.Pod]
	podControl controller.PodControl // deletes

	jobLister  informer.Lister[*batchv1.Job]
	podIndexer informer.Indexer // with controller.ControllerUIDIndex
	hasSynced  []func() bool

	queue   *workqueue.Queue[string] // Job keys
	orphans *workqueue.Queue[string] // keys of pods whose finalizer may be orphaned

	expectations *controller.Expectations
	removals     removalExpectations
	backoffs     backoffStore

	backoffBase, backoffMax time.Duration
	recorder                record.EventRecorder
	log                     *slog.Logger
	metrics                 *metrics
	clock                   clock.Clock
}

// New returns a controller reading Jobs and pods from opts.Informers, with
// its event handlers registered. Nothing runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	jobInformer := informer.For[*batchv1.Job](opts.Informers)
	podInformer := informer.For[*corev1.Pod](opts.Informers)
	if err := controller.EnsureControllerUIDIndex(podInformer); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c := &Controller{
		jobClient:    client.For[*batchv1.Job](opts.Client),
		podClient:    client.For[*corev1.Pod](opts.Client),
		jobLister:    informer.NewLister[*batchv1.Job](jobInformer.GetIndexer()),
		podIndexer:   podInformer.GetIndexer(),
		queue:        controller.NewQueue[string](Name, opts.Common),
		orphans:      controller.NewQueue[string]("job_orphan_pod", opts.Common),
		expectations: controller.NewExpectations(opts.Clock),
		backoffBase:  opts.BackoffBase, backoffMax: opts.BackoffMax,
		recorder: opts.Recorder, log: opts.Logger, metrics: m, clock: opts.Clock,
	}
	if c.backoffBase <= 0 {
		c.backoffBase = DefaultBackoffBase
	}
	if c.backoffMax <= 0 {
		c.backoffMax = DefaultBackoffMax
	}
	c.podControl = controller.ClientPodControl{Client: c.podClient, Recorder: c.recorder}
	shutdown := func(err error) (*Controller, error) {
		c.queue.ShutDown()
		c.orphans.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	jobReg, err := jobInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.addJob(obj) },
		UpdateFunc: c.updateJob,
		DeleteFunc: c.deleteJob,
	})
	if err != nil {
		return shutdown(err)
	}
	podReg, err := podInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.addPod(obj) },
		UpdateFunc: c.updatePod,
		DeleteFunc: c.deletePod,
	})
	if err != nil {
		return shutdown(err)
	}
	c.hasSynced = []func() bool{jobReg.HasSynced, podReg.HasSynced}
	return c, nil
}

// Run waits for the caches to sync, runs workers workers on Jobs and one
// on orphaned pods, and blocks until ctx is done; then it shuts the queues
// down and waits for the workers.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	defer c.orphans.ShutDown()
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
	wg.Go(func() {
		for c.processNextOrphan(ctx) {
		}
	})
	<-ctx.Done()
	c.queue.ShutDown()
	c.orphans.ShutDown()
	wg.Wait()
	c.log.Info("stopped")
}

// processNextWorkItem syncs one Job, and leaves it to controller.HandleErr
// to decide whether to retry it. It returns false once the queue is shut
// down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	controller.HandleErr(ctx, c.log, c.queue, key, c.sync(ctx, key))
	return true
}

func (c *Controller) processNextOrphan(ctx context.Context) bool {
	key, shutdown := c.orphans.Get()
	if shutdown {
		return false
	}
	defer c.orphans.Done(key)
	controller.HandleErr(ctx, c.log, c.orphans, key, c.syncOrphan(ctx, key))
	return true
}

// syncOrphan removes the tracking finalizer of a pod no unfinished Job
// will ever count: its Job is gone or finished, or it has none and no Job
// would adopt it.
func (c *Controller) syncOrphan(ctx context.Context, key string) error {
	obj, exists, err := c.podIndexer.GetByKey(key)
	if err != nil || !exists {
		return err // gone: nothing to free
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || !hasTrackingFinalizer(pod) || c.countsPod(pod) {
		return nil
	}
	c.log.Info("pod of no running job → remove its tracking finalizer", slog.String("object", key))
	err = c.removeFinalizer(ctx, key, pod)
	c.removals.forget(key) // a pod's key: nothing counts it
	return err
}

// countsPod reports whether an unfinished Job in the cache will count pod:
// its controller, or, for an orphan, a Job that would adopt it.
func (c *Controller) countsPod(pod *corev1.Pod) bool {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		job, ok := c.resolveControllerRef(pod.Namespace, ref)
		return ok && !isFinished(job)
	}
	for _, job := range c.jobsSelecting(pod) {
		if !isFinished(job) {
			return true
		}
	}
	return false
}

func (c *Controller) forget(key string) {
	c.expectations.Delete(key)
	c.removals.forget(key)
	c.backoffs.forget(key)
}

// Event handlers: they find the Jobs a change concerns and enqueue them,
// and tell the expectations what was observed.

func jobKey(job *batchv1.Job) string { return job.Namespace + "/" + job.Name }

func (c *Controller) addJob(obj any) {
	if job, ok := obj.(*batchv1.Job); ok {
		c.queue.Add(jobKey(job))
	}
}

func (c *Controller) updateJob(oldObj, newObj any) {
	old, ok1 := oldObj.(*batchv1.Job)
	cur, ok2 := newObj.(*batchv1.Job)
	if !ok1 || !ok2 {
		return
	}
	if old.UID != cur.UID {
		c.deleteJob(informer.DeletedFinalStateUnknown{Key: jobKey(old), Obj: old})
	}
	key := jobKey(cur)
	c.queue.Add(key)
	// A new activeDeadlineSeconds: look again when it passes.
	if ads := cur.Spec.ActiveDeadlineSeconds; ads != nil && cur.Status.StartTime != nil &&
		(old.Spec.ActiveDeadlineSeconds == nil || *old.Spec.ActiveDeadlineSeconds != *ads) {
		c.queue.AddAfter(key, time.Duration(*ads)*time.Second-c.clock.Now().Sub(cur.Status.StartTime.Time))
	}
}

func (c *Controller) deleteJob(obj any) {
	job, ok := controller.ObjectFromDelete[*batchv1.Job](obj)
	if !ok {
		return
	}
	key := jobKey(job)
	c.forget(key)
	c.queue.Add(key)
	// Its pods may still carry the finalizer: free them.
	pods, err := c.podIndexer.ByIndex(controller.ControllerUIDIndex, string(job.UID))
	if err != nil {
		return
	}
	for _, obj := range pods {
		if pod, ok := obj.(*corev1.Pod); ok && hasTrackingFinalizer(pod) {
			c.orphans.Add(controller.PodKey(pod))
		}
	}
}

func (c *Controller) addPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		c.deletePod(pod) // seen for the first time already being deleted
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		job, ok := c.resolveControllerRef(pod.Namespace, ref)
		if !ok {
			c.enqueueOrphan(pod)
			return
		}
		key := jobKey(job)
		c.expectations.CreationObserved(key)
		c.queue.Add(key)
		return
	}
	for _, job := range c.jobsSelecting(pod) {
		c.queue.Add(jobKey(job)) // it may adopt this orphan
	}
	c.enqueueOrphan(pod)
}

func (c *Controller) updatePod(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	if oldRef != nil && (curRef == nil || curRef.UID != oldRef.UID) {
		if job, ok := c.resolveControllerRef(old.Namespace, oldRef); ok {
			c.queue.Add(jobKey(job)) // it lost a pod
		}
	}
	if curRef == nil {
		for _, job := range c.jobsSelecting(cur) {
			c.queue.Add(jobKey(job))
		}
		c.enqueueOrphan(cur)
		return
	}
	job, ok := c.resolveControllerRef(cur.Namespace, curRef)
	if !ok {
		c.enqueueOrphan(cur)
		return
	}
	key := jobKey(job)
	if !hasTrackingFinalizer(cur) {
		c.removals.observed(key, cur.UID)
	}
	if cur.DeletionTimestamp != nil && old.DeletionTimestamp == nil {
		c.expectations.DeletionObserved(key, controller.PodKey(cur))
	}
	if isFinished(job) {
		c.enqueueOrphan(cur)
	}
	c.queue.Add(key)
}

func (c *Controller) deletePod(obj any) {
	pod, ok := controller.ObjectFromDelete[*corev1.Pod](obj)
	if !ok {
		return
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return
	}
	job, ok := c.resolveControllerRef(pod.Namespace, ref)
	if !ok {
		return
	}
	key := jobKey(job)
	c.expectations.DeletionObserved(key, controller.PodKey(pod))
	if _, exists, _ := c.podIndexer.GetByKey(controller.PodKey(pod)); !exists {
		c.removals.observed(key, pod.UID) // gone for good: its finalizer with it
	}
	c.queue.Add(key)
}

func (c *Controller) enqueueOrphan(pod *corev1.Pod) {
	if hasTrackingFinalizer(pod) && !c.countsPod(pod) {
		c.orphans.Add(controller.PodKey(pod))
	}
}

// resolveControllerRef returns the Job ref names, if the cache has it with
// the same uid.
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) (*batchv1.Job, bool) {
	if ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return nil, false
	}
	job, err := c.jobLister.Get(namespace, ref.Name)
	if err != nil || job.UID != ref.UID {
		if err != nil && !apierrors.IsNotFound(err) {
			c.log.Debug("get job", slog.Any("err", err))
		}
		return nil, false
	}
	return job, true
}

// jobsSelecting returns the Jobs in pod's namespace whose selector
// matches its labels.
func (c *Controller) jobsSelecting(pod *corev1.Pod) []*batchv1.Job {
	var out []*batchv1.Job
	for _, job := range c.jobLister.ByNamespace(pod.Namespace).List(nil) {
		selector, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
		if err != nil || selector.Empty() {
			continue
		}
		if selector.Matches(labels.Set(pod.Labels)) {
			out = append(out, job)
		}
	}
	return slices.Clip(out)
}
