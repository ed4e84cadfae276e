// Package service is the cloud controller manager's service controller: it
// gives every Service of type LoadBalancer a load balancer in the cloud,
// keeps the load balancer's backends the cluster's nodes, and deletes it
// when the Service no longer wants it, as kube's service controller does.
//
// Properties:
//
//   - A Service is the controller's when its type is LoadBalancer and it
//     sets no spec.loadBalancerClass (a class names another
//     implementation, which the controller leaves alone).
//   - The finalizer service.kubernetes.io/load-balancer-cleanup is on the
//     Service before its load balancer is created, and comes off only once
//     the load balancer is deleted: a Service cannot vanish and leave a load
//     balancer behind.
//   - The load balancer's backends are the nodes that are not being
//     deleted, not labelled node.kubernetes.io/exclude-from-external-load-balancers,
//     and not tainted ToBeDeletedByClusterAutoscaler. A node's readiness
//     does not count, as in kube since its load balancer node set became
//     stable: a NotReady node stays a backend, and the cloud's health
//     checks decide whether traffic reaches it.
//   - What the cloud reports is published in status.loadBalancer (through
//     /status), and written only when it changes.
//   - When the Service is deleted, or its type changes away from
//     LoadBalancer, the load balancer is deleted, status.loadBalancer is
//     cleared and the finalizer removed.
//   - A cloud that fails delays the Service, it never loses its load
//     balancer: the sync is retried with kube's back-off (5s doubling to
//     300s), with a SyncLoadBalancerFailed Warning each time.
//
// Handlers only enqueue keys: Service keys on the service queue, and a
// single key on the node queue whenever the node set may have changed;
// the node queue's worker updates the backends of every load balancer
// whose node set did change.
package service

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/cloud"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's cloud-controller-manager name: its
// --controllers name, its logger's controller attribute and its service
// queue's name.
const Name = "service"

// LoadBalancerCleanupFinalizer holds a Service until its load balancer is
// deleted.
const LoadBalancerCleanupFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// ToBeDeletedTaint is the taint the cluster autoscaler puts on a node it is
// about to remove; such a node is no load balancer backend.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// Kube's retry back-off for a Service whose load balancer could not be
// synced.
const (
	DefaultMinRetryDelay = 5 * time.Second
	DefaultMaxRetryDelay = 300 * time.Second
)

// nodeSyncKey is the only key of the node queue: a node sync looks at every
// load balancer, so one pending sync stands for any number of node events.
const nodeSyncKey = "nodes"

// Options is what the controller needs beyond the options every controller
// takes.
type Options struct {
	controller.Common
	// Cloud is the provider; the controller needs its LoadBalancer.
	Cloud cloud.Interface
	// ClusterName names the cluster's load balancers in the cloud.
	ClusterName string
	// MinRetryDelay and MaxRetryDelay bound the back-off of a failing
	// Service; 0: kube's 5s and 300s.
	MinRetryDelay, MaxRetryDelay time.Duration
}

// Controller keeps the load balancers of LoadBalancer Services.
type Controller struct {
	balancer    cloud.LoadBalancer
	clusterName string
	services    *client.Client[*corev1.Service]
	svcLister   informer.Lister[*corev1.Service]
	nodeLister  informer.Lister[*corev1.Node]
	synced      []func() bool

	serviceQueue *workqueue.Queue[string]
	nodeQueue    *workqueue.Queue[string]
	recorder     record.EventRecorder
	log          *slog.Logger
	clock        clock.Clock
	metrics      *metrics

	// mu guards synced: for each Service whose load balancer the
	// controller ensured, the Service as it was then and the backends it
	// was given. The node sync compares the node set with it; a Service
	// that vanishes without its finalizer is cleaned up from it.
	mu         sync.Mutex
	lastSynced map[string]syncedService
}

type syncedService struct {
	svc   *corev1.Service
	nodes []*corev1.Node
}

