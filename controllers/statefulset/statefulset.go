// Package statefulset is the StatefulSet controller: it keeps each
// StatefulSet's pods, each with a stable name, hostname and claims,
// started, stopped and updated in ordinal order, as
// kube-controller-manager's statefulset controller does.
//
// Design, one line per file:
//
//   - statefulset.go: the controller (Options, New, Run, the sync story)
//     and the event handlers.
//   - control.go: the pods of one sync (create, replace, scale down,
//     roll out) and the status.
//   - claims.go: the claims of volumeClaimTemplates and their retention
//     policy.
//   - identity.go: what a pod of a StatefulSet is named, labelled and
//     mounts.
//   - history.go: ControllerRevisions, one per template, and the history
//     limit.
//
// A sync reads like this: make sure the template has a ControllerRevision
// (the update revision) and find the current one; claim the pods; for
// each ordinal from spec.ordinals.start, replace a failed pod and create
// a missing one (its claims first) from the current revision below the
// partition and the update revision above it; with OrderedReady stop at
// the first pod that is not Running and Ready (with Parallel, work on
// every ordinal at once, in slow-start batches of 1, 2, 4, ... pods);
// then delete the pods beyond the replicas, highest ordinal first (all
// at once with Parallel); then roll out: delete the
// old-revision pods from the highest ordinal down to the partition, at
// most maxUnavailable unavailable at a time (OnDelete waits for the user
// to delete them); trim the history; and write the status.
//
// Properties:
//
//   - A pod is never created twice: names are fixed, so a create the
//     cache has not shown yet fails AlreadyExists and the sync waits.
//   - Claims are created before their pod and never deleted with it,
//     unless persistentVolumeClaimRetentionPolicy says Delete: then the
//     claims carry an owner reference to the set (whenDeleted) or, for
//     the ordinals a scale down removes, to their pod (whenScaled), and
//     the garbage collector deletes them.
//   - With OrderedReady, pod i+1 is created only when pods 0..i are
//     Running and Ready (and available for minReadySeconds), pods are
//     deleted one at a time from the highest ordinal, and nothing moves
//     while a pod is unhealthy.
//   - A StatefulSet being deleted is left alone: its pods and revisions
//     are the garbage collector's.
//
// Handlers only enqueue keys; every decision is made in sync and logged as
// one line: "want 3, have 2 → create web-2".
package statefulset

import (
	"context"
	"fmt"
	"log/slog"
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

// Name is the controller's kube-controller-manager name: its --controllers
// name, its logger's controller attribute and its workqueue's name.
const Name = "statefulset"

var controllerKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

// Options is what the controller needs: the options every controller takes
// (Client and Informers required).
type Options struct {
	controller.Common
}

// Controller is the StatefulSet controller. Create it with New, then Run it.
type Controller struct {
	setClient   *client.Client[*appsv1.StatefulSet]
	crClient    *client.Client[*appsv1.ControllerRevision]
	podClient   *client.Client[*corev1.Pod]
	claimClient *client.Client[*corev1.PersistentVolumeClaim]

	setLister   informer.Lister[*appsv1.StatefulSet]
	crLister    informer.Lister[*appsv1.ControllerRevision]
	claimLister informer.Lister[*corev1.PersistentVolumeClaim]
	podIndexer  informer.Indexer // with controller.ControllerUIDIndex
	hasSynced   []func() bool

	queue    *workqueue.Queue[string]
	recorder record.EventRecorder
	log      *slog.Logger
	clock    clock.Clock
}

// New returns a controller reading StatefulSets, ControllerRevisions, pods
// and claims from opts.Informers, with its event handlers registered; it
// adds controller.ControllerUIDIndex to the pod informer. Nothing runs
// until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	setInformer := informer.For[*appsv1.StatefulSet](opts.Informers)
	crInformer := informer.For[*appsv1.ControllerRevision](opts.Informers)
	podInformer := informer.For[*corev1.Pod](opts.Informers)
	claimInformer := informer.For[*corev1.PersistentVolumeClaim](opts.Informers)
	if err := controller.EnsureControllerUIDIndex(podInformer); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c := &Controller{
		setClient:   client.For[*appsv1.StatefulSet](opts.Client),
		crClient:    client.For[*appsv1.ControllerRevision](opts.Client),
		podClient:   client.For[*corev1.Pod](opts.Client),
		claimClient: client.For[*corev1.PersistentVolumeClaim](opts.Client),
		setLister:   setInformer.Lister(),
		crLister:    crInformer.Lister(),
		claimLister: claimInformer.Lister(),
		podIndexer:  podInformer.GetIndexer(),
		recorder:    opts.Recorder,
		log:         opts.Logger,
		clock:       opts.Clock,
		queue:       controller.NewQueue[string](Name, opts.Common),
	}
	handlers := []struct {
		inf interface {
			AddEventHandler(informer.ResourceEventHandler) (*informer.HandlerRegistration, error)
		}
		h informer.ResourceEventHandlerFuncs
	}{
		{setInformer, informer.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any, _ bool) { c.enqueueObj(obj) },
			UpdateFunc: func(_, obj any) { c.enqueueObj(obj) },
			DeleteFunc: c.enqueueObj,
		}},
		{crInformer, informer.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any, _ bool) { c.ownedChanged(obj) },
			UpdateFunc: func(_, obj any) { c.ownedChanged(obj) },
			DeleteFunc: c.ownedChanged,
		}},
		{podInformer, informer.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any, _ bool) { c.podChanged(obj) },
			UpdateFunc: c.updatePod,
			DeleteFunc: c.podChanged,
		}},
		// Claims are read from the cache but trigger nothing: a sync
		// creates what is missing and a pod event brings the next.
		{claimInformer, informer.ResourceEventHandlerFuncs{}},
	}
	for _, h := range handlers {
		reg, err := h.inf.AddEventHandler(h.h)
		if err != nil {
			c.queue.ShutDown()
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		c.hasSynced = append(c.hasSynced, reg.HasSynced)
	}
	return c, nil
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

// sync is the story of the package doc, for one StatefulSet.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		c.log.Error("bad key", "key", key, "err", err)
		return nil // a malformed key never gets better
	}
	set, err := c.setLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		return nil // the set is gone; its pods and revisions are the garbage collector's
	}
	if err != nil {
		return err
	}
	if set.DeletionTimestamp != nil {
		return nil // being deleted: the garbage collector's now
	}
	hist, err := c.revisions(ctx, set)
	if err != nil {
		return fmt.Errorf("construct revisions: %w", err)
	}
	pods, err := c.claimPods(ctx, set)
	if err != nil {
		return err
	}
	status, err := c.syncPods(ctx, set, hist, pods)
	if err != nil {
		return err
	}
	if err := c.truncateHistory(ctx, set, hist, pods); err != nil {
		return fmt.Errorf("truncate history: %w", err)
	}
	return c.updateStatus(ctx, set, status)
}

