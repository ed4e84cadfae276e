// Package ingress is minictl's simulated ingress controller: the part a
// cluster gets from a third party (ingress-nginx, a cloud's load balancer
// controller), not from kube-controller-manager. It runs as a component of
// its own, under its own user, and serves the Ingresses of the
// IngressClass "sim" with load balancers of the simulated cloud.
//
// Properties:
//
//   - At start it creates the IngressClass "sim" (controller
//     sim.minictl.io/ingress, annotated as the cluster's default) unless a
//     class of that name exists; an administrator's edits to it are kept.
//   - An Ingress is its own when its ingressClassName names a class whose
//     controller is sim.minictl.io/ingress, or, naming no class (nor the
//     older kubernetes.io/ingress.class annotation), when such a class is
//     the default. Others are left alone.
//   - Each of its Ingresses gets the finalizer sim.minictl.io/ingress, a
//     load balancer in the cloud (listening on 80, and 443 when the
//     Ingress has TLS; tagged with the cluster and namespace/name), and
//     that load balancer's IP in status.loadBalancer.ingress. A changed
//     Ingress changes its load balancer.
//   - A deleted Ingress, or one that is no longer its own, loses its load
//     balancer, then its address and the finalizer: the finalizer keeps a
//     deleted Ingress until its load balancer is gone.
//   - A backend Service that does not exist, or that has no such port, is
//     a Warning event on the Ingress (ServiceNotFound, ServicePortNotFound)
//     at each sync that finds it so; the load balancer is made all the
//     same, as a real controller answers for a missing backend with 503s.
//
// Handlers only enqueue keys: an Ingress's own, every Ingress of a
// namespace naming a changed Service, every Ingress when a class changes,
// and classKey when "sim" is deleted.
package ingress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/cloud/sim"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

const (
	// Name is the component's name: its logger's controller attribute,
	// its workqueue's name and the source of its Events.
	Name = "sim-ingress-controller"
	// ControllerName is spec.controller of the classes it serves.
	ControllerName = "sim.minictl.io/ingress"
	// ClassName is the IngressClass it creates.
	ClassName = "sim"
	// Finalizer holds a deleted Ingress until its load balancer is gone.
	Finalizer = "sim.minictl.io/ingress"

	// The reasons of its Warning events.
	ReasonServiceNotFound     = "ServiceNotFound"
	ReasonServicePortNotFound = "ServicePortNotFound"
	// ReasonSyncLoadBalancerFailed is a cloud call that failed.
	ReasonSyncLoadBalancerFailed = "SyncLoadBalancerFailed"

	// classKey is the queue's key for the class "sim"; Ingress keys are
	// namespace/name and never have a colon.
	classKey = "ingressclass:" + ClassName
)

// Options is what the controller needs: the options every controller
// takes, and the cloud.
type Options struct {
	controller.Common
	// Cloud is the simulated cloud's client. Required.
	Cloud *sim.Client
	// ClusterName tags the load balancers ("kubernetes" if empty).
	ClusterName string
}

// Controller serves the Ingresses of its classes. Its queue holds Ingress
// keys and classKey.
type Controller struct {
	ingresses   *client.Client[*networkingv1.Ingress]
	classes     *client.Client[*networkingv1.IngressClass]
	ingLister   informer.Lister[*networkingv1.Ingress]
	classLister informer.Lister[*networkingv1.IngressClass]
	svcLister   informer.Lister[*corev1.Service]
	synced      []func() bool

	cloud   *sim.Client
	cluster string

	queue    *workqueue.Queue[string]
	recorder record.EventRecorder
	log      *slog.Logger
}