// New returns a controller reading Services and Nodes from opts.Informers,
// with its event handlers registered. It fails if the cloud has no load
// balancers, as kube's does.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	if opts.Cloud == nil {
		return nil, fmt.Errorf("%s: no cloud provider, services of type LoadBalancer would fail", Name)
	}
	balancer, ok := opts.Cloud.LoadBalancer()
	if !ok {
		return nil, fmt.Errorf("%s: the cloud provider does not support external load balancers", Name)
	}
	minDelay, maxDelay := opts.MinRetryDelay, opts.MaxRetryDelay
	if minDelay <= 0 {
		minDelay = DefaultMinRetryDelay
	}
	if maxDelay <= 0 {
		maxDelay = DefaultMaxRetryDelay
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		balancer: balancer, clusterName: opts.ClusterName,
		services: client.For[*corev1.Service](opts.Client),
		serviceQueue: controller.NewQueueWithRateLimiter[string](Name, opts.Common,
			workqueue.NewItemExponentialFailureRateLimiter(minDelay, maxDelay)),
		nodeQueue: controller.NewQueueWithRateLimiter[string]("node", opts.Common,
			workqueue.NewItemExponentialFailureRateLimiter(minDelay, maxDelay)),
		recorder: opts.Recorder, log: opts.Logger, clock: opts.Clock, metrics: m,
		lastSynced: map[string]syncedService{},
	}
	if c.clusterName == "" {
		c.clusterName = cloud.DefaultClusterName
	}
	svcInformer := informer.For[*corev1.Service](opts.Informers)
	nodeInformer := informer.For[*corev1.Node](opts.Informers)
	c.svcLister = svcInformer.Lister()
	c.nodeLister = nodeInformer.Lister()
	svcReg, err := svcInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc: func(obj any, _ bool) {
			if svc, ok := obj.(*corev1.Service); ok && (wantsLoadBalancer(svc) || needsCleanup(svc)) {
				c.enqueue(svc)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*corev1.Service)
			cur, ok2 := newObj.(*corev1.Service)
			if ok1 && ok2 && (needsUpdate(old, cur) || needsCleanup(cur)) {
				c.enqueue(cur)
			}
		},
		// A deletion comes through the update that sets the
		// deletionTimestamp, while the finalizer holds the Service; a
		// Service that had none is cleaned up from lastSynced.
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(informer.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if svc, ok := obj.(*corev1.Service); ok {
				c.enqueue(svc)
			}
		},
	})
	if err != nil {
		c.shutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	nodeReg, err := nodeInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(any, bool) { c.nodeQueue.Add(nodeSyncKey) },
		DeleteFunc: func(any) { c.nodeQueue.Add(nodeSyncKey) },
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*corev1.Node)
			cur, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 && shouldSyncUpdatedNode(old, cur) {
				c.nodeQueue.Add(nodeSyncKey)
			}
		},
	})
	if err != nil {
		c.shutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c.synced = []func() bool{svcReg.HasSynced, nodeReg.HasSynced}
	return c, nil
}

func (c *Controller) enqueue(svc *corev1.Service) {
	c.serviceQueue.Add(svc.Namespace + "/" + svc.Name)
}

func (c *Controller) shutDown() {
	c.serviceQueue.ShutDown()
	c.nodeQueue.ShutDown()
}

// Run waits for the caches, runs workers service workers and one node
// worker until ctx is done, then shuts the queues down and waits for them.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.shutDown()
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
	// One node worker: node syncs never overlap.
	wg.Go(func() {
		for c.processNextNodeItem(ctx) {
		}
	})
	<-ctx.Done()
	c.shutDown()
	wg.Wait()
	c.log.Info("stopped")
}

// processNextWorkItem syncs one Service, and leaves it to
// controller.HandleErr to decide whether to retry it. It returns false once
// the queue is shut down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.serviceQueue.Get()
	if shutdown {
		return false
	}
	defer c.serviceQueue.Done(key)
	controller.HandleErr(ctx, c.log, c.serviceQueue, key, c.sync(ctx, key))
	return true
}

