// Package endpointslice is the endpointslice controller: for every Service
// with a selector it keeps EndpointSlices (discovery.k8s.io/v1) listing
// the pods the selector matches, as kube-controller-manager's does.
//
// Properties:
//
//   - A service's slices are labelled kubernetes.io/service-name=<service>
//     and endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io
//     (plus the service's own labels, and service.kubernetes.io/headless
//     for a headless service), are controller-owned by the service (the
//     garbage collector deletes them with it) and are named <service>-xxxxx.
//   - A slice holds at most MaxEndpointsPerSlice endpoints of one address
//     type (one per IP family of the service) that serve one set of
//     ports: pods whose named targetPorts resolve differently are in
//     different slices.
//   - An endpoint is a pod with an IP that has not finished: its address,
//     conditions (serving = ready; terminating = being deleted; ready =
//     serving and not terminating, or always with publishNotReadyAddresses),
//     node, zone (the node's topology.kubernetes.io/zone), hostname (with
//     hostname and subdomain) and a targetRef to the pod.
//   - Changes are made with the fewest writes: slices are updated in place,
//     new endpoints fill the fullest slices first, and nothing is written
//     when nothing changed (reconciler.go). A service with no endpoints has
//     one empty slice. endpoints.kubernetes.io/last-change-trigger-time
//     says when the change being written happened.
//   - Services without a selector, and ExternalName services, are left
//     alone: their slices, if any, are someone else's (the
//     endpointslicemirroring controller's, or the user's).
//   - A sync whose cache has not seen the controller's own last writes
//     waits for it rather than writing twice (internal/slicetracker).
//
// Handlers only enqueue service keys ("namespace/name").
package endpointslice

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/slicetracker"
	"github.com/minictl/minictl/controllers/internal/triggertime"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's kube-controller-manager name: its --controllers
// name, its logger's controller attribute and its workqueue's name.
const Name = "endpointslice"

// ControllerName is the value of the endpointslice.kubernetes.io/managed-by
// label on the slices this controller manages.
const ControllerName = "endpointslice-controller.k8s.io"

// Defaults of kube-controller-manager's flags.
const (
	DefaultMaxEndpointsPerSlice = 100 // --max-endpoints-per-slice
	MaxMaxEndpointsPerSlice     = 1000
)

// staleCacheDelay is how long a sync whose cache is behind its own writes
// waits before looking again.
const staleCacheDelay = 100 * time.Millisecond

// Options is what the controller needs beyond the options every controller
// takes.
type Options struct {
	controller.Common
	// MaxEndpointsPerSlice (--max-endpoints-per-slice, 1 to 1000; 0 means
	// 100) is the most endpoints one slice holds.
	MaxEndpointsPerSlice int
	// EndpointUpdatesBatchPeriod (--endpoint-updates-batch-period) delays
	// the sync a pod change causes, so that changes of many pods are
	// written together; 0 syncs at once.
	EndpointUpdatesBatchPeriod time.Duration
}

// Controller keeps the EndpointSlices of services with selectors. Its
// queue holds service keys.
type Controller struct {
	slices      *client.Client[*discoveryv1.EndpointSlice]
	svcLister   informer.Lister[*corev1.Service]
	podLister   informer.Lister[*corev1.Pod]
	nodeLister  informer.Lister[*corev1.Node]
	sliceLister informer.Lister[*discoveryv1.EndpointSlice]
	synced      []func() bool

	maxPerSlice  int
	batchPeriod  time.Duration
	queue        *workqueue.Queue[string]
	tracker      *slicetracker.Tracker
	triggerTimes *triggertime.Tracker
	metrics      *metrics
	recorder     record.EventRecorder
	log          *slog.Logger
}

