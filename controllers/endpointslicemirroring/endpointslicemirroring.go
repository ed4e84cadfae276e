// Package endpointslicemirroring is the endpointslicemirroring controller:
// Endpoints written by hand, for a Service without a selector, are mirrored
// to EndpointSlices, so that whoever reads slices sees them too, as
// kube-controller-manager's controller of the same name does.
//
// Properties:
//
//   - Only Endpoints of an existing Service without a selector are
//     mirrored; Endpoints labelled endpointslice.kubernetes.io/skip-mirror=true
//     (the API server's own for the kubernetes Service) and leader-election
//     records are not. When any of that stops being true, the mirrored
//     slices are deleted.
//   - Mirrored slices are labelled as the Endpoints are, plus
//     kubernetes.io/service-name=<name> and
//     endpointslice.kubernetes.io/managed-by=endpointslicemirroring-controller.k8s.io,
//     carry the Endpoints' annotations (but for the trigger time and
//     kubectl's last-applied-configuration) and are controller-owned by the
//     Endpoints.
//   - Each set of ports and address type (IPv4 or IPv6, from each address)
//     is one slice; addresses are endpoints with ready true (addresses) or
//     false (notReadyAddresses). At most MaxEndpointsPerSubset addresses of
//     a subset are mirrored; addresses that are not IPs, and those past the
//     maximum, are skipped with a Warning Event on the Endpoints.
//   - A slice is written only when what it mirrors changed.
//
// Handlers only enqueue Endpoints keys ("namespace/name"), which are also
// their Service's.
package endpointslicemirroring

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/slicetracker"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's kube-controller-manager name.
const Name = "endpointslicemirroring"

// ControllerName is the value of the endpointslice.kubernetes.io/managed-by
// label on the slices this controller manages.
const ControllerName = "endpointslicemirroring-controller.k8s.io"

// DefaultMaxEndpointsPerSubset is --mirroring-max-endpoints-per-subset's
// default, and its maximum: a slice holds at most 1000 endpoints.
const DefaultMaxEndpointsPerSubset = 1000

// leaderAnnotation marks an Endpoints object used as a leader-election
// record: it is nobody's endpoints.
const leaderAnnotation = "control-plane.alpha.kubernetes.io/leader"

const staleCacheDelay = 100 * time.Millisecond

// Options is what the controller needs beyond the options every controller
// takes.
type Options struct {
	controller.Common
	// MaxEndpointsPerSubset (--mirroring-max-endpoints-per-subset, 1 to
	// 1000; 0 means 1000) is the most addresses of one subset mirrored.
	MaxEndpointsPerSubset int
	// UpdatesBatchPeriod (--mirroring-endpointslice-updates-batch-period)
	// delays the sync an Endpoints change causes; 0 syncs at once.
	UpdatesBatchPeriod time.Duration
}

// Controller mirrors Endpoints to EndpointSlices. Its queue holds
// Endpoints keys.
type Controller struct {
	slices      *client.Client[*discoveryv1.EndpointSlice]
	svcLister   informer.Lister[*corev1.Service]
	epLister    informer.Lister[*corev1.Endpoints]
	sliceLister informer.Lister[*discoveryv1.EndpointSlice]
	synced      []func() bool

	maxPerSubset int
	batchPeriod  time.Duration
	queue        *workqueue.Queue[string]
	tracker      *slicetracker.Tracker
	metrics      *metrics
	recorder     record.EventRecorder
	log          *slog.Logger
}

