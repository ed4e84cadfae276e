// Package tokencleaner is kube-controller-manager's tokencleaner
// controller: it deletes bootstrap token Secrets once they expire.
//
// For each Secret of type bootstrap.kubernetes.io/token in kube-system,
// sync reads its expiration (RFC 3339; one that cannot be read counts as
// past, as in kube). Past: the Secret is deleted, with its uid as a
// precondition, so that a token replaced meanwhile stays. Not yet: it
// looks again then. No expiration: the token lives until someone deletes
// it. Times are read on the controller's clock.
//
// It is off by default, as in kube: it runs when --controllers names it.
package tokencleaner

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/bootstraptoken"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's kube-controller-manager name.
const Name = "tokencleaner"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required).
type Options struct {
	controller.Common
}

// Controller is the tokencleaner controller. Create it with New, then Run
// it.
type Controller struct {
	secrets   *client.Client[*corev1.Secret]
	lister    informer.Lister[*corev1.Secret]
	hasSynced []func() bool
	queue     *workqueue.Queue[string]
	log       *slog.Logger
	clock     clock.Clock
}

// New returns a controller reading Secrets from opts.Informers, with its
// event handlers registered. Nothing runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	inf := informer.For[*corev1.Secret](opts.Informers)
	c := &Controller{
		secrets: client.For[*corev1.Secret](opts.Client),
		lister:  informer.NewLister[*corev1.Secret](inf.GetIndexer()),
		queue:   controller.NewQueue[string](Name, opts.Common),
		log:     opts.Logger,
		clock:   opts.Clock,
	}
	reg, err := inf.AddEventHandler(informer.ResourceEventHandlerFuncs{
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

func (c *Controller) enqueue(obj any) {
	if s, ok := obj.(*corev1.Secret); ok && isToken(s) {
		c.queue.Add(s.Namespace + "/" + s.Name)
	}
}

func isToken(s *corev1.Secret) bool {
	return s.Type == bootstraptoken.SecretType && s.Namespace == bootstraptoken.Namespace
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

// sync deletes one token Secret if it has expired, or looks again when it
// will.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	s, err := c.lister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !isToken(s) || s.DeletionTimestamp != nil {
		return nil
	}
	at, ok := bootstraptoken.Expiration(s)
	if !ok {
		return nil
	}
	if left := at.Sub(c.clock.Now()); left > 0 {
		return workqueue.RequeueAfter(left, "bootstrap token not yet expired")
	}
	err = c.secrets.Delete(ctx, namespace, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
	if client.IsNotFound(err) || client.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete bootstrap token: %w", err)
	}
	c.log.Info(fmt.Sprintf("expired at %s → delete", at.Format("2006-01-02T15:04:05Z07:00")), "object", key)
	return nil
}