// New returns a controller reading services, pods, nodes and slices from
// opts.Informers, with its event handlers registered. Nothing runs until
// Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	switch {
	case opts.MaxEndpointsPerSlice == 0:
		opts.MaxEndpointsPerSlice = DefaultMaxEndpointsPerSlice
	case opts.MaxEndpointsPerSlice < 1 || opts.MaxEndpointsPerSlice > MaxMaxEndpointsPerSlice:
		return nil, fmt.Errorf("%s: max endpoints per slice must be between 1 and %d, not %d", Name, MaxMaxEndpointsPerSlice, opts.MaxEndpointsPerSlice)
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c := &Controller{
		slices:       client.For[*discoveryv1.EndpointSlice](opts.Client),
		maxPerSlice:  opts.MaxEndpointsPerSlice,
		batchPeriod:  opts.EndpointUpdatesBatchPeriod,
		tracker:      slicetracker.New(),
		triggerTimes: triggertime.New(),
		metrics:      m,
		recorder:     opts.Recorder,
		log:          opts.Logger,
	}

	svcInformer := informer.For[*corev1.Service](opts.Informers)
	podInformer := informer.For[*corev1.Pod](opts.Informers)
	nodeInformer := informer.For[*corev1.Node](opts.Informers)
	sliceInformer := informer.For[*discoveryv1.EndpointSlice](opts.Informers)
	c.svcLister = svcInformer.Lister()
	c.podLister = podInformer.Lister()
	c.nodeLister = nodeInformer.Lister()
	c.sliceLister = sliceInformer.Lister()

	handlers := []struct {
		inf interface {
			AddEventHandler(informer.ResourceEventHandler) (*informer.HandlerRegistration, error)
		}
		h informer.ResourceEventHandlerFuncs
	}{
		{svcInformer, informer.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any, _ bool) { c.enqueueService(obj) },
			UpdateFunc: func(_, obj any) { c.enqueueService(obj) },
			DeleteFunc: c.enqueueService,
		}},
		{podInformer, informer.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any, _ bool) { c.addPod(obj) },
			UpdateFunc: c.updatePod,
			DeleteFunc: c.deletePod,
		}},
		{nodeInformer, informer.ResourceEventHandlerFuncs{}},
		{sliceInformer, informer.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any, _ bool) { c.sliceChanged(obj) },
			UpdateFunc: c.updateSlice,
			DeleteFunc: c.deleteSlice,
		}},
	}
	c.queue = controller.NewQueue[string](Name, opts.Common)
	for _, h := range handlers {
		reg, err := h.inf.AddEventHandler(h.h)
		if err != nil {
			c.queue.ShutDown()
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return c, nil
}

func (c *Controller) enqueueService(obj any) {
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

// enqueueServicesOf queues, after the batch period, every service of
// namespace whose selector matches podLabels or oldLabels.
func (c *Controller) enqueueServicesOf(namespace string, podLabels, oldLabels map[string]string) {
	for _, svc := range c.svcLister.ByNamespace(namespace).List(nil) {
		if svc.Spec.Selector == nil {
			continue
		}
		sel := labels.SelectorFromValidatedSet(svc.Spec.Selector)
		if sel.Matches(labels.Set(podLabels)) || (oldLabels != nil && sel.Matches(labels.Set(oldLabels))) {
			c.queue.AddAfter(svc.Namespace+"/"+svc.Name, c.batchPeriod)
		}
	}
}

// endpointChanged reports whether a pod update can change an endpoint:
// its labels (membership), hostname, IPs, node, readiness, ports, or
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

// managedSlice returns obj as a slice this controller manages.
func managedSlice(obj any) (*discoveryv1.EndpointSlice, bool) {
	if tomb, ok := obj.(informer.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[discoveryv1.LabelManagedBy] != ControllerName || s.Labels[discoveryv1.LabelServiceName] == "" {
		return nil, false
	}
	return s, true
}

// sliceChanged queues the service of a managed slice when the change is
// not this controller's own write.
func (c *Controller) sliceChanged(obj any) {
	if s, ok := managedSlice(obj); ok && c.tracker.ShouldSync(s) {
		c.queue.Add(s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName])
	}
}

// updateSlice: a slice whose labels moved it away from a service (or away
// from this controller) leaves that service short; both are looked at.
func (c *Controller) updateSlice(oldObj, newObj any) {
	old, ok1 := oldObj.(*discoveryv1.EndpointSlice)
	cur, ok2 := newObj.(*discoveryv1.EndpointSlice)
	if !ok1 || !ok2 {
		return
	}
	if old.Labels[discoveryv1.LabelServiceName] != cur.Labels[discoveryv1.LabelServiceName] ||
		old.Labels[discoveryv1.LabelManagedBy] != cur.Labels[discoveryv1.LabelManagedBy] {
		if _, ok := managedSlice(old); ok {
			c.queue.Add(old.Namespace + "/" + old.Labels[discoveryv1.LabelServiceName])
		}
		if _, ok := managedSlice(cur); ok {
			c.queue.Add(cur.Namespace + "/" + cur.Labels[discoveryv1.LabelServiceName])
		}
		return
	}
	c.sliceChanged(cur)
}

// deleteSlice: a slice deleted by someone else is written again.
func (c *Controller) deleteSlice(obj any) {
	if s, ok := managedSlice(obj); ok && c.tracker.HandleDeletion(s) {
		c.queue.Add(s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName])
	}
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

// processNextWorkItem syncs one service, and leaves it to
// controller.HandleErr to decide whether to retry it, forget it or look
// again later. It returns false once the queue is shut down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	err := c.sync(ctx, key)
	result := "success"
	if err != nil {
		result = "error"
	}
	c.metrics.syncs.WithLabelValues(result).Inc()
	controller.HandleErr(ctx, c.log, c.queue, key, err)
	return true
}

// sync makes the slices of service key match the pods its selector
// matches. A service that is gone needs nothing: its slices go with it.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		c.log.Error("bad key", slog.String("key", key), slog.Any("err", err))
		return nil // a malformed key never gets better
	}
	svc, err := c.svcLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		c.triggerTimes.Drop(key)
		c.tracker.DeleteService(key)
		return nil // the garbage collector deletes its slices
	}
	if err != nil {
		return err
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil // an ExternalName service points at a name, not at pods
	}
	if svc.Spec.Selector == nil {
		return nil // no selector: its slices are someone else's to write
	}

	pods := c.podLister.ByNamespace(namespace).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	existing := c.sliceLister.ByNamespace(namespace).List(labels.SelectorFromValidatedSet(labels.Set{
		discoveryv1.LabelServiceName: name,
		discoveryv1.LabelManagedBy:   ControllerName,
	}))
	existing = slices.DeleteFunc(existing, func(s *discoveryv1.EndpointSlice) bool { return s.DeletionTimestamp != nil })
	slices.SortFunc(existing, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	if c.tracker.Stale(key, existing) {
		return workqueue.RequeueAfter(staleCacheDelay, "EndpointSlice informer cache is out of date")
	}

	triggerTime, seen := c.triggerTimes.Compute(key, svc, pods)
	if err := c.reconcile(ctx, svc, pods, existing, triggerTime); err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices",
			"Error updating Endpoint Slices for Service %s/%s: %v", namespace, name, err)
		return err
	}
	c.triggerTimes.Remember(key, seen)
	return nil
}
