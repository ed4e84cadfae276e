// Package serviceaccount keeps a ServiceAccount named "default" in every
// namespace, as kube-controller-manager's serviceaccount controller does, so
// that a pod which names no ServiceAccount always has one to run as.
//
// Properties:
//
//   - Every Active namespace gets a "default" ServiceAccount soon after it
//     appears, and gets it again soon after it is deleted.
//   - A namespace that is being terminated is left alone: nothing may be
//     created in it, and its content is on its way out.
//   - An existing "default" ServiceAccount is never changed, whatever it
//     holds: the controller only creates.
package serviceaccount

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// DefaultServiceAccount is the name of the ServiceAccount every namespace
// gets.
const DefaultServiceAccount = "default"

// Name is the controller's kube-controller-manager name: its --controllers
// name, its logger's controller attribute and its workqueue's name.
const Name = "serviceaccount"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required); it has no knobs of its own. Its Recorder
// gets an Event per ServiceAccount created.
type Options struct {
	controller.Common
}

// Controller creates the "default" ServiceAccount of each namespace. Its
// queue holds namespace names.
type Controller struct {
	serviceAccounts *client.Client[*corev1.ServiceAccount]
	nsLister        informer.Lister[*corev1.Namespace]
	saLister        informer.Lister[*corev1.ServiceAccount]
	synced          []func() bool

	queue    *workqueue.Queue[string]
	recorder record.EventRecorder
	log      *slog.Logger
}

// New returns a controller reading namespaces and ServiceAccounts from
// opts.Informers. Call Run to start it.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	c := &Controller{
		serviceAccounts: client.For[*corev1.ServiceAccount](opts.Client),
		queue:           controller.NewQueue[string](Name, opts.Common),
		recorder:        opts.Recorder,
		log:             opts.Logger,
	}

	nsInformer := informer.For[*corev1.Namespace](opts.Informers)
	saInformer := informer.For[*corev1.ServiceAccount](opts.Informers)
	c.nsLister = nsInformer.Lister()
	c.saLister = saInformer.Lister()

	nsReg, err := nsInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueueNamespace(obj) },
		UpdateFunc: func(_, obj any) { c.enqueueNamespace(obj) },
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("serviceaccount: %w", err)
	}
	saReg, err := saInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		DeleteFunc: c.serviceAccountDeleted,
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("serviceaccount: %w", err)
	}
	c.synced = []func() bool{nsReg.HasSynced, saReg.HasSynced}
	return c, nil
}

func (c *Controller) enqueueNamespace(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		c.queue.Add(ns.Name)
	}
}

// serviceAccountDeleted enqueues the namespace of a deleted "default"
// ServiceAccount, so that it is created again.
func (c *Controller) serviceAccountDeleted(obj any) {
	if tomb, ok := obj.(informer.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	sa, ok := obj.(*corev1.ServiceAccount)
	if !ok || sa.Name != DefaultServiceAccount {
		return
	}
	c.queue.Add(sa.Namespace)
}

// Run waits for the caches, runs workers until ctx is done, then shuts the
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
// again later. It returns false once the queue is shut down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	controller.HandleErr(ctx, c.log, c.queue, name, c.sync(ctx, name))
	return true
}

// sync makes sure namespace name has its "default" ServiceAccount.
func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.nsLister.Get("", name)
	if apierrors.IsNotFound(err) {
		return nil // the namespace is gone; nothing to do
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp != nil || ns.Status.Phase != corev1.NamespaceActive {
		c.log.Debug("namespace is terminating → skip", slog.String("object", name))
		return nil // nothing may be created in it
	}
	if _, err := c.saLister.Get(name, DefaultServiceAccount); err == nil {
		return nil // it has one
	} else if !apierrors.IsNotFound(err) {
		return err
	}

	c.log.Info("namespace has no ServiceAccount "+DefaultServiceAccount+" → create it",
		slog.String("object", name), slog.String("serviceAccount", DefaultServiceAccount))
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultServiceAccount, Namespace: name}}
	created, err := c.serviceAccounts.Create(ctx, sa)
	switch {
	case client.IsAlreadyExists(err):
		return nil // our cache was behind: it exists
	case client.IsNotFound(err), client.IsForbidden(err):
		// The namespace went, or began terminating, since we read it; its
		// own update will tell us if there is anything left to do.
		c.log.Info("namespace is gone or terminating → skip", slog.String("object", name), slog.Any("err", err))
		return nil
	case err != nil:
		return err
	}
	c.recorder.Eventf(created, corev1.EventTypeNormal, "Created", "Created ServiceAccount %s in namespace %s", created.Name, name)
	return nil
}