// New returns a controller with its event handlers registered on
// opts.Informers. Nothing runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	if opts.Cloud == nil {
		return nil, errors.New("ingress: Options.Cloud is required")
	}
	c := &Controller{
		ingresses: client.For[*networkingv1.Ingress](opts.Client),
		classes:   client.For[*networkingv1.IngressClass](opts.Client),
		cloud:     opts.Cloud,
		cluster:   opts.ClusterName,
		queue:     controller.NewQueue[string](Name, opts.Common),
		recorder:  opts.Recorder,
		log:       opts.Logger,
	}
	if c.cluster == "" {
		c.cluster = "kubernetes"
	}
	ingInformer := informer.For[*networkingv1.Ingress](opts.Informers)
	classInformer := informer.For[*networkingv1.IngressClass](opts.Informers)
	svcInformer := informer.For[*corev1.Service](opts.Informers)
	c.ingLister, c.classLister, c.svcLister = ingInformer.Lister(), classInformer.Lister(), svcInformer.Lister()

	regs := []struct {
		inf interface {
			AddEventHandler(informer.ResourceEventHandler) (*informer.HandlerRegistration, error)
		}
		h informer.ResourceEventHandlerFuncs
	}{
		{ingInformer, informer.ResourceEventHandlerFuncs{
			AddFunc: func(obj any, _ bool) { c.enqueue(obj) }, UpdateFunc: func(_, obj any) { c.enqueue(obj) }, DeleteFunc: c.enqueue,
		}},
		{svcInformer, informer.ResourceEventHandlerFuncs{
			AddFunc: func(obj any, _ bool) { c.enqueueIngressesOf(obj) }, UpdateFunc: func(_, obj any) { c.enqueueIngressesOf(obj) }, DeleteFunc: c.enqueueIngressesOf,
		}},
		{classInformer, informer.ResourceEventHandlerFuncs{
			AddFunc: func(any, bool) { c.enqueueAll() }, UpdateFunc: func(any, any) { c.enqueueAll() },
			DeleteFunc: func(obj any) { c.queue.Add(classKey); c.enqueueAll() },
		}},
	}
	for _, r := range regs {
		reg, err := r.inf.AddEventHandler(r.h)
		if err != nil {
			c.queue.ShutDown()
			return nil, fmt.Errorf("ingress: %w", err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	if tomb, ok := obj.(informer.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(api.Object); ok {
		c.queue.Add(o.GetNamespace() + "/" + o.GetName())
	}
}

// enqueueIngressesOf queues the Ingresses of a Service's namespace that
// name it as a backend.
func (c *Controller) enqueueIngressesOf(obj any) {
	if tomb, ok := obj.(informer.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	for _, ing := range c.ingLister.ByNamespace(svc.Namespace).List(nil) {
		if slices.ContainsFunc(serviceBackends(ing), func(b *networkingv1.IngressServiceBackend) bool { return b.Name == svc.Name }) {
			c.queue.Add(ing.Namespace + "/" + ing.Name)
		}
	}
}

func (c *Controller) enqueueAll() {
	for _, ing := range c.ingLister.List(nil) {
		c.queue.Add(ing.Namespace + "/" + ing.Name)
	}
}

// Run waits for the caches, makes sure the class "sim" exists, runs
// workers until ctx is done, then shuts the queue down and waits for them.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	c.log.Info("starting", slog.Int("workers", workers))
	if !informer.WaitForCacheSync(ctx, c.synced...) {
		c.log.Info("stopped before the caches synced")
		return
	}
	c.queue.Add(classKey)
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

// processNextWorkItem syncs one key and leaves it to controller.HandleErr
// to retry or forget it. It returns false once the queue is shut down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	var err error
	if key == classKey {
		err = c.ensureClass(ctx)
	} else {
		err = c.sync(ctx, key)
	}
	controller.HandleErr(ctx, c.log, c.queue, key, err)
	return true
}

// ensureClass creates the IngressClass "sim", the cluster's default,
// unless a class of that name exists.
func (c *Controller) ensureClass(ctx context.Context) error {
	if _, err := c.classLister.Get("", ClassName); err == nil {
		return nil // there already; an administrator may have changed it
	}
	class := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: ClassName, Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
		Spec:       networkingv1.IngressClassSpec{Controller: ControllerName},
	}
	_, err := c.classes.Create(ctx, class)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create ingressclass %s: %w", ClassName, err)
	}
	c.log.Info(fmt.Sprintf("ingressclass %s created, the default, for controller %s", ClassName, ControllerName))
	return nil
}

// sync gives Ingress key, if it is ours and not being deleted, a load
// balancer and its address, and warns of the backends that do not exist;
// otherwise it takes away the load balancer, the address and the
// finalizer it gave.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	ing, err := c.ingLister.Get(ns, name)
	if apierrors.IsNotFound(err) {
		return nil // gone; its finalizer made sure its load balancer went first
	}
	if err != nil {
		return err
	}
	ours := c.isOurs(ing)
	if !ours || ing.DeletionTimestamp != nil {
		if !slices.Contains(ing.Finalizers, Finalizer) {
			return nil // never ours, or already released
		}
		return c.release(ctx, ing)
	}
	if !slices.Contains(ing.Finalizers, Finalizer) {
		ing = ing.DeepCopy()
		ing.Finalizers = append(ing.Finalizers, Finalizer)
		if ing, err = c.ingresses.Update(ctx, ing); err != nil {
			return fmt.Errorf("add finalizer: %w", err)
		}
	}
	c.checkBackends(ing)
	lb, err := c.cloud.PutLoadBalancer(ctx, loadBalancerName(ing), c.loadBalancerSpec(ing))
	if err != nil {
		c.recorder.Eventf(ing, corev1.EventTypeWarning, ReasonSyncLoadBalancerFailed, "Error syncing load balancer: %v", err)
		return fmt.Errorf("put load balancer %s: %w", loadBalancerName(ing), err)
	}
	want := networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: lb.IP}}}
	if apiequality.Semantic.DeepEqual(ing.Status.LoadBalancer, want) {
		return nil
	}
	ing = ing.DeepCopy()
	ing.Status.LoadBalancer = want
	if _, err := c.ingresses.UpdateStatus(ctx, ing); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	c.log.Info(fmt.Sprintf("ingress %s: load balancer %s at %s", key, lb.Name, lb.IP))
	return nil
}