// processNextNodeItem updates every load balancer whose node set changed;
// those the cloud failed to update go back on the service queue, whose
// sync ensures them in full and backs off.
func (c *Controller) processNextNodeItem(ctx context.Context) bool {
	key, shutdown := c.nodeQueue.Get()
	if shutdown {
		return false
	}
	defer c.nodeQueue.Done(key)
	for _, retry := range c.syncNodes(ctx) {
		c.serviceQueue.Add(retry)
	}
	controller.HandleErr(ctx, c.log, c.nodeQueue, key, nil)
	return true
}

// sync makes the load balancer of Service key what the Service wants: one
// that exists, with the current backends, when it is of type LoadBalancer;
// none otherwise, and none once it is being deleted.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		c.log.Error("bad key", slog.String("key", key), slog.Any("err", err))
		return nil // a malformed key never gets better
	}
	svc, err := c.svcLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		return c.cleanupVanished(ctx, key)
	}
	if err != nil {
		return err
	}
	svc = svc.DeepCopy()
	if prev, ok := c.lastSyncedOf(key); ok && prev.svc.UID != svc.UID {
		// Deleted and created again, the old one without a finalizer:
		// its load balancer goes first.
		if err := c.deleteVanished(ctx, prev.svc); err != nil {
			return err
		}
	}

	if !wantsLoadBalancer(svc) || needsCleanup(svc) {
		err = c.deleteLoadBalancer(ctx, key, svc)
	} else {
		err = c.ensureLoadBalancer(ctx, key, svc)
	}
	if err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "SyncLoadBalancerFailed", "Error syncing load balancer: %v", err)
		return err
	}
	return nil
}

// ensureLoadBalancer adds the finalizer, creates or updates the load
// balancer with the current backends, and publishes its status.
func (c *Controller) ensureLoadBalancer(ctx context.Context, key string, svc *corev1.Service) error {
	c.log.Info("ensuring load balancer", slog.String("object", key))
	c.recorder.Event(svc, corev1.EventTypeNormal, "EnsuringLoadBalancer", "Ensuring load balancer")
	if err := c.setFinalizer(ctx, svc, true); err != nil {
		return fmt.Errorf("failed to add load balancer cleanup finalizer: %w", err)
	}
	nodes := c.backends()
	if len(nodes) == 0 {
		c.recorder.Event(svc, corev1.EventTypeWarning, "UnAvailableLoadBalancer", "There are no available nodes for LoadBalancer")
	}
	c.remember(key, svc, nodes)
	c.metrics.syncs.Inc()
	status, err := c.balancer.EnsureLoadBalancer(ctx, c.clusterName, svc, nodes)
	if err != nil {
		return fmt.Errorf("failed to ensure load balancer: %w", err)
	}
	if status == nil {
		return fmt.Errorf("service status returned by EnsureLoadBalancer is nil")
	}
	c.recorder.Event(svc, corev1.EventTypeNormal, "EnsuredLoadBalancer", "Ensured load balancer")
	c.log.Info(fmt.Sprintf("load balancer ensured with %d backends → ingress %s", len(nodes), ingressString(status)),
		slog.String("object", key))
	return c.patchStatus(ctx, svc, status)
}

// deleteLoadBalancer deletes the load balancer if the cloud has one, clears
// status.loadBalancer and removes the finalizer.
func (c *Controller) deleteLoadBalancer(ctx context.Context, key string, svc *corev1.Service) error {
	_, exists, err := c.balancer.GetLoadBalancer(ctx, c.clusterName, svc)
	if err != nil {
		return fmt.Errorf("failed to check if load balancer exists before cleanup: %w", err)
	}
	if exists {
		c.log.Info("deleting load balancer", slog.String("object", key))
		c.recorder.Event(svc, corev1.EventTypeNormal, "DeletingLoadBalancer", "Deleting load balancer")
		if err := c.balancer.EnsureLoadBalancerDeleted(ctx, c.clusterName, svc); err != nil {
			return fmt.Errorf("failed to delete load balancer: %w", err)
		}
	}
	if err := c.setFinalizer(ctx, svc, false); err != nil {
		return fmt.Errorf("failed to remove load balancer cleanup finalizer: %w", err)
	}
	c.recorder.Event(svc, corev1.EventTypeNormal, "DeletedLoadBalancer", "Deleted load balancer")
	c.forget(key)
	// The Service may be gone now that its finalizer is: nothing to clear.
	if err := c.patchStatus(ctx, svc, &corev1.LoadBalancerStatus{}); err != nil && !client.IsNotFound(err) {
		return err
	}
	return nil
}

