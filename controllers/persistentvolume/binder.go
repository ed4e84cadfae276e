// Package persistentvolume is the persistentvolume-binder controller: it
// binds PersistentVolumeClaims to PersistentVolumes, provisions volumes
// for claims of a class served by minictl's simulated hostPath
// provisioner, and reclaims the volumes of deleted claims, as
// kube-controller-manager's persistent volume controller does.
//
// For each claim, syncClaim reads it from the cache. An unbound claim
// (no volumeName) is matched against the Available volumes: same class,
// enough storage (the smallest that fits), its access modes, its
// selector and its volume mode, and the node affinity of the node
// chosen for it (volume.kubernetes.io/selected-node). A match is bound:
// the volume's claimRef first, then its phase, then the claim's
// volumeName and annotations, then its phase. No match: a claim of a
// WaitForFirstConsumer class waits for its node; one of a class whose
// provisioner is sim.minictl.io/hostpath gets a volume provisioned, by
// an operation that runs beside the claim worker (at most one per
// claim), as kube's does; one of any other class is annotated with the
// provisioner expected to make its volume, and waits for it
// (ExternalProvisioning). A bound claim whose volume is gone is Lost.
//
// For each volume, syncVolume makes its phase say where it stands:
// Available without a claimRef, Bound while its claim names it,
// Released once its claim is gone, and then reclaimed by its policy:
// Retain keeps it Released; Delete deletes it (a provisioned one by its
// provisioner, which here is only a record); Recycle is not supported
// and fails it.
//
// Properties:
//
//   - A claim is bound to at most one volume and a volume to at most one
//     claim; a pre-bound pair (a claim naming a volume, a volume naming a
//     claim) is honoured as it stands.
//   - Every object is looked at again every sync period
//     (--pvclaimbinder-sync-period), so a write lost to a conflict is
//     made again.
package persistentvolume

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's kube-controller-manager name.
const Name = "persistentvolume-binder"

// DefaultSyncPeriod is kube-controller-manager's
// --pvclaimbinder-sync-period.
const DefaultSyncPeriod = 15 * time.Second

// Options is what the controller needs: the options every controller takes
// (Client and Informers required), and how often it looks at everything
// again (0: DefaultSyncPeriod).
type Options struct {
	controller.Common
	SyncPeriod time.Duration
}

// Controller is the persistentvolume-binder. Create it with New, then Run
// it.
type Controller struct {
	volumes     *client.Client[*corev1.PersistentVolume]
	claims      *client.Client[*corev1.PersistentVolumeClaim]
	volumeList  informer.Lister[*corev1.PersistentVolume]
	claimList   informer.Lister[*corev1.PersistentVolumeClaim]
	classList   informer.Lister[*storagev1.StorageClass]
	nodes       *client.Client[*corev1.Node]
	hasSynced   []func() bool
	volumeQueue *workqueue.Queue[string]
	claimQueue  *workqueue.Queue[string]
	recorder    record.EventRecorder
	log         *slog.Logger
	period      time.Duration
	// ops are the provisioning operations under way, beside the workers.
	ops operations
}

