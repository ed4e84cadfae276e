// Package deployment is the Deployment controller: it rolls a Deployment's
// pod template out through ReplicaSets, one per template, as
// kube-controller-manager's deployment controller does.
//
// Design, one line per file:
//
//   - deployment.go: the controller (Options, New, Run, the sync story) and
//     its event handlers.
//   - replicasets.go: which ReplicaSet is new and which are old, creating
//     the new one (named "<deployment>-<pod-template-hash>"), revisions and
//     the revision history limit.
//   - scale.go: scaling ReplicaSets, and proportional scaling when the
//     Deployment is resized mid-rollout.
//   - rolling.go and recreate.go: the two strategies.
//   - status.go: status, the Available and Progressing conditions, and the
//     progress deadline.
//
// Properties:
//
//   - Each pod template has one ReplicaSet, found again by comparing
//     templates (ignoring the pod-template-hash label); its pods and
//     selector carry pod-template-hash, so ReplicaSets of one Deployment
//     never select each other's pods.
//   - RollingUpdate: the total replicas of all ReplicaSets never exceed
//     spec.replicas + maxSurge, and old ReplicaSets are scaled down only
//     while at least spec.replicas - maxUnavailable pods stay available.
//     Counts come from ReplicaSet status, read so as to err on the safe
//     side while a ReplicaSet controller has not caught up (see rolling.go).
//   - Recreate: old ReplicaSets go to zero and the new one is scaled up only
//     once no old pod is left running.
//   - A paused Deployment is scaled but not rolled; a resize mid-rollout is
//     spread over the ReplicaSets in proportion to their size.
//   - The new ReplicaSet's revision (deployment.kubernetes.io/revision) is
//     one more than the highest old revision, and the Deployment carries
//     it; old ReplicaSets scaled to zero beyond revisionHistoryLimit are
//     deleted, lowest revision first.
//   - ReplicaSets are adopted and released by controller reference, the
//     way the ReplicaSet controller treats pods.
//
// Handlers only enqueue keys; every decision is made in sync and logged as
// one line: "deployment default/web: new rs web-7d9f (3/3), old rs web-5c4b
// (1) → scale old to 0".
package deployment

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
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

// controllerKind is what the controller's owner references say.
var controllerKind = appsv1.SchemeGroupVersion.WithKind("Deployment")

// Name is the controller's kube-controller-manager name: its --controllers
// name, its logger's controller attribute and its workqueue's name.
const Name = "deployment"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required); it has no knobs of its own.
type Options struct {
	controller.Common
}

// Controller is the Deployment controller. Create it with New, then Run it.
type Controller struct {
	dClient  *client.Client[*appsv1.Deployment]
	rsClient *client.Client[*appsv1.ReplicaSet]

	dLister    informer.Lister[*appsv1.Deployment]
	rsLister   informer.Lister[*appsv1.ReplicaSet]
	rsIndexer  informer.Indexer // with controller.ControllerUIDIndex
	podIndexer informer.Indexer // with controller.ControllerUIDIndex
	hasSynced  []func() bool

	queue *workqueue.Queue[string]

	recorder record.EventRecorder
	log      *slog.Logger
	// clock times conditions, the progress deadline and the workqueue.
	clock clock.Clock
}

// New returns a controller reading Deployments, ReplicaSets and pods from
// opts.Informers, with its event handlers registered; it adds
// controller.ControllerUIDIndex to the ReplicaSet and pod informers.
// Nothing runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	dInformer := informer.For[*appsv1.Deployment](opts.Informers)
	rsInformer := informer.For[*appsv1.ReplicaSet](opts.Informers)
	podInformer := informer.For[*corev1.Pod](opts.Informers)
	for _, inf := range []controller.IndexAdder{rsInformer, podInformer} {
		if err := controller.EnsureControllerUIDIndex(inf); err != nil {
			return nil, fmt.Errorf("deployment: %w", err)
		}
	}
	c := newController(opts, dInformer.GetIndexer(), rsInformer.GetIndexer(), podInformer.GetIndexer())

	dReg, err := dInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueueObject(obj) },
		UpdateFunc: func(_, obj any) { c.enqueueObject(obj) },
		DeleteFunc: c.enqueueObject,
	})
	if err != nil {
		c.queue.ShutDown() // its goroutine and metrics go with it
		return nil, fmt.Errorf("deployment: %w", err)
	}
	rsReg, err := rsInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.addReplicaSet(obj) },
		UpdateFunc: c.updateReplicaSet,
		DeleteFunc: c.deleteReplicaSet,
	})
	if err != nil {
		c.queue.ShutDown() // its goroutine and metrics go with it
		return nil, fmt.Errorf("deployment: %w", err)
	}
	podReg, err := podInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		DeleteFunc: c.deletePod,
	})
	if err != nil {
		c.queue.ShutDown() // its goroutine and metrics go with it
		return nil, fmt.Errorf("deployment: %w", err)
	}
	c.hasSynced = []func() bool{dReg.HasSynced, rsReg.HasSynced, podReg.HasSynced}
	return c, nil
}