// cleanupVanished deletes the load balancer of a Service deleted without
// the finalizer (removed by hand, or created before the controller ran),
// from what the controller remembers of it.
func (c *Controller) cleanupVanished(ctx context.Context, key string) error {
	prev, ok := c.lastSyncedOf(key)
	if !ok {
		return nil // no load balancer made for it, or already deleted
	}
	if err := c.deleteVanished(ctx, prev.svc); err != nil {
		return err
	}
	c.forget(key)
	return nil
}

func (c *Controller) deleteVanished(ctx context.Context, svc *corev1.Service) error {
	if !wantsLoadBalancer(svc) {
		return nil
	}
	c.recorder.Event(svc, corev1.EventTypeNormal, "DeletingLoadBalancer", "Deleting load balancer")
	if err := c.balancer.EnsureLoadBalancerDeleted(ctx, c.clusterName, svc); err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "DeleteLoadBalancerFailed", "Error deleting load balancer: %v", err)
		return err
	}
	c.recorder.Event(svc, corev1.EventTypeNormal, "DeletedLoadBalancer", "Deleted load balancer")
	return nil
}

// syncNodes gives every remembered load balancer the current backends if
// they differ from those it was last given, and returns the keys of the
// Services the cloud failed to update.
func (c *Controller) syncNodes(ctx context.Context) []string {
	start := c.clock.Now()
	defer func() { c.metrics.nodeSyncLatency.Observe(c.clock.Now().Sub(start).Seconds()) }()
	nodes := c.backends()
	c.mu.Lock()
	var stale []syncedService
	for key, s := range c.lastSynced {
		if !sameNodes(s.nodes, nodes) {
			stale = append(stale, s)
			// Remembered before the update is tried: a failure goes to
			// the service queue, whose sync ensures it in full.
			c.lastSynced[key] = syncedService{svc: s.svc, nodes: nodes}
		}
	}
	c.mu.Unlock()

	var retry []string
	for _, s := range stale {
		key := s.svc.Namespace + "/" + s.svc.Name
		if err := c.updateBackends(ctx, key, s.svc, nodes); err != nil {
			c.metrics.nodeSyncErrors.Inc()
			c.log.Warn("updating backends failed → retry through the service", slog.String("object", key), slog.Any("err", err))
			retry = append(retry, key)
		}
	}
	return retry
}

// updateBackends points the Service's load balancer at nodes.
func (c *Controller) updateBackends(ctx context.Context, key string, svc *corev1.Service, nodes []*corev1.Node) error {
	start := c.clock.Now()
	defer func() { c.metrics.updateHostLatency.Observe(c.clock.Now().Sub(start).Seconds()) }()
	c.metrics.syncs.Inc()
	c.log.Info(fmt.Sprintf("updating backends → %d nodes %v", len(nodes), nodeNames(nodes)), slog.String("object", key))
	err := c.balancer.UpdateLoadBalancer(ctx, c.clusterName, svc, nodes)
	if err == nil {
		if len(nodes) == 0 {
			c.recorder.Event(svc, corev1.EventTypeWarning, "UnAvailableLoadBalancer", "There are no available nodes for LoadBalancer")
		} else {
			c.recorder.Event(svc, corev1.EventTypeNormal, "UpdatedLoadBalancer", "Updated load balancer with new hosts")
		}
		return nil
	}
	// Only an error if the load balancer still exists.
	if _, exists, gerr := c.balancer.GetLoadBalancer(ctx, c.clusterName, svc); gerr == nil && !exists {
		return nil
	}
	c.recorder.Eventf(svc, corev1.EventTypeWarning, "UpdateLoadBalancerFailed",
		"Error updating load balancer with new hosts %v [node names limited, total number of nodes: %d], error: %v",
		nodeNames(nodes), len(nodes), err)
	return err
}

