// Package nodeipam gives every node a pod CIDR, as kube-controller-manager's
// node IPAM controller does with --allocate-node-cidrs and its range
// allocator: spec.podCIDR (and spec.podCIDRs) is cut from ClusterCIDR, one
// subnet of NodeCIDRMaskSize bits per node.
//
// Design, one line per part:
//
//   - nodeipam.go: Options, New, Run, the node handler and sync.
//   - cidrset.go: cidrSet, the bitmap of the cluster CIDR's subnets.
//   - metrics.go: the controller's Prometheus metrics.
//
// Properties:
//
//   - No two nodes are given overlapping ranges: a range is taken from the
//     bitmap before it is written to a node, and returned to it only once
//     the node is gone from the cache.
//   - A node that has a pod CIDR keeps it (the API server lets it be set
//     only once); the controller only marks it in use.
//   - On start, before allocating anything, the controller marks the
//     ranges of every node that has one: a restarted controller never
//     hands out a range in use.
//   - A write that fails keeps the range reserved for its node, so that a
//     write that did happen after all cannot lead to a second node getting
//     the same range.
//   - When the cluster CIDR is exhausted the node gets a CIDRNotAvailable
//     Event and is tried again, with backoff and as soon as a range is
//     released.
//
// The controller owns the bitmap; it is only right while it is the only
// allocator of the cluster CIDR (leader election sees to that).
package nodeipam

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Kubernetes' defaults: flannel's and kubeadm's --cluster-cidr, and
// kube-controller-manager's --node-cidr-mask-size.
const (
	DefaultClusterCIDR      = "10.244.0.0/16"
	DefaultNodeCIDRMaskSize = 24
)

// Name is the controller's kube-controller-manager name: its --controllers
// name, its logger's controller attribute and its workqueue's name.
const Name = "nodeipam"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required), and its own, where zero means the
// default. It reads nodes from Informers and writes them through Client;
// its Recorder gets CIDRNotAvailable and CIDRAssignmentFailed Events.
type Options struct {
	controller.Common

	// ClusterCIDR is the range pod CIDRs are cut from (--cluster-cidr).
	ClusterCIDR string
	// NodeCIDRMaskSize is the prefix length of each node's pod CIDR
	// (--node-cidr-mask-size).
	NodeCIDRMaskSize int
}

// Controller is the node IPAM controller. Create it with New, then Run it.
type Controller struct {
	nodes      *client.Client[*corev1.Node]
	nodeLister informer.Lister[*corev1.Node]
	hasSynced  []func() bool
	queue      *workqueue.Queue[string]
	recorder   record.EventRecorder
	log        *slog.Logger
	metrics    *metrics

	// mu guards the fields below.
	mu    sync.Mutex
	cidrs *cidrSet
	// byNode holds the range each node has, or is being given. Invariant:
	// a range of the cluster CIDR is marked in cidrs iff some node here
	// holds a range overlapping it.
	byNode map[string]netip.Prefix
	// waiting holds the nodes that found no free range; a release queues
	// them again.
	waiting map[string]bool
}

// New returns a controller reading nodes from opts.Informers. Nothing runs
// until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	clusterCIDR := cmp.Or(opts.ClusterCIDR, DefaultClusterCIDR)
	cluster, err := netip.ParsePrefix(clusterCIDR)
	if err != nil {
		return nil, fmt.Errorf("nodeipam: cluster CIDR: %w", err)
	}
	cidrs, err := newCIDRSet(cluster, cmp.Or(opts.NodeCIDRMaskSize, DefaultNodeCIDRMaskSize))
	if err != nil {
		return nil, fmt.Errorf("nodeipam: %w", err)
	}
	m, err := newMetrics(opts.Metrics, cidrs.cluster.String())
	if err != nil {
		return nil, fmt.Errorf("nodeipam: %w", err)
	}
	c := &Controller{
		nodes:    client.For[*corev1.Node](opts.Client),
		recorder: opts.Recorder,
		log:      opts.Logger,
		metrics:  m,
		cidrs:    cidrs,
		byNode:   map[string]netip.Prefix{},
		waiting:  map[string]bool{},
		queue:    controller.NewQueue[string](Name, opts.Common),
	}

	nodeInformer := informer.For[*corev1.Node](opts.Informers)
	c.nodeLister = nodeInformer.Lister()
	reg, err := nodeInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc: func(obj any, _ bool) { c.enqueue(obj) },
		UpdateFunc: func(old, cur any) {
			o, _ := old.(*corev1.Node)
			n, ok := cur.(*corev1.Node)
			if ok && o != nil && podCIDROf(n) != "" && podCIDROf(o) == podCIDROf(n) {
				return // has its range, as before: nothing to do
			}
			c.enqueue(cur)
		},
		DeleteFunc: c.enqueue,
	})
	if err != nil {
		c.queue.ShutDown() // its goroutine and metrics go with it
		return nil, fmt.Errorf("nodeipam: %w", err)
	}
	c.hasSynced = []func() bool{reg.HasSynced}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	key, err := informer.MetaNamespaceKeyFunc(obj)
	if err != nil {
		c.log.Error("node key", "err", err)
		return
	}
	c.queue.Add(key)
}

// Run waits for the node cache, marks the ranges of the nodes that have
// one, then runs workers workers until ctx is done; then it shuts the
// queue down and waits for them.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	c.log.Info(fmt.Sprintf("starting; pod CIDRs of /%d from %s", c.cidrs.subnetBits, c.cidrs.cluster),
		"workers", workers)
	if !informer.WaitForCacheSync(ctx, c.hasSynced...) {
		c.log.Info("stopped before the cache synced")
		return
	}
	c.occupyExisting()
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