// New returns a controller reading volumes, claims and classes from
// opts.Informers, with its event handlers registered. Nothing runs until
// Run. It reads a node only when a claim names one, from the API, as its
// role allows (get, not watch).
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	pvInformer := informer.For[*corev1.PersistentVolume](opts.Informers)
	pvcInformer := informer.For[*corev1.PersistentVolumeClaim](opts.Informers)
	scInformer := informer.For[*storagev1.StorageClass](opts.Informers)
	c := &Controller{
		volumes:     client.For[*corev1.PersistentVolume](opts.Client),
		claims:      client.For[*corev1.PersistentVolumeClaim](opts.Client),
		volumeList:  informer.NewLister[*corev1.PersistentVolume](pvInformer.GetIndexer()),
		claimList:   informer.NewLister[*corev1.PersistentVolumeClaim](pvcInformer.GetIndexer()),
		classList:   informer.NewLister[*storagev1.StorageClass](scInformer.GetIndexer()),
		nodes:       client.For[*corev1.Node](opts.Client),
		volumeQueue: controller.NewQueue[string]("volumes", opts.Common),
		claimQueue:  controller.NewQueue[string]("claims", opts.Common),
		recorder:    opts.Recorder,
		log:         opts.Logger,
		period:      opts.SyncPeriod,
	}
	if c.period <= 0 {
		c.period = DefaultSyncPeriod
	}
	regs := []struct {
		inf interface {
			AddEventHandler(informer.ResourceEventHandler) (*informer.HandlerRegistration, error)
		}
		h informer.ResourceEventHandlerFuncs
	}{
		{pvInformer, informer.ResourceEventHandlerFuncs{
			AddFunc: func(obj any, _ bool) { c.enqueueVolume(obj) }, UpdateFunc: func(_, obj any) { c.enqueueVolume(obj) },
			DeleteFunc: c.volumeDeleted,
		}},
		{pvcInformer, informer.ResourceEventHandlerFuncs{
			AddFunc: func(obj any, _ bool) { c.enqueueClaim(obj) }, UpdateFunc: func(_, obj any) { c.enqueueClaim(obj) },
			DeleteFunc: c.claimDeleted,
		}},
		{scInformer, informer.ResourceEventHandlerFuncs{}},
	}
	for _, r := range regs {
		reg, err := r.inf.AddEventHandler(r.h)
		if err != nil {
			c.volumeQueue.ShutDown()
			c.claimQueue.ShutDown()
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		c.hasSynced = append(c.hasSynced, reg.HasSynced)
	}
	return c, nil
}

func (c *Controller) enqueueVolume(obj any) {
	if pv, ok := obj.(*corev1.PersistentVolume); ok {
		c.volumeQueue.Add(pv.Name)
	}
}

func (c *Controller) enqueueClaim(obj any) {
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
	}
}

// volumeDeleted looks again at the claim the volume was bound to, which
// is now Lost.
func (c *Controller) volumeDeleted(obj any) {
	pv, ok := tombstoned[*corev1.PersistentVolume](obj)
	if ok && pv.Spec.ClaimRef != nil {
		c.claimQueue.Add(pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
	}
}

// claimDeleted looks again at the volume the claim was bound to, which
// is now Released.
func (c *Controller) claimDeleted(obj any) {
	pvc, ok := tombstoned[*corev1.PersistentVolumeClaim](obj)
	if ok && pvc.Spec.VolumeName != "" {
		c.volumeQueue.Add(pvc.Spec.VolumeName)
	}
}

func tombstoned[T any](obj any) (T, bool) {
	if d, ok := obj.(informer.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, ok := obj.(T)
	return t, ok
}

// Run waits for the caches to sync, runs workers workers on each queue,
// looks at everything again every sync period, and blocks until ctx is
// done and the provisioning operations under way have returned.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.volumeQueue.ShutDown()
	defer c.claimQueue.ShutDown()
	c.log.Info("starting", "workers", workers, "syncPeriod", c.period)
	if !informer.WaitForCacheSync(ctx, c.hasSynced...) {
		c.log.Info("stopped before the caches synced")
		return
	}
	var wg sync.WaitGroup
	for range controller.Workers(workers) {
		wg.Go(func() {
			for c.processNext(ctx, c.volumeQueue, c.syncVolume) {
			}
		})
		wg.Go(func() {
			for c.processNext(ctx, c.claimQueue, c.syncClaim) {
			}
		})
	}
	wg.Go(func() { c.resync(ctx) })
	<-ctx.Done()
	c.volumeQueue.ShutDown()
	c.claimQueue.ShutDown()
	wg.Wait()
	c.ops.wait() // the workers that start them have stopped
	c.log.Info("stopped")
}

// resync enqueues every volume and claim each period, until ctx ends.
func (c *Controller) resync(ctx context.Context) {
	t := time.NewTicker(c.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, pv := range c.volumeList.List(labels.Everything()) {
			c.volumeQueue.Add(pv.Name)
		}
		for _, pvc := range c.claimList.List(labels.Everything()) {
			c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
		}
	}
}

func (c *Controller) processNext(ctx context.Context, q *workqueue.Queue[string], sync func(context.Context, string) error) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	controller.HandleErr(ctx, c.log, q, key, sync(ctx, key))
	return true
}

// syncClaim binds, provisions for, or reports on one claim.
func (c *Controller) syncClaim(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // a malformed key never gets better
	}
	pvc, err := c.claimList.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		return nil // gone; its volume's sync releases the volume
	}
	if err != nil {
		return err
	}
	pvc = pvc.DeepCopy()
	if pvc.Annotations[annBindCompleted] == "" {
		return c.syncUnboundClaim(ctx, pvc)
	}
	return c.syncBoundClaim(ctx, pvc)
}

