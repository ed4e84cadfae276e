// Package cloudnodelifecycle is the cloud-node-lifecycle controller of the
// cloud controller manager: it removes the Nodes whose machines are gone
// from the cloud and marks those whose machines are shut down, as
// k8s.io/cloud-provider's node lifecycle controller does.
//
// Properties:
//
//   - Every NodeMonitorPeriod it looks at every Node. A Node whose Ready
//     condition is True loses the taint
//     node.cloudprovider.kubernetes.io/shutdown:NoSchedule if it has it,
//     and the cloud is not asked about it: a Ready Node is never deleted,
//     whatever the cloud says of its machine.
//   - A Node that is not Ready (False, Unknown, or no condition yet) whose
//     machine no longer exists (InstanceExists false) is deleted, after a
//     DeletingNode Event; its pods then go by the garbage collector and
//     pod GC. A failed delete gets a DeletingNodeFailed Warning and is
//     tried again at the next pass.
//   - A not-Ready Node whose machine exists but is shut down gets the
//     shutdown taint, so that nothing new is scheduled on it; it keeps the
//     taint until it is Ready again.
//   - A question the cloud cannot answer skips that Node for this pass.
//
// The controller reads Nodes from its informer and changes them through
// the API only; passes never overlap.
package cloudnodelifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/cloud"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
)

// Name is the controller's cloud-controller-manager name: its
// --controllers name and its logger's controller attribute.
const Name = "cloud-node-lifecycle"

// TaintShutdown marks a Node whose machine is shut down.
const TaintShutdown = "node.cloudprovider.kubernetes.io/shutdown"

// DefaultNodeMonitorPeriod is cloud-controller-manager's
// --node-monitor-period.
const DefaultNodeMonitorPeriod = 5 * time.Second

// Event reasons, kube's.
const (
	reasonDeleting       = "DeletingNode"
	reasonDeletingFailed = "DeletingNodeFailed"
)

// shutdownTaint is the taint a shut-down machine's Node gets.
var shutdownTaint = corev1.Taint{Key: TaintShutdown, Effect: corev1.TaintEffectNoSchedule}

// The retries of a taint change that conflicts with another write: kube's
// updateTaintBackoff, 5 attempts about 100ms apart, each on the Node read
// again from the API.
const (
	taintRetries    = 5
	taintRetryDelay = 100 * time.Millisecond
)

// Options is what the controller needs beyond the options every controller
// takes.
type Options struct {
	controller.Common
	// Cloud is the provider asked about the Nodes' machines; it must
	// support InstancesV2. Required.
	Cloud cloud.Interface
	// NodeMonitorPeriod is the time between passes; 0 means
	// DefaultNodeMonitorPeriod.
	NodeMonitorPeriod time.Duration
}

// ErrNoInstances is New's error for a cloud without InstancesV2: there is
// no one to ask whether a machine exists, and the controller does not run.
var ErrNoInstances = errors.New("cloud provider does not support instances")

// Controller deletes the Nodes of machines gone from the cloud and taints
// those of machines shut down.
type Controller struct {
	nodes     *client.Client[*corev1.Node]
	lister    informer.Lister[*corev1.Node]
	synced    []func() bool
	instances cloud.InstancesV2

	period   time.Duration
	recorder record.EventRecorder
	log      *slog.Logger
	clock    clock.Clock

	// passes counts finished passes, for tests.
	passes atomic.Int64
}

// New returns a controller reading Nodes from opts.Informers. Nothing runs
// until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	if opts.Cloud == nil {
		return nil, fmt.Errorf("%s: Options.Cloud is required", Name)
	}
	instances, ok := opts.Cloud.InstancesV2()
	if !ok || instances == nil {
		return nil, fmt.Errorf("%s: %w", Name, ErrNoInstances)
	}
	c := &Controller{
		nodes:     client.For[*corev1.Node](opts.Client),
		instances: instances,
		period:    opts.NodeMonitorPeriod,
		recorder:  opts.Recorder,
		log:       opts.Logger,
		clock:     opts.Clock,
	}
	if c.period <= 0 {
		c.period = DefaultNodeMonitorPeriod
	}
	nodeInformer := informer.For[*corev1.Node](opts.Informers)
	c.lister = nodeInformer.Lister()
	c.synced = []func() bool{nodeInformer.HasSynced}
	return c, nil
}

// Run waits for the cache, then makes a pass every NodeMonitorPeriod
// until ctx is done. workers bounds how many Nodes a pass handles at once;
// the manager runs one, so that a pass asks about one Node at a time, as
// kube's does.
func (c *Controller) Run(ctx context.Context, workers int) {
	workers = controller.Workers(workers)
	c.log.Info("starting", slog.Duration("nodeMonitorPeriod", c.period))
	if !informer.WaitForCacheSync(ctx, c.synced...) {
		c.log.Info("stopped before the caches synced")
		return
	}
	for {
		c.monitorNodes(ctx, workers)
		c.passes.Add(1)
		if !clock.Sleep(ctx, c.clock, c.period) {
			c.log.Info("stopped")
			return
		}
	}
}