// backends are the nodes a load balancer forwards to, sorted by name.
func (c *Controller) backends() []*corev1.Node {
	var out []*corev1.Node
	for _, n := range c.nodeLister.List(nil) {
		if n.DeletionTimestamp == nil && nodeIncluded(n) && !hasTaint(n, ToBeDeletedTaint) {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Node) int { return cmpString(a.Name, b.Name) })
	return out
}

// setFinalizer adds (want) or removes the cleanup finalizer, with a merge
// patch that carries the resourceVersion: a concurrent change is a
// conflict, retried from the newer Service.
func (c *Controller) setFinalizer(ctx context.Context, svc *corev1.Service, want bool) error {
	has := slices.Contains(svc.Finalizers, LoadBalancerCleanupFinalizer)
	if has == want {
		return nil
	}
	finalizers := slices.DeleteFunc(slices.Clone(svc.Finalizers), func(f string) bool { return f == LoadBalancerCleanupFinalizer })
	if want {
		finalizers = append(finalizers, LoadBalancerCleanupFinalizer)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": finalizers, "resourceVersion": svc.ResourceVersion,
	}})
	if err != nil {
		return err
	}
	updated, err := c.services.Patch(ctx, svc.Namespace, svc.Name, types.MergePatchType, patch)
	if err != nil {
		return err
	}
	svc.Finalizers, svc.ResourceVersion = updated.Finalizers, updated.ResourceVersion
	return nil
}

// patchStatus writes status into the Service's status.loadBalancer, unless
// it is there already.
func (c *Controller) patchStatus(ctx context.Context, svc *corev1.Service, status *corev1.LoadBalancerStatus) error {
	if apiequality.Semantic.DeepEqual(&svc.Status.LoadBalancer, status) {
		return nil
	}
	// A merge patch replaces the ingress list whole; null clears it.
	var ingress any = status.Ingress
	if len(status.Ingress) == 0 {
		ingress = nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"loadBalancer": map[string]any{"ingress": ingress}}})
	if err != nil {
		return err
	}
	if _, err := c.services.Patch(ctx, svc.Namespace, svc.Name, types.MergePatchType, patch, "status"); err != nil {
		return fmt.Errorf("failed to update load balancer status: %w", err)
	}
	return nil
}

func (c *Controller) remember(key string, svc *corev1.Service, nodes []*corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastSynced[key] = syncedService{svc: svc, nodes: nodes}
}

func (c *Controller) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.lastSynced, key)
}

func (c *Controller) lastSyncedOf(key string) (syncedService, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.lastSynced[key]
	return s, ok
}

// wantsLoadBalancer: type LoadBalancer and no class naming another
// implementation.
func wantsLoadBalancer(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil
}

// needsCleanup: the Service holds the finalizer but is being deleted or no
// longer of type LoadBalancer.
func needsCleanup(svc *corev1.Service) bool {
	if !slices.Contains(svc.Finalizers, LoadBalancerCleanupFinalizer) {
		return false
	}
	return svc.DeletionTimestamp != nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer
}

