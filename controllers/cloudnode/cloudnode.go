// Package cloudnode is the cloud-node controller of the cloud controller
// manager: it initializes the Nodes of a cluster whose kubelets run with an
// external cloud provider, from what the cloud knows of their machines, as
// k8s.io/cloud-provider's node controller does.
//
// Properties:
//
//   - A kubelet of such a cluster registers its Node with the taint
//     node.cloudprovider.kubernetes.io/uninitialized:NoSchedule, so that
//     nothing is scheduled there before the cloud has been asked. For each
//     Node with that taint the controller asks the cloud's InstancesV2 for
//     the machine's metadata and, in one update of the Node, sets
//     spec.providerID (when it has none), the instance-type, zone and
//     region labels (node.kubernetes.io/instance-type,
//     topology.kubernetes.io/zone and topology.kubernetes.io/region, with
//     their beta twins beta.kubernetes.io/instance-type and
//     failure-domain.beta.kubernetes.io/zone and /region) and removes the
//     taint. Then it writes the machine's addresses into status.addresses
//     and records a Synced Event.
//   - A Node whose machine the cloud does not know (or cannot be asked
//     about) keeps its taint; it is retried with the queue's back-off, and
//     a Warning is logged each time, as in kube.
//   - Every NodeStatusUpdateFrequency the addresses of every initialized
//     Node are compared with the cloud's and written when they differ. A
//     hostname address the kubelet reported is kept when the cloud gives
//     none.
//   - An initialized Node whose beta label disagrees with its GA twin, or
//     lacks the GA one, gets the GA label set to the beta one's value: the
//     beta labels remain the source of truth, as in kube.
//
// The controller only reads Nodes from its informer; every write goes
// through the API.
package cloudnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/cloud"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's cloud-controller-manager name: its
// --controllers name and its logger's controller attribute.
const Name = "cloud-node"

// TaintUninitialized is the taint a kubelet of a cluster with an external
// cloud provider registers its Node with; this controller removes it once
// the Node carries what the cloud knows of its machine.
const TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// DefaultNodeStatusUpdateFrequency is cloud-controller-manager's
// --node-status-update-frequency.
const DefaultNodeStatusUpdateFrequency = 5 * time.Minute

// queueName is kube's name for the controller's workqueue, the name label
// of its metrics.
const queueName = "Nodes"

// The retries of the update that initializes a Node: kube's
// UpdateNodeSpecBackoff, 20 attempts about 50ms apart, each reading the
// Node again from the informer.
const (
	initRetries    = 20
	initRetryDelay = 50 * time.Millisecond
)

// Options is what the controller needs beyond the options every controller
// takes.
type Options struct {
	controller.Common
	// Cloud is the provider asked about the Nodes' machines; it must
	// support InstancesV2. Required.
	Cloud cloud.Interface
	// NodeStatusUpdateFrequency is how often initialized Nodes' addresses
	// are refreshed from the cloud; 0 means
	// DefaultNodeStatusUpdateFrequency.
	NodeStatusUpdateFrequency time.Duration
	// StatusUpdateWorkers bounds how many Nodes a refresh asks the cloud
	// about at once (kube's --concurrent-node-status-updates); 0 means
	// as many as Run's workers, as in kube.
	StatusUpdateWorkers int
}

// ErrNoInstances is New's error for a cloud without InstancesV2: there is
// nothing to initialize Nodes from, and the controller does not run.
var ErrNoInstances = errors.New("cloud provider does not support instances")

// Controller initializes tainted Nodes from the cloud and keeps the
// addresses of initialized ones current. Its queue holds Node names.
type Controller struct {
	nodes     *client.Client[*corev1.Node]
	lister    informer.Lister[*corev1.Node]
	synced    []func() bool
	instances cloud.InstancesV2

	queue         *workqueue.Queue[string]
	frequency     time.Duration
	statusWorkers int
	recorder      record.EventRecorder
	log           *slog.Logger
	clock         clock.Clock
	metrics       *metrics

	// refreshes counts finished address refreshes, for tests.
	refreshes func()
}

// New returns a controller reading Nodes from opts.Informers, with its
// event handlers registered. Nothing runs until Run.
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
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c := &Controller{
		nodes:         client.For[*corev1.Node](opts.Client),
		instances:     instances,
		queue:         controller.NewQueue[string](queueName, opts.Common),
		frequency:     opts.NodeStatusUpdateFrequency,
		statusWorkers: opts.StatusUpdateWorkers,
		recorder:      opts.Recorder,
		log:           opts.Logger,
		clock:         opts.Clock,
		metrics:       m,
	}
	if c.frequency <= 0 {
		c.frequency = DefaultNodeStatusUpdateFrequency
	}
	nodeInformer := informer.For[*corev1.Node](opts.Informers)
	c.lister = nodeInformer.Lister()
	reg, err := nodeInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueue(obj) },
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c.synced = []func() bool{reg.HasSynced}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	if node, ok := obj.(*corev1.Node); ok {
		c.queue.Add(node.Name)
	}
}

// Run waits for the cache, then runs workers that initialize Nodes and
// one loop that refreshes addresses every NodeStatusUpdateFrequency, until
// ctx is done; then it shuts the queue down and waits for them all.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	workers = controller.Workers(workers)
	statusWorkers := c.statusWorkers
	if statusWorkers <= 0 {
		statusWorkers = workers
	}
	c.log.Info("starting", slog.Int("workers", workers), slog.Duration("nodeStatusUpdateFrequency", c.frequency))
	if !informer.WaitForCacheSync(ctx, c.synced...) {
		c.log.Info("stopped before the caches synced")
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c.updateNodeStatus(ctx, statusWorkers)
			if !clock.Sleep(ctx, c.clock, c.frequency) {
				return
			}
		}
	})
	for range workers {
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

// processNextWorkItem syncs one Node, and leaves it to controller.HandleErr
// to decide whether to retry it. It returns false once the queue is shut
// down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	controller.HandleErr(ctx, c.log, c.queue, name, c.sync(ctx, name))
	return true
}

