// Package namespace is the namespace controller: it empties a namespace
// that is being deleted and then lets it go, as kube-controller-manager's
// namespace controller does.
//
// Deleting a namespace only marks it (deletionTimestamp, phase
// Terminating); the API server keeps it while spec.finalizers holds
// "kubernetes". For such a namespace, each pass:
//
//  1. discovers every namespaced resource the server serves that can be
//     listed and deleted (the discovery endpoints, not a fixed list;
//     subresources are skipped; the answer is reused for a few seconds);
//  2. lists what each holds, deletes it (deletecollection where served,
//     else one delete per object, always with background propagation) and
//     lists again to see what is left;
//  3. writes upstream's five status conditions (NamespaceDeletionDiscoveryFailure,
//     NamespaceDeletionGroupVersionParsingFailure, NamespaceDeletionContentFailure,
//     NamespaceContentRemaining, NamespaceFinalizersRemaining), only when
//     they changed;
//  4. once nothing is left, removes "kubernetes" from spec.finalizers
//     through the finalize subresource, and the server removes the
//     namespace.
//
// Properties:
//
//   - Pods go first: nothing else is deleted while a pod of the namespace
//     remains (upstream's OrderedNamespaceDeletion).
//   - Content on its way out is waited for, not treated as a failure: a
//     pod finishing its grace period is looked at again after half the
//     time left plus a second, an object held by finalizers after 8s; and
//     at once when the pod informer sees the last pod of a terminating
//     namespace go (a kubelet usually ends a pod long before its grace
//     period is over).
//     Anything else left over is a NamespaceDeletionContentFailure, retried
//     with backoff.
//   - The namespace is never finalized while discovery is incomplete or a
//     resource could not be listed or deleted: what could not be seen
//     might still hold content.
//   - Only the "kubernetes" finalizer is ever removed; other finalizers on
//     the namespace are someone else's.
//   - Content is read from the API, not from caches: the question "is it
//     empty?" must be answered by the server.
package namespace

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// DefaultResyncPeriod is how often every namespace is looked at again even
// when nothing changed: kube-controller-manager's --namespace-sync-period.
const DefaultResyncPeriod = 5 * time.Minute

// finalizerToken is the namespace finalizer this controller owns.
const finalizerToken = corev1.FinalizerKubernetes

// Name is the controller's kube-controller-manager name: its --controllers
// name, its logger's controller attribute and its workqueue's name.
const Name = "namespace"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required), and its own. It discovers, lists,
// deletes and finalizes through Client; it reads namespaces from Informers,
// and pods (only to notice when a terminating namespace's last pod is
// gone). Its Recorder gets an Event when a namespace is finalized and when
// a pass fails.
type Options struct {
	controller.Common
	// ResyncPeriod is how often every namespace is looked at again; 0
	// means DefaultResyncPeriod.
	ResyncPeriod time.Duration
}

// Controller empties and finalizes terminating namespaces. Its queue holds
// namespace names.
type Controller struct {
	rc         *client.RESTClient
	namespaces *client.Client[*corev1.Namespace]
	nsLister   informer.Lister[*corev1.Namespace]
	pods       informer.Indexer // with informer.NamespaceIndex
	synced     []func() bool
	discovery  *discoverer

	queue    *workqueue.Queue[string]
	recorder record.EventRecorder
	log      *slog.Logger
	now      func() time.Time
}

// New returns a controller reading namespaces from opts.Informers, with its
// event handler registered. Nothing runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	c := &Controller{
		rc:         opts.Client,
		namespaces: client.For[*corev1.Namespace](opts.Client),
		queue:      controller.NewQueue[string](Name, opts.Common),
		recorder:   opts.Recorder,
		log:        opts.Logger,
		now:        opts.Clock.Now,
	}
	c.discovery = &discoverer{rc: opts.Client, now: c.now}
	resync := opts.ResyncPeriod
	if resync <= 0 {
		resync = DefaultResyncPeriod
	}

	nsInformer := informer.For[*corev1.Namespace](opts.Informers)
	c.nsLister = nsInformer.Lister()
	reg, err := nsInformer.AddEventHandlerWithResync(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueue(obj) },
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	}, resync)
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("namespace: %w", err)
	}
	podInformer := informer.For[*corev1.Pod](opts.Informers)
	c.pods = podInformer.GetIndexer()
	podReg, err := podInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{DeleteFunc: c.podDeleted})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("namespace: %w", err)
	}
	c.synced = []func() bool{reg.HasSynced, podReg.HasSynced}
	return c, nil
}

// enqueue queues a namespace that is being deleted; the others need
// nothing from this controller.
func (c *Controller) enqueue(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok && ns.DeletionTimestamp != nil {
		c.queue.Add(ns.Name)
	}
}

// podDeleted queues a terminating namespace whose last pod just went: the
// pass that removes the rest of its content need not wait for the
// estimate of the pods' grace periods. The pass itself asks the server.
func (c *Controller) podDeleted(obj any) {
	var namespace string
	switch o := obj.(type) {
	case *corev1.Pod:
		namespace = o.Namespace
	case informer.DeletedFinalStateUnknown:
		ns, _, err := informer.SplitMetaNamespaceKey(o.Key)
		if err != nil {
			return
		}
		namespace = ns
	default:
		return
	}
	ns, err := c.nsLister.Get("", namespace)
	if err != nil || ns.DeletionTimestamp == nil {
		return
	}
	if keys, err := c.pods.IndexKeys(informer.NamespaceIndex, namespace); err == nil && len(keys) == 0 {
		c.queue.Add(namespace)
	}
}

