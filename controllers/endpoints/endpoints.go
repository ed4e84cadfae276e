// Package endpoints is the endpoint controller: for every Service with a
// selector it keeps an Endpoints object of the same name listing the
// addresses and ports of the pods the selector matches, as
// kube-controller-manager's endpoint controller does.
//
// Properties:
//
//   - A pod is an endpoint when it has an IP, has not finished, and is not
//     being deleted (a terminating pod stays only when the service sets
//     publishNotReadyAddresses). Ready pods are listed under addresses,
//     the others under notReadyAddresses, unless the service publishes
//     not-ready addresses, which lists them all as addresses.
//   - Each address carries the pod's IP, node, and a targetRef to the pod.
//   - A service port's targetPort is resolved per pod: a number as it is, a
//     name through the pod's container ports. A pod that does not declare
//     the name is left out of that port only. Addresses that serve the same
//     ports are packed into one subset; subsets, addresses and ports are
//     sorted, so the same pods always give the same object.
//   - The Endpoints object is written only when its subsets or labels
//     (the service's, plus service.kubernetes.io/headless for a headless
//     service) differ; endpoints.kubernetes.io/last-change-trigger-time
//     says when the change that caused a write happened.
//   - Services without a selector, and ExternalName services, are left
//     alone: their Endpoints, if any, are the user's. When a service is
//     deleted its Endpoints are deleted, whoever wrote them.
//   - At start, every Endpoints object whose service is gone is deleted
//     (except leader-election records), as upstream does; an Endpoints
//     object deleted by someone else is written again.
//
// Handlers only enqueue service keys ("namespace/name"): a pod change
// enqueues every service of its namespace whose selector matches the
// pod's old or new labels.
package endpoints

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/triggertime"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// leaderAnnotation marks an Endpoints object used as a leader-election
// record (the old client-go lock); such objects have no service and are
// never cleaned up.
const leaderAnnotation = "control-plane.alpha.kubernetes.io/leader"

// Name is the controller's kube-controller-manager name: its --controllers
// name, its logger's controller attribute and its workqueue's name.
const Name = "endpoint"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required); it has no knobs of its own. Its Recorder
// gets a Warning on a service whose Endpoints cannot be written.
type Options struct {
	controller.Common
}

// Controller keeps the Endpoints of services with selectors. Its queue
// holds service keys.
type Controller struct {
	endpoints *client.Client[*corev1.Endpoints]
	services  *client.Client[*corev1.Service]
	svcLister informer.Lister[*corev1.Service]
	podLister informer.Lister[*corev1.Pod]
	epLister  informer.Lister[*corev1.Endpoints]
	synced    []func() bool

	queue        *workqueue.Queue[string]
	triggerTimes *triggertime.Tracker
	recorder     record.EventRecorder
	log          *slog.Logger
}

// New returns a controller reading services, pods and Endpoints from
// opts.Informers, with its event handlers registered. Nothing runs until
// Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	c := &Controller{
		endpoints:    client.For[*corev1.Endpoints](opts.Client),
		services:     client.For[*corev1.Service](opts.Client),
		triggerTimes: triggertime.New(),
		queue:        controller.NewQueue[string](Name, opts.Common),
		recorder:     opts.Recorder,
		log:          opts.Logger,
	}

	svcInformer := informer.For[*corev1.Service](opts.Informers)
	podInformer := informer.For[*corev1.Pod](opts.Informers)
	epInformer := informer.For[*corev1.Endpoints](opts.Informers)
	c.svcLister = svcInformer.Lister()
	c.podLister = podInformer.Lister()
	c.epLister = epInformer.Lister()

	svcReg, err := svcInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueue(obj) },
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("endpoints: %w", err)
	}
	podReg, err := podInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.addPod(obj) },
		UpdateFunc: c.updatePod,
		DeleteFunc: c.deletePod,
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("endpoints: %w", err)
	}
	epReg, err := epInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		// Deleted by someone else: write it again if its service wants it.
		DeleteFunc: c.enqueue,
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("endpoints: %w", err)
	}
	c.synced = []func() bool{svcReg.HasSynced, podReg.HasSynced, epReg.HasSynced}
	return c, nil
}

