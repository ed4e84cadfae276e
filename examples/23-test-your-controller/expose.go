// Package expose is a small controller and, in expose_test.go, the way
// to test one: against a whole control plane started inside `go test` by
// package testenv.
//
// What it reconciles: every Deployment annotated example.com/expose:
// "true" gets a Service of the same name, selecting the Deployment's
// pods, owned by the Deployment (an ownerReference with controller:
// true). Remove the annotation and the Service goes; delete the
// Deployment and the garbage collector removes the Service, as it does
// whatever an owner owned.
package expose

import (
	"context"
	"log/slog"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Annotation marks the Deployments to expose.
const Annotation = "example.com/expose"

// Controller keeps a Service for each Deployment that asks for one.
type Controller struct {
	deployments informer.Lister[*appsv1.Deployment]
	services    *client.Client[*corev1.Service]
	queue       *workqueue.Queue[string]
	log         *slog.Logger
}

// Run runs the controller against the API server rc reaches until ctx
// ends.
func Run(ctx context.Context, rc *client.RESTClient, log *slog.Logger) error {
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	defer factory.Shutdown()
	deployments := informer.For[*appsv1.Deployment](factory)
	c := &Controller{
		deployments: deployments.Lister(),
		services:    client.For[*corev1.Service](rc),
		queue:       workqueue.New[string]("expose", workqueue.Options{}),
		log:         log,
	}
	defer c.queue.ShutDown()
	enqueue := func(obj any) {
		if key, err := informer.MetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := deployments.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { enqueue(obj) },
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx)
	if !informer.WaitForCacheSync(ctx, deployments.HasSynced) {
		return context.Cause(ctx)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for c.processNextWorkItem(ctx) {
		}
	})
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		c.log.Info("expose: retrying", "key", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// sync makes the Service of Deployment key exist when the Deployment
// asks for it, and not exist when it does not.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, _ := informer.SplitMetaNamespaceKey(key)
	d, err := c.deployments.Get(namespace, name)
	if err != nil {
		return nil // the Deployment is gone: the garbage collector removes its Service
	}
	_, err = c.services.Get(ctx, namespace, name)
	exists := err == nil
	if err != nil && !client.IsNotFound(err) {
		return err
	}
	want := d.Annotations[Annotation] == "true"
	switch {
	case want && !exists:
		_, err = c.services.Create(ctx, serviceFor(d))
		if client.IsAlreadyExists(err) {
			return nil
		}
		return err
	case !want && exists:
		err = c.services.Delete(ctx, namespace, name, metav1.DeleteOptions{})
		if client.IsNotFound(err) {
			return nil
		}
		return err
	}
	return nil
}

// serviceFor is the Service that exposes d: port 80 of its pods, owned by
// d.
func serviceFor(d *appsv1.Deployment) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Name, Namespace: d.Namespace,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.ServiceSpec{
			Selector: d.Spec.Selector.MatchLabels,
			Ports:    []corev1.ServicePort{{Port: 80}},
		},
	}
}
