// Package ttlafterfinished is the TTL-after-finished controller: it
// deletes each finished Job ttlSecondsAfterFinished after it finished, as
// kube-controller-manager's ttl-after-finished controller does.
//
// For each Job, sync reads it from the cache; if it has a TTL and has
// finished (a Complete or Failed condition), it computes when the TTL
// expires, from the finish time (the condition's lastTransitionTime). Not
// yet: it looks again then. Due: it reads the Job fresh from the API,
// checks again (the TTL may have changed), and deletes it in the
// foreground, with the uid and resourceVersion it checked as
// preconditions, so that its pods go before it and a Job changed or
// replaced meanwhile is not deleted.
//
// Properties:
//
//   - A Job without ttlSecondsAfterFinished, or not finished, is never
//     deleted; one being deleted already is left alone.
//   - The deletion happens no earlier than the TTL allows, read on the
//     controller's clock.
package ttlafterfinished

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's kube-controller-manager name.
const Name = "ttl-after-finished"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required).
type Options struct {
	controller.Common
}

// Controller is the TTL-after-finished controller. Create it with New,
// then Run it.
type Controller struct {
	jobClient *client.Client[*batchv1.Job]
	jobLister informer.Lister[*batchv1.Job]
	hasSynced []func() bool
	queue     *workqueue.Queue[string]
	log       *slog.Logger
	clock     clock.Clock
	deletion  prometheus.Histogram
}

// New returns a controller reading Jobs from opts.Informers, with its event
// handlers registered. Nothing runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	jobInformer := informer.For[*batchv1.Job](opts.Informers)
	c := &Controller{
		jobClient: client.For[*batchv1.Job](opts.Client),
		jobLister: informer.NewLister[*batchv1.Job](jobInformer.GetIndexer()),
		queue:     controller.NewQueue[string](Name, opts.Common),
		log:       opts.Logger,
		clock:     opts.Clock,
		deletion: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "ttl_after_finished_controller", Name: "job_deletion_duration_seconds",
			Help:    "The time it took to delete the job since it became eligible for deletion",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 14),
		}),
	}
	if opts.Metrics != nil {
		if c.deletion, err = controller.Register(opts.Metrics, c.deletion); err != nil {
			c.queue.ShutDown()
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
	}
	reg, err := jobInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueue(obj) },
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c.hasSynced = []func() bool{reg.HasSynced}
	return c, nil
}

// enqueue adds a Job that has a TTL, has finished and is not being
// deleted; the others have nothing to wait for.
func (c *Controller) enqueue(obj any) {
	job, ok := obj.(*batchv1.Job)
	if ok && needsCleanup(job) {
		c.queue.Add(job.Namespace + "/" + job.Name)
	}
}

// Run waits for the cache to sync, runs workers workers, and blocks until
// ctx is done.
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

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	controller.HandleErr(ctx, c.log, c.queue, key, c.sync(ctx, key))
	return true
}

// sync deletes one Job if its TTL has expired, or looks again when it
// will.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // a malformed key never gets better
	}
	job, err := c.jobLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		return nil // gone already
	}
	if err != nil {
		return err
	}
	if left, ok := c.timeLeft(job); !ok || left > 0 {
		return lookAgain(left)
	}
	// The cache may be stale: decide again on the Job as it is now.
	fresh, err := c.jobClient.Get(ctx, namespace, name)
	if client.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if left, ok := c.timeLeft(fresh); !ok || left > 0 {
		return lookAgain(left)
	}
	expiredAt, _ := expiry(fresh)
	c.log.Info(fmt.Sprintf("finished %s ago, ttlSecondsAfterFinished %d → delete", c.clock.Now().Sub(finishTime(fresh)).Round(time.Second), *fresh.Spec.TTLSecondsAfterFinished),
		slog.String("object", key))
	err = c.jobClient.Delete(ctx, namespace, name, metav1.DeleteOptions{
		PropagationPolicy: new(metav1.DeletePropagationForeground),
		Preconditions:     &metav1.Preconditions{UID: &fresh.UID, ResourceVersion: &fresh.ResourceVersion},
	})
	if client.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete job: %w", err)
	}
	c.deletion.Observe(c.clock.Now().Sub(expiredAt).Seconds())
	return nil
}

// timeLeft is how long until job is due for deletion (0 or less: due
// now); ok is false when it never will be: no TTL, not finished, or being
// deleted already.
func (c *Controller) timeLeft(job *batchv1.Job) (left time.Duration, ok bool) {
	if !needsCleanup(job) {
		return 0, false
	}
	at, _ := expiry(job)
	return at.Sub(c.clock.Now()), true
}

// lookAgain asks the queue to look again in left, if that is ever.
func lookAgain(left time.Duration) error {
	if left <= 0 {
		return nil // never due
	}
	return workqueue.RequeueAfter(left, "ttlSecondsAfterFinished not yet expired")
}

func needsCleanup(job *batchv1.Job) bool {
	return job.Spec.TTLSecondsAfterFinished != nil && job.DeletionTimestamp == nil && !finishTime(job).IsZero()
}

// expiry is when job's TTL runs out.
func expiry(job *batchv1.Job) (time.Time, bool) {
	finished := finishTime(job)
	if finished.IsZero() || job.Spec.TTLSecondsAfterFinished == nil {
		return time.Time{}, false
	}
	return finished.Add(time.Duration(*job.Spec.TTLSecondsAfterFinished) * time.Second), true
}

// finishTime is the lastTransitionTime of job's Complete or Failed
// condition, or zero while it runs.
func finishTime(job *batchv1.Job) time.Time {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
