// Package pvprotection is the pv-protection controller: a volume that a
// claim is bound to is not deleted until it is released, as
// kube-controller-manager's pv-protection controller keeps it.
//
// Every volume carries the kubernetes.io/pv-protection finalizer (the API
// server's StorageObjectInUseProtection admission adds it on create; this
// controller adds it to a volume that lacks it). For each volume being
// deleted, sync removes the finalizer unless the volume is Bound, the
// phase the persistentvolume-binder gives a volume while its claim
// names it.
//
// Properties:
//
//   - A Bound volume is never released by this controller.
//   - Only the finalizer changes; nothing is deleted here.
package pvprotection

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's kube-controller-manager name.
const Name = "pv-protection"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required).
type Options struct {
	controller.Common
}

// Controller is the pv-protection controller. Create it with New, then
// Run it.
type Controller struct {
	volumes    *client.Client[*corev1.PersistentVolume]
	volumeList informer.Lister[*corev1.PersistentVolume]
	hasSynced  []func() bool
	queue      *workqueue.Queue[string]
	log        *slog.Logger
}

// New returns a controller reading volumes from opts.Informers, with its
// event handlers registered. Nothing runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	pvInformer := informer.For[*corev1.PersistentVolume](opts.Informers)
	c := &Controller{
		volumes:    client.For[*corev1.PersistentVolume](opts.Client),
		volumeList: informer.NewLister[*corev1.PersistentVolume](pvInformer.GetIndexer()),
		queue:      controller.NewQueue[string](Name, opts.Common),
		log:        opts.Logger,
	}
	reg, err := pvInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
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

// enqueue adds a volume that lacks the finalizer, or is being deleted
// with it.
func (c *Controller) enqueue(obj any) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return
	}
	if slices.Contains(pv.Finalizers, api.PVProtectionFinalizer) == (pv.DeletionTimestamp != nil) {
		c.queue.Add(pv.Name)
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

// sync gives a live volume the finalizer, and takes it from a deleted one
// that is not Bound.
func (c *Controller) sync(ctx context.Context, name string) error {
	pv, err := c.volumeList.Get("", name)
	if apierrors.IsNotFound(err) {
		return nil // gone
	}
	if err != nil {
		return err
	}
	has := slices.Contains(pv.Finalizers, api.PVProtectionFinalizer)
	pv = pv.DeepCopy()
	switch {
	case pv.DeletionTimestamp == nil && !has:
		pv.Finalizers = append(pv.Finalizers, api.PVProtectionFinalizer)
	case pv.DeletionTimestamp != nil && has && pv.Status.Phase != corev1.VolumeBound:
		c.log.Info(fmt.Sprintf("deleted and %s → remove the finalizer", pv.Status.Phase), slog.String("object", name))
		pv.Finalizers = slices.DeleteFunc(pv.Finalizers, func(f string) bool { return f == api.PVProtectionFinalizer })
	case pv.DeletionTimestamp != nil && has:
		c.log.Info("deleted, but still Bound → keep the finalizer", slog.String("object", name))
		return nil
	default:
		return nil
	}
	_, err = c.volumes.Update(ctx, pv)
	if client.IsNotFound(err) {
		return nil
	}
	return err
}