// sync initializes Node name if it still has the uninitialized taint: the
// cloud's metadata of its machine goes into its spec and labels and the
// taint comes off in one update, then its addresses are written. An
// initialized Node only has its beta and GA labels reconciled.
func (c *Controller) sync(ctx context.Context, name string) error {
	node, err := c.lister.Get("", name)
	if apierrors.IsNotFound(err) {
		return nil // deleted: nothing to initialize
	}
	if err != nil {
		return err
	}
	if !hasCloudTaint(node) {
		return c.reconcileLabels(ctx, node)
	}

	c.log.Info("initializing node with cloud provider", slog.String("object", name))
	meta, err := c.instanceMetadata(ctx, node)
	if err != nil {
		// The taint stays: nothing may run on a Node the cloud cannot
		// vouch for. The queue's back-off paces the retries.
		return fmt.Errorf("failed to get instance metadata for node %s: %w", name, err)
	}
	if meta == nil {
		c.log.Info("cloud provided no metadata → skip", slog.String("object", name))
		return nil
	}
	modify := modifiersFor(node, meta)

	var initialized *corev1.Node
	for attempt := 1; ; attempt++ {
		cur, err := c.lister.Get("", name)
		if apierrors.IsNotFound(err) {
			return nil // deleted while we asked the cloud
		}
		if err != nil {
			return err
		}
		next := cur.DeepCopy()
		for _, m := range modify {
			m(next)
		}
		initialized, err = c.nodes.Update(ctx, next)
		if err == nil {
			break
		}
		if !client.IsConflict(err) || attempt == initRetries {
			return fmt.Errorf("initialize node %s: %w", name, err)
		}
		// The informer has not caught up with the write that beat ours.
		if !clock.Sleep(ctx, c.clock, jittered(initRetryDelay)) {
			return ctx.Err()
		}
	}
	c.metrics.taintRemovalDelay.Observe(c.clock.Now().Sub(initialized.CreationTimestamp.Time).Seconds())
	// Addresses straight away, so that no one sees the initialized Node
	// without them for a whole refresh period.
	c.updateNodeAddress(ctx, initialized, meta)
	c.log.Info(fmt.Sprintf("initialized: providerID %s, zone %q, region %q, type %q → taint removed",
		initialized.Spec.ProviderID, meta.Zone, meta.Region, meta.InstanceType), slog.String("object", name))
	c.recorder.Event(node, corev1.EventTypeNormal, "Synced", "Node synced successfully")
	c.metrics.initialSyncDelay.Observe(c.clock.Now().Sub(node.CreationTimestamp.Time).Seconds())
	return nil
}

// instanceMetadata asks the cloud about node's machine. A provider that
// gives no provider ID leaves the Node's own; a Node with none at all is
// not initialized, since load balancers and routes find machines by it.
func (c *Controller) instanceMetadata(ctx context.Context, node *corev1.Node) (*cloud.InstanceMetadata, error) {
	meta, err := c.instances.InstanceMetadata(ctx, node)
	if err != nil || meta == nil {
		return meta, err
	}
	if meta.ProviderID == "" {
		if node.Spec.ProviderID == "" {
			return nil, fmt.Errorf("cloud provider does not set node provider ID for node %s", node.Name)
		}
		meta.ProviderID = node.Spec.ProviderID
	}
	return meta, nil
}

// modifier changes a Node the way initialization wants; each is
// idempotent, as the update that applies them may be retried on a newer
// copy of the Node.
type modifier func(*corev1.Node)

// modifiersFor lists, in kube's order, the changes meta makes to node:
// provider ID, instance type, zone and region labels, and last the removal
// of the uninitialized taint.
func modifiersFor(node *corev1.Node, meta *cloud.InstanceMetadata) []modifier {
	var out []modifier
	if node.Spec.ProviderID == "" && meta.ProviderID != "" {
		out = append(out, func(n *corev1.Node) { n.Spec.ProviderID = meta.ProviderID })
	}
	label := func(value string, keys ...string) {
		if value == "" {
			return
		}
		out = append(out, func(n *corev1.Node) {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			for _, k := range keys {
				n.Labels[k] = value
			}
		})
	}
	label(meta.InstanceType, corev1.LabelInstanceType, corev1.LabelInstanceTypeStable)
	label(meta.Zone, corev1.LabelFailureDomainBetaZone, corev1.LabelTopologyZone)
	label(meta.Region, corev1.LabelFailureDomainBetaRegion, corev1.LabelTopologyRegion)
	out = append(out, func(n *corev1.Node) {
		kept := []corev1.Taint{}
		for _, t := range n.Spec.Taints {
			if t.Key != TaintUninitialized {
				kept = append(kept, t)
			}
		}
		n.Spec.Taints = kept
	})
	return out
}

func hasCloudTaint(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == TaintUninitialized {
			return true
		}
	}
	return false
}

// jittered is d plus up to d more, as kube's backoff with Jitter 1.0: two
// controllers that conflicted do not retry in step.
func jittered(d time.Duration) time.Duration {
	return d + rand.N(d)
}