// newController is New without informers: tests hand it indexers they fill
// themselves. opts.Common has its defaults (Complete or WithDefaults), and
// rsIndexer and podIndexer have controller.ControllerUIDIndex.
func newController(opts Options, dIndexer, rsIndexer, podIndexer informer.Indexer) *Controller {
	return &Controller{
		dClient:    client.For[*appsv1.Deployment](opts.Client),
		rsClient:   client.For[*appsv1.ReplicaSet](opts.Client),
		dLister:    informer.NewLister[*appsv1.Deployment](dIndexer),
		rsLister:   informer.NewLister[*appsv1.ReplicaSet](rsIndexer),
		rsIndexer:  rsIndexer,
		podIndexer: podIndexer,
		queue:      controller.NewQueue[string](Name, opts.Common),
		recorder:   opts.Recorder,
		log:        opts.Logger,
		clock:      opts.Clock,
	}
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
// to decide whether to retry it, forget it or look again later. It returns
// false once the queue is shut down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	controller.HandleErr(ctx, c.log, c.queue, key, c.sync(ctx, key))
	return true
}

// sync moves one Deployment a step towards its spec: claim its
// ReplicaSets, then scale (a resize or a paused Deployment) or roll out by
// its strategy, and write its status.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		c.log.Error("bad key", "key", key, "err", err)
		return nil // a malformed key never gets better
	}
	cached, err := c.dLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		return nil // the deployment is gone; the garbage collector takes its replica sets
	}
	if err != nil {
		return err
	}
	d := cached.DeepCopy() // the story below updates it as it writes
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		c.log.Error("invalid selector", slog.String("object", key), slog.Any("err", err))
		return nil // an update will enqueue it again
	}
	if selector.Empty() {
		c.recorder.Eventf(d, corev1.EventTypeWarning, "SelectingAll",
			"This deployment is selecting all pods. A non-empty selector is required.")
		if d.Status.ObservedGeneration >= d.Generation {
			return nil
		}
		d.Status.ObservedGeneration = d.Generation
		return c.updateStatus(ctx, d)
	}

	rsList, err := c.claimReplicaSets(ctx, d, selector)
	if err != nil {
		return err
	}
	if d.DeletionTimestamp != nil {
		return c.syncStatusOnly(ctx, d, rsList)
	}
	if err := c.checkPausedConditions(ctx, d); err != nil {
		return err
	}
	if d.Spec.Paused {
		return c.syncScale(ctx, d, rsList)
	}
	if isScalingEvent(d, rsList) {
		return c.syncScale(ctx, d, rsList)
	}
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		return c.rolloutRecreate(ctx, d, rsList)
	case appsv1.RollingUpdateDeploymentStrategyType:
		return c.rolloutRolling(ctx, d, rsList)
	}
	return fmt.Errorf("unexpected deployment strategy %q", d.Spec.Strategy.Type)
}

// claimReplicaSets returns the ReplicaSets d controls, after adopting
// matching orphans and releasing those that no longer match.
func (c *Controller) claimReplicaSets(ctx context.Context, d *appsv1.Deployment, selector labels.Selector) ([]*appsv1.ReplicaSet, error) {
	candidates, err := controller.OwnedAndOrphans[*appsv1.ReplicaSet](c.rsIndexer, d.Namespace, d.UID)
	if err != nil {
		return nil, err
	}
	m := &controller.RefManager[*appsv1.ReplicaSet]{
		Owner:     d,
		OwnerKind: controllerKind,
		Selector:  selector,
		Client:    c.rsClient,
		CanAdopt: controller.RecheckOwner(func(ctx context.Context) (*appsv1.Deployment, error) {
			return c.dClient.Get(ctx, d.Namespace, d.Name)
		}, d.UID),
	}
	rss, err := m.Claim(ctx, candidates)
	if err != nil {
		return nil, fmt.Errorf("claim replica sets: %w", err)
	}
	return rss, nil
}

// syncStatusOnly writes the status of a Deployment being deleted.
func (c *Controller) syncStatusOnly(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	return c.syncDeploymentStatus(ctx, append(oldRSs, newRS), newRS, d)
}