// occupyExisting marks the range of every node in the cache that has one.
// It runs before any allocation.
func (c *Controller) occupyExisting() {
	nodes := c.nodeLister.List(nil)
	n := 0
	for _, node := range nodes {
		if podCIDROf(node) == "" {
			continue
		}
		if p, ok := c.parsePodCIDR(node); ok {
			c.occupy(node.Name, p)
			n++
		}
	}
	c.mu.Lock()
	inUse := c.cidrs.count - c.cidrs.free()
	c.mu.Unlock()
	c.log.Info(fmt.Sprintf("%d of %d nodes already have a podCIDR → %d of %d ranges in use", n, len(nodes), inUse, c.cidrs.count),
		slog.Int("nodes", len(nodes)), slog.Int("inUse", inUse), slog.Int("ranges", c.cidrs.count))
}

// processNextWorkItem syncs one node, and leaves it to
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

// sync gives node name a range if it has none, notes the range it has,
// or releases the range of a node that is gone.
func (c *Controller) sync(ctx context.Context, name string) error {
	node, err := c.nodeLister.Get("", name)
	if apierrors.IsNotFound(err) {
		c.release(name)
		return nil
	}
	if err != nil {
		return err
	}
	if podCIDROf(node) != "" {
		if p, ok := c.parsePodCIDR(node); ok {
			c.occupy(name, p)
		}
		return nil // it keeps what it has
	}

	p, err := c.reserve(name)
	if err != nil {
		c.log.Warn(fmt.Sprintf("%v → CIDRNotAvailable; retry when a range is released", err), slog.String("object", name))
		c.recorder.Eventf(node, corev1.EventTypeNormal, "CIDRNotAvailable", "Node %s status is now: CIDRNotAvailable", name)
		return err
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{
		"podCIDR": p.String(), "podCIDRs": []string{p.String()},
	}})
	if err != nil {
		return err
	}
	_, err = c.nodes.Patch(ctx, "", name, types.MergePatchType, patch)
	switch {
	case client.IsNotFound(err):
		c.release(name)
		return nil // deleted meanwhile
	case err != nil:
		// The range stays reserved for the node: the write may have
		// happened after all, and the retry writes the same range.
		c.recorder.Eventf(node, corev1.EventTypeWarning, "CIDRAssignmentFailed", "Failed to assign podCIDR %s: %v", p, err)
		return fmt.Errorf("set podCIDR %s: %w", p, err)
	}
	c.log.Info("→ podCIDR "+p.String(), slog.String("object", name), slog.String("to", p.String()))
	return nil
}

// reserve returns the range reserved for node, taking a free one if it has
// none.
func (c *Controller) reserve(node string) (netip.Prefix, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.byNode[node]; ok {
		return p, nil
	}
	p, err := c.cidrs.allocateNext()
	if err != nil {
		c.waiting[node] = true
		return netip.Prefix{}, err
	}
	delete(c.waiting, node)
	c.byNode[node] = p
	c.metrics.allocated(c.cidrs)
	return p, nil
}

// occupy notes that node has range p.
func (c *Controller) occupy(node string, p netip.Prefix) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.byNode[node]; ok {
		if cur == p {
			return
		}
		c.releaseLocked(node) // not the node we reserved for: it was recreated with a range
	}
	delete(c.waiting, node)
	for other, q := range c.byNode {
		if q.Overlaps(p) {
			c.log.Warn(fmt.Sprintf("podCIDR %s overlaps %s of node %s; someone else set them", p, q, other),
				slog.String("object", node))
		}
	}
	c.byNode[node] = p
	if !c.cidrs.contains(p) {
		c.log.Info(fmt.Sprintf("podCIDR %s is outside %s → not ours to track", p, c.cidrs.cluster), slog.String("object", node))
		return
	}
	_ = c.cidrs.occupy(p) // contained, so it cannot fail
	c.metrics.allocated(c.cidrs)
}

// release frees the range of node, which is gone.
func (c *Controller) release(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.byNode[node]; ok {
		c.log.Info(fmt.Sprintf("node deleted → release %s", p), slog.String("object", node), slog.String("podCIDR", p.String()))
	}
	c.releaseLocked(node)
	delete(c.waiting, node)
}

// releaseLocked forgets node's range and frees it in the bitmap unless
// another node overlaps it; a freed range wakes the waiting nodes.
func (c *Controller) releaseLocked(node string) {
	p, ok := c.byNode[node]
	if !ok {
		return
	}
	delete(c.byNode, node)
	for _, q := range c.byNode {
		if q.Overlaps(p) {
			return // still in use
		}
	}
	if !c.cidrs.contains(p) {
		return
	}
	_ = c.cidrs.release(p)
	c.metrics.released(c.cidrs)
	for _, name := range slices.Sorted(maps.Keys(c.waiting)) {
		c.queue.Add(name)
	}
	clear(c.waiting)
}

// podCIDROf returns the pod CIDR a node has, "" if none.
func podCIDROf(node *corev1.Node) string {
	if len(node.Spec.PodCIDRs) > 0 {
		return node.Spec.PodCIDRs[0]
	}
	return node.Spec.PodCIDR
}

func (c *Controller) parsePodCIDR(node *corev1.Node) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(podCIDROf(node))
	if err != nil {
		c.log.Warn(fmt.Sprintf("cannot parse podCIDR %q; ignored", podCIDROf(node)), slog.String("object", node.Name), slog.Any("err", err))
		return netip.Prefix{}, false
	}
	return p.Masked(), true
}

// podCIDRs returns a copy of the ranges the controller holds, by node
// (tests).
func (c *Controller) podCIDRs() map[string]netip.Prefix {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byNode)
}