// monitorNodes is one pass over every Node, at most workers at a time.
func (c *Controller) monitorNodes(ctx context.Context, workers int) {
	nodes := c.lister.List(nil)
	work := make(chan *corev1.Node)
	var wg sync.WaitGroup
	for range min(workers, len(nodes)) {
		wg.Go(func() {
			for node := range work {
				c.monitorNode(ctx, node)
			}
		})
	}
	for _, node := range nodes {
		select {
		case work <- node:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(work)
	wg.Wait()
}

// monitorNode: a Ready Node loses the shutdown taint; a Node that is not
// Ready is deleted if its machine is gone, and tainted if its machine is
// shut down.
func (c *Controller) monitorNode(ctx context.Context, node *corev1.Node) {
	if readyStatus(node) == corev1.ConditionTrue {
		if hasTaint(node, shutdownTaint) {
			c.setShutdownTaint(ctx, node.Name, false)
		}
		return
	}

	exists, err := c.instances.InstanceExists(ctx, node)
	if err != nil {
		c.log.Warn("check whether the node's instance exists failed", slog.String("object", node.Name), slog.Any("err", err))
		return
	}
	if !exists {
		c.deleteNode(ctx, node)
		return
	}

	shutdown, err := c.instances.InstanceShutdown(ctx, node)
	if err != nil {
		c.log.Warn("check whether the node's instance is shut down failed", slog.String("object", node.Name), slog.Any("err", err))
		return
	}
	if shutdown && !hasTaint(node, shutdownTaint) {
		c.setShutdownTaint(ctx, node.Name, true)
	}
}

// deleteNode deletes a not-Ready Node whose machine is gone; its taints no
// longer matter.
func (c *Controller) deleteNode(ctx context.Context, node *corev1.Node) {
	c.log.Info("not ready and its instance is gone from the cloud → delete", slog.String("object", node.Name))
	c.recorder.Eventf(node, corev1.EventTypeNormal, reasonDeleting,
		"Deleting node %s because it does not exist in the cloud provider", node.Name)
	err := c.nodes.Delete(ctx, "", node.Name, metav1.DeleteOptions{})
	if err != nil && !client.IsNotFound(err) {
		c.log.Warn("delete node failed", slog.String("object", node.Name), slog.Any("err", err))
		c.recorder.Eventf(node, corev1.EventTypeWarning, reasonDeletingFailed, "Failed deleting node %s: %v", node.Name, err)
	}
}

// setShutdownTaint adds (on) or removes the shutdown taint of Node name,
// reading the Node from the API and writing its taints with its
// resourceVersion, so that a concurrent change to its taints is never
// lost: a conflict reads again, as kube's taint helpers do.
func (c *Controller) setShutdownTaint(ctx context.Context, name string, on bool) {
	for attempt := 1; ; attempt++ {
		err := c.trySetShutdownTaint(ctx, name, on)
		if err == nil || client.IsNotFound(err) {
			return
		}
		if !client.IsConflict(err) || attempt == taintRetries {
			c.log.Warn("patch node taints failed", slog.String("object", name), slog.Bool("add", on), slog.Any("err", err))
			return
		}
		if !clock.Sleep(ctx, c.clock, taintRetryDelay+rand.N(taintRetryDelay)) {
			return
		}
	}
}

func (c *Controller) trySetShutdownTaint(ctx context.Context, name string, on bool) error {
	node, err := c.nodes.Get(ctx, "", name)
	if err != nil {
		return err
	}
	if hasTaint(node, shutdownTaint) == on {
		return nil
	}
	taints := []corev1.Taint{}
	for _, t := range node.Spec.Taints {
		if t.Key == shutdownTaint.Key && t.Effect == shutdownTaint.Effect {
			continue
		}
		taints = append(taints, t)
	}
	action := "instance is running and the node Ready → remove " + TaintShutdown
	if on {
		taints = append(taints, shutdownTaint)
		action = "not ready and its instance is shut down → taint " + TaintShutdown + ":NoSchedule"
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
		"spec":     map[string]any{"taints": taints},
	})
	if err != nil {
		return err
	}
	if _, err := c.nodes.Patch(ctx, "", name, types.MergePatchType, patch); err != nil {
		return err
	}
	c.log.Info(action, slog.String("object", name))
	return nil
}

// readyStatus is the status of node's Ready condition, Unknown when it has
// none.
func readyStatus(node *corev1.Node) corev1.ConditionStatus {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status
		}
	}
	return corev1.ConditionUnknown
}

func hasTaint(node *corev1.Node, taint corev1.Taint) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == taint.Key && t.Effect == taint.Effect {
			return true
		}
	}
	return false
}