// New returns a controller reading services, Endpoints and slices from
// opts.Informers, with its event handlers registered. Nothing runs until
// Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	switch {
	case opts.MaxEndpointsPerSubset == 0:
		opts.MaxEndpointsPerSubset = DefaultMaxEndpointsPerSubset
	case opts.MaxEndpointsPerSubset < 1 || opts.MaxEndpointsPerSubset > DefaultMaxEndpointsPerSubset:
		return nil, fmt.Errorf("%s: max endpoints per subset must be between 1 and %d, not %d", Name, DefaultMaxEndpointsPerSubset, opts.MaxEndpointsPerSubset)
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c := &Controller{
		slices:       client.For[*discoveryv1.EndpointSlice](opts.Client),
		maxPerSubset: opts.MaxEndpointsPerSubset,
		batchPeriod:  opts.UpdatesBatchPeriod,
		queue:        controller.NewQueue[string](Name, opts.Common),
		tracker:      slicetracker.New(),
		metrics:      m,
		recorder:     opts.Recorder,
		log:          opts.Logger,
	}
	svcInformer := informer.For[*corev1.Service](opts.Informers)
	epInformer := informer.For[*corev1.Endpoints](opts.Informers)
	sliceInformer := informer.For[*discoveryv1.EndpointSlice](opts.Informers)
	c.svcLister = svcInformer.Lister()
	c.epLister = epInformer.Lister()
	c.sliceLister = sliceInformer.Lister()

	regs := []func() (*informer.HandlerRegistration, error){
		func() (*informer.HandlerRegistration, error) {
			return svcInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any, _ bool) { c.enqueue(obj) },
				UpdateFunc: func(_, obj any) { c.enqueue(obj) },
				DeleteFunc: c.enqueue,
			})
		},
		func() (*informer.HandlerRegistration, error) {
			return epInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
				AddFunc: func(obj any, _ bool) { c.endpointsChanged(nil, obj) },
				UpdateFunc: func(old, obj any) {
					c.endpointsChanged(old, obj)
				},
				DeleteFunc: func(obj any) { c.endpointsChanged(nil, obj) },
			})
		},
		func() (*informer.HandlerRegistration, error) {
			return sliceInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any, _ bool) { c.sliceChanged(obj, false) },
				UpdateFunc: func(_, obj any) { c.sliceChanged(obj, false) },
				DeleteFunc: func(obj any) { c.sliceChanged(obj, true) },
			})
		},
	}
	for _, add := range regs {
		reg, err := add()
		if err != nil {
			c.queue.ShutDown()
			return nil, fmt.Errorf("%s: %w", Name, err)
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

// endpointsChanged queues Endpoints that are, or were, to be mirrored.
func (c *Controller) endpointsChanged(oldObj, obj any) {
	if tomb, ok := obj.(informer.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	ep, ok := obj.(*corev1.Endpoints)
	if !ok {
		return
	}
	old, _ := oldObj.(*corev1.Endpoints)
	if !shouldMirror(ep) && (old == nil || !shouldMirror(old)) {
		return
	}
	c.queue.AddAfter(ep.Namespace+"/"+ep.Name, c.batchPeriod)
}

// sliceChanged queues the Endpoints of a mirrored slice when the change is
// not this controller's own write.
func (c *Controller) sliceChanged(obj any, deleted bool) {
	if tomb, ok := obj.(informer.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[discoveryv1.LabelManagedBy] != ControllerName || s.Labels[discoveryv1.LabelServiceName] == "" {
		return
	}
	news := c.tracker.ShouldSync(s)
	if deleted {
		news = c.tracker.HandleDeletion(s)
	}
	if news {
		c.queue.AddAfter(s.Namespace+"/"+s.Labels[discoveryv1.LabelServiceName], c.batchPeriod)
	}
}

// shouldMirror: Endpoints that are a leader-election record, or that ask
// not to be, are not mirrored.
func shouldMirror(ep *corev1.Endpoints) bool {
	if ep.Labels[discoveryv1.LabelSkipMirror] == "true" {
		return false
	}
	_, leader := ep.Annotations[leaderAnnotation]
	return !leader
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

// processNextWorkItem syncs one Endpoints key; controller.HandleErr decides
// what becomes of it.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	controller.HandleErr(ctx, c.log, c.queue, key, c.sync(ctx, key))
	return true
}

// sync mirrors the Endpoints key to slices, or deletes the mirrored slices
// when there is nothing (any more) to mirror: no Service, a Service with a
// selector (its slices are the endpointslice controller's), no Endpoints,
// or Endpoints that are not to be mirrored.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		c.log.Error("bad key", slog.String("key", key), slog.Any("err", err))
		return nil // a malformed key never gets better
	}
	svc, err := c.svcLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		c.tracker.DeleteService(key)
		return c.deleteMirrored(ctx, namespace, name)
	}
	if err != nil {
		return err
	}
	if svc.Spec.Selector != nil {
		return c.deleteMirrored(ctx, namespace, name)
	}
	ep, err := c.epLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		return c.deleteMirrored(ctx, namespace, name)
	}
	if err != nil {
		return err
	}
	if !shouldMirror(ep) {
		return c.deleteMirrored(ctx, namespace, name)
	}
	existing := c.mirrored(namespace, name)
	if c.tracker.Stale(key, existing) {
		return workqueue.RequeueAfter(staleCacheDelay, "EndpointSlice informer cache is out of date")
	}
	return c.reconcile(ctx, ep, existing)
}

// mirrored lists the slices this controller wrote for name, but for those
// being deleted.
func (c *Controller) mirrored(namespace, name string) []*discoveryv1.EndpointSlice {
	list := c.sliceLister.ByNamespace(namespace).List(labels.SelectorFromValidatedSet(labels.Set{
		discoveryv1.LabelServiceName: name,
		discoveryv1.LabelManagedBy:   ControllerName,
	}))
	out := list[:0:0]
	for _, s := range list {
		if s.DeletionTimestamp == nil {
			out = append(out, s)
		}
	}
	return out
}

func (c *Controller) deleteMirrored(ctx context.Context, namespace, name string) error {
	for _, s := range c.mirrored(namespace, name) {
		err := c.slices.Delete(ctx, namespace, s.Name, metav1.DeleteOptions{})
		if err != nil && !client.IsNotFound(err) {
			return fmt.Errorf("delete mirrored EndpointSlice %s: %w", s.Name, err)
		}
		c.tracker.ExpectDeletion(s)
		c.metrics.changes.WithLabelValues("delete").Inc()
		c.log.Info("nothing to mirror → delete slice", "object", namespace+"/"+name, "slice", s.Name)
	}
	return nil
}