// needsUpdate reports whether a Service change concerns its load balancer:
// kube's list of what a load balancer is made from.
func needsUpdate(old, cur *corev1.Service) bool {
	if !wantsLoadBalancer(old) && !wantsLoadBalancer(cur) {
		return false
	}
	if wantsLoadBalancer(old) != wantsLoadBalancer(cur) {
		return true
	}
	return !slices.Equal(old.Spec.LoadBalancerSourceRanges, cur.Spec.LoadBalancerSourceRanges) ||
		!apiequality.Semantic.DeepEqual(old.Spec.Ports, cur.Spec.Ports) ||
		old.Spec.SessionAffinity != cur.Spec.SessionAffinity ||
		old.Spec.LoadBalancerIP != cur.Spec.LoadBalancerIP ||
		!slices.Equal(old.Spec.ExternalIPs, cur.Spec.ExternalIPs) ||
		!maps.Equal(old.Annotations, cur.Annotations) ||
		old.UID != cur.UID ||
		old.Spec.ExternalTrafficPolicy != cur.Spec.ExternalTrafficPolicy ||
		old.Spec.HealthCheckNodePort != cur.Spec.HealthCheckNodePort ||
		len(old.Spec.IPFamilies) != len(cur.Spec.IPFamilies)
}

// shouldSyncUpdatedNode: a node update changes the backends only when its
// exclusion label or its provider ID changes; readiness does not count.
func shouldSyncUpdatedNode(old, cur *corev1.Node) bool {
	return nodeIncluded(old) != nodeIncluded(cur) || old.Spec.ProviderID != cur.Spec.ProviderID ||
		hasTaint(old, ToBeDeletedTaint) != hasTaint(cur, ToBeDeletedTaint) ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil)
}

// nodeIncluded: not labelled for exclusion from load balancers. A label
// whose value is not a boolean excludes, as in kube.
func nodeIncluded(n *corev1.Node) bool {
	v, ok := n.Labels[corev1.LabelNodeExcludeBalancers]
	if !ok {
		return true
	}
	exclude, err := strconv.ParseBool(v)
	return err == nil && !exclude
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// sameNodes compares two backend sets by what a load balancer is made of:
// node names and provider IDs.
func sameNodes(a, b []*corev1.Node) bool {
	distill := func(nodes []*corev1.Node) map[string]string {
		m := make(map[string]string, len(nodes))
		for _, n := range nodes {
			m[n.Name] = n.Spec.ProviderID
		}
		return m
	}
	return maps.Equal(distill(a), distill(b))
}

// nodeNames lists nodes' names, the first 20 and a count of the rest, as
// kube logs them.
func nodeNames(nodes []*corev1.Node) []string {
	const limit = 20
	var out []string
	for i, n := range nodes {
		if i == limit {
			return append(out, fmt.Sprintf("<%d more>", len(nodes)-limit))
		}
		out = append(out, n.Name)
	}
	return out
}

func ingressString(status *corev1.LoadBalancerStatus) string {
	var out []string
	for _, in := range status.Ingress {
		if in.IP != "" {
			out = append(out, in.IP)
		} else {
			out = append(out, in.Hostname)
		}
	}
	return fmt.Sprint(out)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// metrics are kube's service controller metrics.
type metrics struct {
	syncs             prometheus.Counter
	nodeSyncErrors    prometheus.Counter
	nodeSyncLatency   prometheus.Histogram
	updateHostLatency prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		syncs: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "service_controller", Name: "loadbalancer_sync_total",
			Help: "How many times any load balancer has been configured, as an effect of service or node changes.",
		}),
		nodeSyncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "service_controller", Name: "nodesync_error_total",
			Help: "How many times updating a load balancer's backends after a node change failed.",
		}),
		nodeSyncLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "service_controller", Name: "nodesync_latency_seconds",
			Help:    "How long a node sync, which updates the backends of every load balancer, takes.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 15),
		}),
		updateHostLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "service_controller", Name: "update_loadbalancer_host_latency_seconds",
			Help:    "How long updating one load balancer's backends takes.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 15),
		}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.syncs, err = controller.Register(reg, m.syncs); err != nil {
		return nil, err
	}
	if m.nodeSyncErrors, err = controller.Register(reg, m.nodeSyncErrors); err != nil {
		return nil, err
	}
	if m.nodeSyncLatency, err = controller.Register(reg, m.nodeSyncLatency); err != nil {
		return nil, err
	}
	if m.updateHostLatency, err = controller.Register(reg, m.updateHostLatency); err != nil {
		return nil, err
	}
	return m, nil
}