// Run waits for the cache, runs workers until ctx is done, then shuts the
// queue down and waits for the workers.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	c.log.Info("starting", slog.Int("workers", workers))
	if !informer.WaitForCacheSync(ctx, c.synced...) {
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

// processNextWorkItem syncs one namespace, and leaves it to
// controller.HandleErr to decide whether to retry it, forget it or look
// again after the estimate. It returns false once the queue is shut down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	controller.HandleErr(ctx, c.log, c.queue, name, c.sync(ctx, name))
	return true
}

// sync makes one pass over namespace name: if it is being deleted, delete
// its content; once it is empty, finalize it.
func (c *Controller) sync(ctx context.Context, name string) error {
	cached, err := c.nsLister.Get("", name)
	if apierrors.IsNotFound(err) {
		return nil // the namespace is gone; nothing to do
	}
	if err != nil {
		return err
	}
	if cached.DeletionTimestamp == nil {
		return nil // not being deleted
	}
	// Others write a terminating namespace too (its status, their own
	// finalizers): act on the server's state, not the cache's.
	ns, err := c.namespaces.Get(ctx, "", name)
	if client.IsNotFound(err) {
		return nil // gone since the cache saw it
	}
	if err != nil {
		return fmt.Errorf("get namespace: %w", err)
	}
	if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, finalizerToken) {
		return nil // finalized already: what still holds it is not ours
	}

	report := c.inventory(ctx, name)
	c.purge(ctx, report)
	if len(report.deleted) > 0 {
		c.log.Info(fmt.Sprintf("terminating; %s left → %s", counts(report.found), report.action()),
			slog.String("object", name), slog.Int("objects", report.total()))
	}

	ns, err = c.updateStatus(ctx, ns, contentConditions(report))
	if client.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update namespace status: %w", err)
	}
	if err := report.err(); err != nil {
		c.recorder.Eventf(ns, corev1.EventTypeWarning, "FailedDeleteContent", "Failed to delete the content of namespace %s: %v", name, err)
		return err
	}
	if len(report.remaining) > 0 {
		after := report.recheckAfter()
		what := counts(report.remaining) + " on the way out"
		if f := report.finalizerSummary(); f != "" {
			what += ", held by finalizers (" + f + ")"
		}
		if report.waitingForPods {
			what += "; the rest waits for the pods"
		}
		c.log.Info(fmt.Sprintf("%s → check again in %s", what, after),
			slog.String("object", name), slog.Duration("after", after))
		return workqueue.RequeueAfter(after, "some content remains in the namespace")
	}

	c.log.Info(fmt.Sprintf("empty → remove finalizer %q", finalizerToken), slog.String("object", name))
	if err := c.finalize(ctx, ns); err != nil {
		return err
	}
	c.recorder.Eventf(ns, corev1.EventTypeNormal, "Finalized", "Namespace %s is empty; removed finalizer %q", name, finalizerToken)
	return nil
}

// maxConflictRetries bounds the re-reads after a write lost a race with
// another writer of the namespace.
const maxConflictRetries = 3

// updateStatus makes the namespace Terminating with conditions want, and
// writes only if that changes something. A conflict re-reads the namespace
// and tries again.
func (c *Controller) updateStatus(ctx context.Context, ns *corev1.Namespace, want []corev1.NamespaceCondition) (*corev1.Namespace, error) {
	for attempt := 1; ; attempt++ {
		next := ns.DeepCopy()
		changed := mergeConditions(&next.Status, want, metav1.NewTime(c.now()))
		if next.Status.Phase != corev1.NamespaceTerminating {
			next.Status.Phase = corev1.NamespaceTerminating
			changed = true
		}
		if !changed {
			return ns, nil
		}
		updated, err := c.namespaces.UpdateStatus(ctx, next)
		if err == nil {
			return updated, nil
		}
		if !client.IsConflict(err) || attempt == maxConflictRetries {
			return nil, err
		}
		if ns, err = c.reread(ctx, ns); err != nil {
			return nil, err
		}
	}
}

// finalize removes this controller's finalizer from spec.finalizers
// through the finalize subresource; with none left, the server removes
// the namespace.
func (c *Controller) finalize(ctx context.Context, ns *corev1.Namespace) error {
	for attempt := 1; ; attempt++ {
		next := ns.DeepCopy()
		next.Spec.Finalizers = slices.DeleteFunc(next.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == finalizerToken })
		next.APIVersion, next.Kind = "v1", "Namespace"
		body, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("finalize namespace: %w", err)
		}
		path := client.ResourcePath(api.Namespaces, "", ns.Name, "finalize")
		err = c.rc.Do(ctx, http.MethodPut, path, nil, "application/json", body, nil)
		switch {
		case err == nil, client.IsNotFound(err):
			return nil // finalized, or someone else finished the job
		case !client.IsConflict(err) || attempt == maxConflictRetries:
			return fmt.Errorf("finalize namespace: %w", err)
		}
		if ns, err = c.reread(ctx, ns); err != nil {
			return err
		}
		if !slices.Contains(ns.Spec.Finalizers, finalizerToken) {
			return nil
		}
	}
}

// reread gets the namespace again after a conflict, and refuses to go on
// if it is a different namespace of the same name.
func (c *Controller) reread(ctx context.Context, old *corev1.Namespace) (*corev1.Namespace, error) {
	ns, err := c.namespaces.Get(ctx, "", old.Name)
	if err != nil {
		return nil, err
	}
	if ns.UID != old.UID {
		return nil, fmt.Errorf("namespace %s was replaced (uid %s → %s)", old.Name, old.UID, ns.UID)
	}
	return ns, nil
}