// syncVolume sets one volume's phase from its claim, and reclaims it once
// released.
func (c *Controller) syncVolume(ctx context.Context, name string) error {
	pv, err := c.volumeList.Get("", name)
	if apierrors.IsNotFound(err) {
		return nil // gone
	}
	if err != nil {
		return err
	}
	pv = pv.DeepCopy()
	ref := pv.Spec.ClaimRef
	if ref == nil {
		return c.setVolumePhase(ctx, pv, corev1.VolumeAvailable, "")
	}
	if ref.UID == "" {
		// Pre-bound by a user to a claim that has not been bound yet:
		// the claim's sync finishes the binding.
		return c.setVolumePhase(ctx, pv, corev1.VolumeAvailable, "")
	}
	pvc, err := c.claimList.Get(ref.Namespace, ref.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if pvc != nil && pvc.UID != ref.UID {
		pvc = nil // a new claim of the same name is not this volume's
	}
	if pvc == nil {
		// The cache may not have seen the claim yet: ask the API before
		// releasing the volume.
		fresh, err := c.claims.Get(ctx, ref.Namespace, ref.Name)
		switch {
		case err == nil && fresh.UID == ref.UID:
			pvc = fresh
		case err != nil && !client.IsNotFound(err):
			return err
		}
	}
	if pvc == nil {
		if pv.Status.Phase != corev1.VolumeReleased && pv.Status.Phase != corev1.VolumeFailed {
			c.log.Info(fmt.Sprintf("claim %s/%s is gone → Released", ref.Namespace, ref.Name), slog.String("object", name))
			if err := c.setVolumePhase(ctx, pv, corev1.VolumeReleased, ""); err != nil {
				return err
			}
		}
		return c.reclaimVolume(ctx, pv)
	}
	switch {
	case pvc.Spec.VolumeName == pv.Name:
		return c.setVolumePhase(ctx, pv, corev1.VolumeBound, "")
	case pvc.Spec.VolumeName == "":
		// Bound to the claim on this side only (provisioned for it, or
		// the binder's first step): the claim's sync binds the other.
		c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
		return nil
	case pv.Annotations[annBoundByController] != "":
		// The claim is bound to another volume: this one was bound by
		// the binder in a binding that did not finish. Undo it.
		c.log.Info(fmt.Sprintf("claim %s/%s is bound to %s → unbind", ref.Namespace, ref.Name, pvc.Spec.VolumeName), slog.String("object", name))
		pv.Spec.ClaimRef = nil
		delete(pv.Annotations, annBoundByController)
		pv, err = c.volumes.Update(ctx, pv)
		if err != nil {
			return err
		}
		return c.setVolumePhase(ctx, pv, corev1.VolumeAvailable, "")
	default:
		return nil // pre-bound by a user to a claim bound elsewhere: left as the user made it
	}
}

// setVolumePhase writes the volume's phase (and reason) through /status,
// unless it says so already.
func (c *Controller) setVolumePhase(ctx context.Context, pv *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, message string) error {
	if pv.Status.Phase == phase && pv.Status.Message == message {
		return nil
	}
	pv.Status.Phase, pv.Status.Message = phase, message
	if _, err := c.volumes.UpdateStatus(ctx, pv); err != nil {
		return fmt.Errorf("volume %s phase %s: %w", pv.Name, phase, err)
	}
	return nil
}

// setClaimStatus writes the claim's phase, and, when bound, the volume's
// access modes and capacity.
func (c *Controller) setClaimStatus(ctx context.Context, pvc *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase, pv *corev1.PersistentVolume) error {
	want := pvc.Status.DeepCopy()
	want.Phase = phase
	if pv != nil {
		want.AccessModes = pv.Spec.AccessModes
		want.Capacity = pv.Spec.Capacity
	}
	if apiequality.Semantic.DeepEqual(*want, pvc.Status) {
		return nil
	}
	pvc.Status = *want
	if _, err := c.claims.UpdateStatus(ctx, pvc); err != nil {
		return fmt.Errorf("claim %s/%s phase %s: %w", pvc.Namespace, pvc.Name, phase, err)
	}
	return nil
}