// enqueue queues the key of a service, or of an Endpoints object (the
// same key as its service's).
func (c *Controller) enqueue(obj any) {
	if tomb, ok := obj.(informer.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(api.Object); ok {
		c.queue.Add(o.GetNamespace() + "/" + o.GetName())
	}
}

func (c *Controller) addPod(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok {
		c.enqueueServicesOf(pod.Namespace, pod.Labels, nil)
	}
}

func (c *Controller) updatePod(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return // a resync: nothing about the pod changed
	}
	if !endpointChanged(old, cur) {
		return
	}
	c.enqueueServicesOf(cur.Namespace, cur.Labels, old.Labels)
}

func (c *Controller) deletePod(obj any) {
	if tomb, ok := obj.(informer.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		c.enqueueServicesOf(pod.Namespace, pod.Labels, nil)
	}
}

// enqueueServicesOf queues every service of namespace whose selector
// matches podLabels or oldLabels.
func (c *Controller) enqueueServicesOf(namespace string, podLabels, oldLabels map[string]string) {
	for _, svc := range c.svcLister.ByNamespace(namespace).List(nil) {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromValidatedSet(svc.Spec.Selector)
		if sel.Matches(labels.Set(podLabels)) || (oldLabels != nil && sel.Matches(labels.Set(oldLabels))) {
			c.queue.Add(svc.Namespace + "/" + svc.Name)
		}
	}
}

// endpointChanged reports whether a pod update can change any service's
// endpoints: its labels (membership), hostname, IPs, node, readiness, or
// whether it is being deleted or has finished.
func endpointChanged(old, cur *corev1.Pod) bool {
	return !maps.Equal(old.Labels, cur.Labels) ||
		old.Spec.Hostname != cur.Spec.Hostname || old.Spec.Subdomain != cur.Spec.Subdomain ||
		old.Spec.NodeName != cur.Spec.NodeName ||
		old.Status.PodIP != cur.Status.PodIP || !slices.Equal(old.Status.PodIPs, cur.Status.PodIPs) ||
		api.PodIsReady(old) != api.PodIsReady(cur) ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		api.IsPodTerminal(old) != api.IsPodTerminal(cur)
}

// Run waits for the caches, queues every existing Endpoints object (those
// whose service is gone are deleted), runs workers until ctx is done, then
// shuts the queue down and waits for the workers.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	c.log.Info("starting", slog.Int("workers", workers))
	if !informer.WaitForCacheSync(ctx, c.synced...) {
		c.log.Info("stopped before the caches synced")
		return
	}
	c.queueLeftovers()
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

// queueLeftovers queues the key of every Endpoints object, so that those
// left behind by a service deleted while no controller ran are deleted.
// In steady state a service's deletion does that itself.
func (c *Controller) queueLeftovers() {
	for _, ep := range c.epLister.List(nil) {
		if _, ok := ep.Annotations[leaderAnnotation]; ok {
			continue
		}
		c.queue.Add(ep.Namespace + "/" + ep.Name)
	}
}

// processNextWorkItem syncs one service, and leaves it to
// controller.HandleErr to decide whether to retry it, forget it or look
// again later. It returns false once the queue is shut down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	controller.HandleErr(ctx, c.log, c.queue, key, c.sync(ctx, key))
	return true
}

