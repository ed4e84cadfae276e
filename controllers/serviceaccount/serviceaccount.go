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
	"errors"
	"io"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// DefaultServiceAccount is the name of the ServiceAccount every namespace
// gets.
const DefaultServiceAccount = "default"

// EventRecorder records Events about objects; client/record's Recorder is
// one.
type EventRecorder interface {
	Eventf(obj api.Object, eventType, reason, messageFmt string, args ...any)
}

// Options is what the controller needs.
type Options struct {
	// Client is what the controller writes through. Required.
	Client *client.RESTClient
	// Informers is the shared factory it reads namespaces and
	// ServiceAccounts from. Required; the caller starts it.
	Informers *informer.SharedInformerFactory
	// Recorder receives an Event per ServiceAccount created. Nil: none.
	Recorder EventRecorder
	// Logger receives the controller's story. Nil: discard.
	Logger *slog.Logger
	// Metrics receives the workqueue's metrics. Nil: none.
	Metrics prometheus.Registerer
}

// Controller creates the "default" ServiceAccount of each namespace. Its
// queue holds namespace names.
type Controller struct {
	serviceAccounts *client.Client[*corev1.ServiceAccount]
	nsLister        informer.Lister[*corev1.Namespace]
	saLister        informer.Lister[*corev1.ServiceAccount]
	synced          []func() bool

	queue    *workqueue.Queue[string]
	recorder EventRecorder
	log      *slog.Logger
}

// New returns a controller reading from opts.Informers. Call Run to start
// it.
func New(opts Options) (*Controller, error) {
	if opts.Client == nil || opts.Informers == nil {
		return nil, errors.New("serviceaccount: Options.Client and Options.Informers are required")
	}
	c := &Controller{
		serviceAccounts: client.For[*corev1.ServiceAccount](opts.Client),
		recorder:        opts.Recorder,
		log:             opts.Logger,
	}
	if c.recorder == nil {
		c.recorder = controller.NopRecorder{}
	}
	if c.log == nil {
		c.log = slog.New(slog.NewTextHandler(io.Discard, nil))
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
		return nil, err
	}
	saReg, err := saInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		DeleteFunc: c.serviceAccountDeleted,
	})
	if err != nil {
		return nil, err
	}
	c.synced = []func() bool{nsReg.HasSynced, saReg.HasSynced}
	c.queue = workqueue.New[string]("serviceaccount", workqueue.Options{MetricsRegisterer: opts.Metrics})
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
		return
	}
	var wg sync.WaitGroup
	for range max(workers, 1) {
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

// processNextWorkItem syncs one namespace and decides retry or forget.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	if err := c.sync(ctx, name); err != nil {
		c.log.Error("sync failed; will retry", slog.String("object", name), slog.Any("err", err))
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
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