// release deletes ing's load balancer, clears its address and removes the
// finalizer, in that order, so that nothing is left in the cloud.
func (c *Controller) release(ctx context.Context, ing *networkingv1.Ingress) error {
	lbName := loadBalancerName(ing)
	if err := c.cloud.DeleteLoadBalancer(ctx, lbName); err != nil && !sim.IsNotFound(err) {
		c.recorder.Eventf(ing, corev1.EventTypeWarning, ReasonSyncLoadBalancerFailed, "Error deleting load balancer: %v", err)
		return fmt.Errorf("delete load balancer %s: %w", lbName, err)
	}
	var err error
	if ing.DeletionTimestamp == nil && len(ing.Status.LoadBalancer.Ingress) > 0 {
		ing = ing.DeepCopy()
		ing.Status.LoadBalancer = networkingv1.IngressLoadBalancerStatus{}
		if ing, err = c.ingresses.UpdateStatus(ctx, ing); err != nil {
			return fmt.Errorf("clear status: %w", err)
		}
	}
	ing = ing.DeepCopy()
	ing.Finalizers = slices.DeleteFunc(ing.Finalizers, func(f string) bool { return f == Finalizer })
	if _, err := c.ingresses.Update(ctx, ing); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	c.log.Info(fmt.Sprintf("ingress %s/%s: load balancer %s deleted", ing.Namespace, ing.Name, lbName))
	return nil
}

// isOurs reports whether ing's class is one this controller serves: the
// class it names, or, naming none, the default class.
func (c *Controller) isOurs(ing *networkingv1.Ingress) bool {
	if ing.Spec.IngressClassName != nil {
		class, err := c.classLister.Get("", *ing.Spec.IngressClassName)
		return err == nil && class.Spec.Controller == ControllerName
	}
	if _, set := ing.Annotations[api.AnnotationIngressClass]; set {
		class, err := c.classLister.Get("", ing.Annotations[api.AnnotationIngressClass])
		return err == nil && class.Spec.Controller == ControllerName
	}
	for _, class := range c.classLister.List(nil) {
		if class.Spec.Controller == ControllerName && class.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true" {
			return true
		}
	}
	return false
}

// checkBackends records a Warning for each backend Service that does not
// exist, or lacks the port named.
func (c *Controller) checkBackends(ing *networkingv1.Ingress) {
	for _, b := range serviceBackends(ing) {
		svc, err := c.svcLister.Get(ing.Namespace, b.Name)
		if err != nil {
			c.recorder.Eventf(ing, corev1.EventTypeWarning, ReasonServiceNotFound, "Service %q not found", ing.Namespace+"/"+b.Name)
			continue
		}
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
			return (b.Port.Name != "" && p.Name == b.Port.Name) || (b.Port.Number != 0 && p.Port == b.Port.Number)
		}) {
			c.recorder.Eventf(ing, corev1.EventTypeWarning, ReasonServicePortNotFound, "Service %q has no port %s", ing.Namespace+"/"+b.Name, portString(b.Port))
		}
	}
}

func portString(p networkingv1.ServiceBackendPort) string {
	if p.Name != "" {
		return fmt.Sprintf("%q", p.Name)
	}
	return fmt.Sprint(p.Number)
}

// serviceBackends lists ing's Service backends: the default one, then each
// path's, in order.
func serviceBackends(ing *networkingv1.Ingress) []*networkingv1.IngressServiceBackend {
	var out []*networkingv1.IngressServiceBackend
	if b := ing.Spec.DefaultBackend; b != nil && b.Service != nil {
		out = append(out, b.Service)
	}
	for _, r := range ing.Spec.Rules {
		if r.HTTP == nil {
			continue
		}
		for _, p := range r.HTTP.Paths {
			if p.Backend.Service != nil {
				out = append(out, p.Backend.Service)
			}
		}
	}
	return out
}

// loadBalancerName is "ing" and the Ingress's UID without dashes: a DNS
// label the cloud accepts, unique to this Ingress.
func loadBalancerName(ing *networkingv1.Ingress) string {
	return "ing" + strings.ReplaceAll(string(ing.UID), "-", "")
}

// loadBalancerSpec listens for HTTP, and HTTPS when the Ingress has TLS.
// It has no backends: the simulated controller has no pods of its own for
// the load balancer to send traffic to.
func (c *Controller) loadBalancerSpec(ing *networkingv1.Ingress) sim.LoadBalancerSpec {
	listeners := []sim.Listener{{Protocol: "TCP", Port: 80}}
	if len(ing.Spec.TLS) > 0 {
		listeners = append(listeners, sim.Listener{Protocol: "TCP", Port: 443})
	}
	return sim.LoadBalancerSpec{
		Listeners: listeners,
		Backends:  []string{},
		Tags:      map[string]string{sim.TagCluster: c.cluster, sim.TagIngress: ing.Namespace + "/" + ing.Name},
	}
}