// sync makes the Endpoints of service key match the pods its selector
// matches, or deletes them when the service is gone.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		c.log.Error("bad key", slog.String("key", key), slog.Any("err", err))
		return nil // a malformed key never gets better
	}
	svc, err := c.svcLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		c.triggerTimes.Drop(key)
		return c.deleteEndpoints(ctx, key, namespace, name)
	}
	if err != nil {
		return err
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil // an ExternalName service points at a name, not at pods
	}
	if len(svc.Spec.Selector) == 0 {
		return nil // no selector: its Endpoints are the user's to write
	}

	pods := c.podLister.ByNamespace(namespace).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	triggerTime, seen := c.triggerTimes.Compute(key, svc, pods)
	subsets, ready, notReady := desiredSubsets(svc, pods)
	wantLabels := endpointsLabels(svc)

	cur, err := c.epLister.Get(namespace, name)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if exists && apiequality.Semantic.DeepEqual(cur.Subsets, subsets) && apiequality.Semantic.DeepEqual(cur.Labels, wantLabels) {
		c.log.Debug(fmt.Sprintf("%d ready, %d not ready → unchanged", ready, notReady),
			slog.String("object", key), slog.Int("ready", ready), slog.Int("notReady", notReady))
		c.triggerTimes.Remember(key, seen)
		return nil
	}

	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	action := "create"
	if exists {
		ep, action = cur.DeepCopy(), "update"
	}
	ep.Subsets = subsets
	ep.Labels = wantLabels
	if triggerTime.IsZero() {
		delete(ep.Annotations, corev1.EndpointsLastChangeTriggerTime)
	} else {
		if ep.Annotations == nil {
			ep.Annotations = map[string]string{}
		}
		ep.Annotations[corev1.EndpointsLastChangeTriggerTime] = triggerTime.UTC().Format(time.RFC3339Nano)
	}

	c.log.Info(fmt.Sprintf("%d ready, %d not ready → %s", ready, notReady, action),
		slog.String("object", key), slog.Int("ready", ready), slog.Int("notReady", notReady))
	if exists {
		_, err = c.endpoints.Update(ctx, ep)
	} else {
		_, err = c.endpoints.Create(ctx, ep)
	}
	switch {
	case err == nil:
		c.triggerTimes.Remember(key, seen)
		return nil
	case !exists && client.IsForbidden(err):
		// The namespace is terminating: nothing may be created in it, and
		// its content is on its way out.
		c.log.Info("namespace is terminating → skip", slog.String("object", key))
		return nil
	case client.IsConflict(err), client.IsAlreadyExists(err):
		// Our cache was behind; the retry will see the object as it is.
	case !exists:
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToCreateEndpoint", "Failed to create endpoint for service %s: %v", key, err)
	default:
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToUpdateEndpoint", "Failed to update endpoint %s: %v", key, err)
	}
	return fmt.Errorf("%s endpoints: %w", action, err)
}

// deleteEndpoints deletes the Endpoints of a service that is gone. It asks
// the server rather than the cache, both whether the service is really
// gone (the service informer may lag the Endpoints informer that woke us)
// and to delete an Endpoints object the cache may not have seen yet.
func (c *Controller) deleteEndpoints(ctx context.Context, key, namespace, name string) error {
	if _, err := c.services.Get(ctx, namespace, name); err == nil {
		return nil // the service exists; our cache is behind and its event will come
	} else if !client.IsNotFound(err) {
		return fmt.Errorf("check service: %w", err)
	}
	err := c.endpoints.Delete(ctx, namespace, name, metav1.DeleteOptions{})
	if client.IsNotFound(err) {
		return nil // nothing to clean up
	}
	if err != nil {
		return fmt.Errorf("delete endpoints: %w", err)
	}
	c.log.Info("service gone → delete", slog.String("object", key))
	return nil
}

// endpointsLabels are the service's labels, plus
// service.kubernetes.io/headless on a headless service's Endpoints.
func endpointsLabels(svc *corev1.Service) map[string]string {
	out := maps.Clone(svc.Labels)
	if out != nil {
		delete(out, corev1.IsHeadlessService)
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		if out == nil {
			out = map[string]string{}
		}
		out[corev1.IsHeadlessService] = ""
	}
	return out
}