// claimPods returns the pods set controls, after adopting matching orphans
// (whose names are the set's own) and releasing those that stopped
// matching.
func (c *Controller) claimPods(ctx context.Context, set *appsv1.StatefulSet) ([]*corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return nil, err
	}
	candidates, err := controller.OwnedAndOrphans[*corev1.Pod](c.podIndexer, set.Namespace, set.UID)
	if err != nil {
		return nil, err
	}
	var ours []*corev1.Pod
	for _, pod := range candidates {
		// kube adopts only pods named as the set's would be.
		if _, ok := ordinalOf(set, pod); ok || metav1.IsControlledBy(pod, set) {
			ours = append(ours, pod)
		}
	}
	m := &controller.RefManager[*corev1.Pod]{
		Owner: set, OwnerKind: controllerKind, Selector: selector, Client: c.podClient,
		CanAdopt: controller.RecheckOwner(func(ctx context.Context) (*appsv1.StatefulSet, error) {
			return c.setClient.Get(ctx, set.Namespace, set.Name)
		}, set.UID),
	}
	pods, err := m.Claim(ctx, ours)
	if err != nil {
		return nil, fmt.Errorf("claim pods: %w", err)
	}
	return pods, nil
}

// updateStatus writes status when it differs from set's.
func (c *Controller) updateStatus(ctx context.Context, set *appsv1.StatefulSet, status appsv1.StatefulSetStatus) error {
	if statusEqual(set.Status, status) {
		return nil
	}
	cp := set.DeepCopy()
	cp.Status = status
	_, err := c.setClient.UpdateStatus(ctx, cp)
	if client.IsNotFound(err) {
		return nil // deleted meanwhile
	}
	return err
}

func setKey(set *appsv1.StatefulSet) string { return set.Namespace + "/" + set.Name }

func (c *Controller) enqueueObj(obj any) {
	if set, ok := controller.ObjectFromDelete[*appsv1.StatefulSet](obj); ok {
		c.queue.Add(setKey(set))
	}
}

// ownedChanged enqueues the set that controls a revision.
func (c *Controller) ownedChanged(obj any) {
	cr, ok := controller.ObjectFromDelete[*appsv1.ControllerRevision](obj)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(cr); ref != nil && ref.Kind == controllerKind.Kind {
		c.queue.Add(cr.Namespace + "/" + ref.Name)
	}
}

// podChanged enqueues the set that controls pod or, for an orphan, every
// set whose selector matches it.
func (c *Controller) podChanged(obj any) {
	pod, ok := controller.ObjectFromDelete[*corev1.Pod](obj)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if ref.Kind == controllerKind.Kind && ref.APIVersion == controllerKind.GroupVersion().String() {
			c.queue.Add(pod.Namespace + "/" + ref.Name)
		}
		return
	}
	for _, set := range c.setLister.ByNamespace(pod.Namespace).List(nil) {
		sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) {
			c.queue.Add(setKey(set))
		}
	}
}

// updatePod also wakes the old controller of a pod whose owner changed.
func (c *Controller) updatePod(oldObj, newObj any) {
	if old, ok := oldObj.(*corev1.Pod); ok {
		if ref := metav1.GetControllerOf(old); ref != nil && ref.Kind == controllerKind.Kind {
			c.queue.Add(old.Namespace + "/" + ref.Name)
		}
	}
	c.podChanged(newObj)
}