// syncScale handles a resize and a paused Deployment: it scales the
// ReplicaSets but does not roll; a paused Deployment's history is still
// cleaned up.
func (c *Controller) syncScale(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	if err := c.scale(ctx, d, newRS, oldRSs); err != nil {
		return err
	}
	if d.Spec.Paused {
		if err := c.cleanupDeployment(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return c.syncDeploymentStatus(ctx, append(oldRSs, newRS), newRS, d)
}

// update writes d's metadata and spec (the revision annotation) and keeps
// d current with the answer; d's status, which the write ignores, is kept.
func (c *Controller) update(ctx context.Context, d *appsv1.Deployment) error {
	status := d.Status
	updated, err := c.dClient.Update(ctx, d)
	if err != nil {
		return fmt.Errorf("update deployment: %w", err)
	}
	*d = *updated
	d.Status = status
	return nil
}

// updateStatus writes d's status and keeps d current with the answer.
func (c *Controller) updateStatus(ctx context.Context, d *appsv1.Deployment) error {
	updated, err := c.dClient.UpdateStatus(ctx, d)
	if err != nil {
		return fmt.Errorf("update deployment status: %w", err)
	}
	*d = *updated
	return nil
}

// Event handlers: they only find the Deployments a change concerns and
// enqueue them.

func (c *Controller) enqueueObject(obj any) {
	if d, ok := controller.ObjectFromDelete[*appsv1.Deployment](obj); ok {
		c.enqueue(d)
	}
}

func (c *Controller) enqueue(d *appsv1.Deployment) { c.queue.Add(d.Namespace + "/" + d.Name) }

func (c *Controller) addReplicaSet(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	if rs.DeletionTimestamp != nil {
		c.deleteReplicaSet(rs)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		if d := c.resolveControllerRef(rs.Namespace, ref); d != nil {
			c.enqueue(d)
		}
		return
	}
	for _, d := range c.deploymentsSelecting(rs) {
		c.enqueue(d) // it may adopt this orphan
	}
}

func (c *Controller) updateReplicaSet(oldObj, newObj any) {
	old, ok1 := oldObj.(*appsv1.ReplicaSet)
	cur, ok2 := newObj.(*appsv1.ReplicaSet)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return // a resync: nothing changed
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := (curRef == nil) != (oldRef == nil) || (curRef != nil && curRef.UID != oldRef.UID)
	if refChanged && oldRef != nil {
		if d := c.resolveControllerRef(old.Namespace, oldRef); d != nil {
			c.enqueue(d) // it lost a replica set
		}
	}
	if curRef != nil {
		if d := c.resolveControllerRef(cur.Namespace, curRef); d != nil {
			c.enqueue(d)
		}
		return
	}
	if refChanged || !maps.Equal(old.Labels, cur.Labels) {
		for _, d := range c.deploymentsSelecting(cur) {
			c.enqueue(d)
		}
	}
}

func (c *Controller) deleteReplicaSet(obj any) {
	rs, ok := controller.ObjectFromDelete[*appsv1.ReplicaSet](obj)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		if d := c.resolveControllerRef(rs.Namespace, ref); d != nil {
			c.enqueue(d)
		}
	}
}

// deletePod wakes a Recreate Deployment, which waits for its old pods to
// be gone before it scales the new ReplicaSet up.
func (c *Controller) deletePod(obj any) {
	pod, ok := controller.ObjectFromDelete[*corev1.Pod](obj)
	if !ok {
		return
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs, err := c.rsLister.Get(pod.Namespace, ref.Name)
	if err != nil || rs.UID != ref.UID {
		return
	}
	dRef := metav1.GetControllerOfNoCopy(rs)
	if dRef == nil {
		return
	}
	if d := c.resolveControllerRef(rs.Namespace, dRef); d != nil && d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.enqueue(d)
	}
}

// resolveControllerRef returns the Deployment ref names, if the cache has
// it with the same uid.
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *appsv1.Deployment {
	if ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return nil
	}
	d, err := c.dLister.Get(namespace, ref.Name)
	if err != nil || d.UID != ref.UID {
		return nil
	}
	return d
}

// deploymentsSelecting returns the Deployments in rs's namespace whose
// selector matches its labels: those that may adopt it.
func (c *Controller) deploymentsSelecting(rs *appsv1.ReplicaSet) []*appsv1.Deployment {
	var out []*appsv1.Deployment
	for _, d := range c.dLister.ByNamespace(rs.Namespace).List(nil) {
		selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || selector.Empty() {
			continue
		}
		if selector.Matches(labels.Set(rs.Labels)) {
			out = append(out, d)
		}
	}
	return out
}
