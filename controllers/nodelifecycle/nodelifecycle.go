// Package nodelifecycle is the node lifecycle controller: it watches every
// node's heartbeats, declares a silent node's health Unknown, taints nodes
// that are not ready, and evicts the pods of NoExecute-tainted nodes that
// do not tolerate the taint, as kube-controller-manager's node lifecycle
// and taint eviction controllers do.
//
// Design, one line per part:
//
//   - nodelifecycle.go: Options, New, Run, the event handlers, the two
//     workqueues and the monitor loop.
//   - health.go: the nodeHealth record (probe time, Ready transition time,
//     the status and the Lease last seen), and marking a silent node
//     Unknown.
//   - disruption.go: zone states (Normal, PartialDisruption,
//     FullDisruption), the per-zone eviction rate, and the rate-limited
//     queue of nodes waiting for a NoExecute taint.
//   - taints.go: the taints the controller owns, how Ready decides them
//     (NoExecute through the zones' queues, NoSchedule at once), and how
//     they are written.
//   - eviction.go: taint-based eviction, pod by pod.
//   - metrics.go: the controller's Prometheus metrics.
//
// Properties:
//
//   - Heartbeats are judged by the controller's own clock, never by the
//     times the kubelet writes: a node's probe time moves when the
//     controller sees its Ready condition's lastHeartbeatTime change or its
//     Lease (kube-node-lease/<node>) renewTime move forward. A node whose
//     probe time is older than NodeMonitorGracePeriod (NodeStartupGracePeriod
//     while it has never been seen Ready) gets Ready, MemoryPressure,
//     DiskPressure and PIDPressure Unknown, reason NodeStatusUnknown.
//   - A node with Ready False carries node.kubernetes.io/not-ready:NoExecute,
//     with Ready Unknown node.kubernetes.io/unreachable:NoExecute (never
//     both, swapped at once when Ready moves between the two), and neither
//     once Ready is True. Adding one to a node that has neither is rate
//     limited per zone (topology.kubernetes.io/zone): EvictionRate nodes
//     per second in a Normal zone, SecondaryEvictionRate in a
//     PartialDisruption zone larger than LargeClusterSizeThreshold nodes,
//     none in a smaller one. When every zone is in FullDisruption the
//     controller assumes the fault is its own (it cannot reach the nodes)
//     and removes the NoExecute taints it added, adding none until a node
//     is Ready again.
//   - NoSchedule taints follow the conditions without any rate limit
//     (upstream's TaintNodesByCondition): not-ready, unreachable,
//     memory-pressure, disk-pressure, pid-pressure, network-unavailable,
//     and unschedulable for spec.unschedulable.
//   - Any NoExecute taint (the controller's or anyone's) evicts the pods
//     bound to the node that do not tolerate it, at once; a pod tolerating
//     it with tolerationSeconds is evicted that long after the taint's
//     timeAdded, unless the taint goes (or the pod does) first; a pod
//     tolerating it without tolerationSeconds stays. Eviction is an
//     ordinary graceful delete, with the pod's uid as a precondition.
//   - Every write of a node's status or taints is a compare-and-swap on its
//     resourceVersion, retried from a fresh read on a conflict.
//
// The monitor pass runs every NodeMonitorPeriod on one goroutine; event
// handlers only enqueue keys, and Run's workers reconcile NoSchedule taints
// (per node) and evictions (per pod).
package nodelifecycle

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Kubernetes' defaults (kube-controller-manager's flags). The rates and
// the threshold are untyped, so that they read 0.1 whether a float32 or a
// float64 holds them.
const (
	DefaultNodeMonitorPeriod         = 5 * time.Second  // --node-monitor-period
	DefaultNodeMonitorGracePeriod    = 40 * time.Second // --node-monitor-grace-period
	DefaultNodeStartupGracePeriod    = 60 * time.Second // --node-startup-grace-period
	DefaultEvictionRate              = 0.1              // --node-eviction-rate
	DefaultSecondaryEvictionRate     = 0.01             // --secondary-node-eviction-rate
	DefaultUnhealthyZoneThreshold    = 0.55             // --unhealthy-zone-threshold
	DefaultLargeClusterSizeThreshold = 50               // --large-cluster-size-threshold
)

// Name is the controller's kube-controller-manager name: its --controllers
// name and its logger's controller attribute; its two workqueues are
// named after it.
const Name = "nodelifecycle"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required), and its own, where zero means
// Kubernetes' default. It reads nodes, Leases and pods from Informers,
// writes nodes and deletes pods through Client; its Recorder gets
// NodeNotReady, TaintManagerEviction and the like; its Clock times probe
// times, tolerations, rate limits and periods.
type Options struct {
	controller.Common

	// NodeMonitorPeriod is how often every node's health is checked.
	NodeMonitorPeriod time.Duration
	// NodeMonitorGracePeriod is how long a node may go without a heartbeat
	// before its Ready condition becomes Unknown.
	NodeMonitorGracePeriod time.Duration
	// NodeStartupGracePeriod replaces NodeMonitorGracePeriod for a node
	// never seen Ready.
	NodeStartupGracePeriod time.Duration
	// EvictionRate is how many nodes per second may get a NoExecute taint
	// in a healthy zone. Negative means none.
	EvictionRate float32
	// SecondaryEvictionRate replaces EvictionRate in a PartialDisruption
	// zone of more than LargeClusterSizeThreshold nodes. Negative means
	// none.
	SecondaryEvictionRate float32
	// UnhealthyZoneThreshold is the fraction of not-ready nodes (at least
	// 3) that puts a zone in PartialDisruption.
	UnhealthyZoneThreshold float32
	// LargeClusterSizeThreshold is the zone size above which a
	// PartialDisruption zone still evicts, at SecondaryEvictionRate.
	LargeClusterSizeThreshold int
}

// Controller is the node lifecycle controller. Create it with New, then
// Run it.
type Controller struct {
	nodes *client.Client[*corev1.Node]
	pods  *client.Client[*corev1.Pod]

	nodeLister  informer.Lister[*corev1.Node]
	leaseLister informer.Lister[*coordinationv1.Lease]
	podLister   informer.Lister[*corev1.Pod]
	podIndexer  informer.Indexer // with podNodeNameIndex
	hasSynced   []func() bool

	// nodeQueue holds node names whose NoSchedule taints to reconcile;
	// podQueue holds pod keys whose eviction to decide.
	nodeQueue *workqueue.Queue[string]
	podQueue  *workqueue.Queue[string]

	monitorPeriod     time.Duration
	gracePeriod       time.Duration
	startupGrace      time.Duration
	evictionRate      float64
	secondaryRate     float64
	unhealthyZone     float64
	largeClusterNodes int
	clock             clock.Clock
	recorder          record.EventRecorder
	log               *slog.Logger
	metrics           *metrics

	// mu guards health and zones. Only the monitor goroutine changes
	// them; tests read them.
	mu sync.Mutex
	// health holds, for each node the monitor has seen, what it saw.
	health map[string]*nodeHealth
	// zones holds each zone's state, eviction rate and nodes waiting for
	// a NoExecute taint. A zone is here iff a node of it was seen on the
	// last pass.
	zones map[string]*zone
	// known is the monitor goroutine's own: the nodes it has seen, as
	// last listed.
	known map[string]*corev1.Node

	// evictMu guards evictions: for each pod key, the eviction scheduled
	// for it. A key is there iff its pod tolerates every NoExecute taint
	// of its node, one of them only for a while, and that while has not
	// run out.
	evictMu   sync.Mutex
	evictions map[string]scheduledEviction

	// passes counts finished monitor passes (tests wait on it).
	passes atomic.Int64
}

// New returns a controller reading from opts.Informers, with its event
// handlers registered; it adds the "spec.nodeName" index to the pod
// informer. Nothing runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	c := &Controller{
		nodes:             client.For[*corev1.Node](opts.Client),
		pods:              client.For[*corev1.Pod](opts.Client),
		monitorPeriod:     cmp.Or(opts.NodeMonitorPeriod, DefaultNodeMonitorPeriod),
		gracePeriod:       cmp.Or(opts.NodeMonitorGracePeriod, DefaultNodeMonitorGracePeriod),
		startupGrace:      cmp.Or(opts.NodeStartupGracePeriod, DefaultNodeStartupGracePeriod),
		evictionRate:      rate(opts.EvictionRate, DefaultEvictionRate),
		secondaryRate:     rate(opts.SecondaryEvictionRate, DefaultSecondaryEvictionRate),
		unhealthyZone:     exact(cmp.Or(opts.UnhealthyZoneThreshold, DefaultUnhealthyZoneThreshold)),
		largeClusterNodes: cmp.Or(opts.LargeClusterSizeThreshold, DefaultLargeClusterSizeThreshold),
		clock:             opts.Clock,
		recorder:          opts.Recorder,
		log:               opts.Logger,
		health:            map[string]*nodeHealth{},
		zones:             map[string]*zone{},
		known:             map[string]*corev1.Node{},
		evictions:         map[string]scheduledEviction{},
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("nodelifecycle: %w", err)
	}
	c.metrics = m

	nodeInformer := informer.For[*corev1.Node](opts.Informers)
	leaseInformer := informer.For[*coordinationv1.Lease](opts.Informers)
	podInformer := informer.For[*corev1.Pod](opts.Informers)
	if err := ensureNodeNameIndex(podInformer); err != nil {
		return nil, fmt.Errorf("nodelifecycle: %w", err)
	}
	c.nodeLister = nodeInformer.Lister()
	c.leaseLister = leaseInformer.Lister()
	c.podLister = podInformer.Lister()
	c.podIndexer = podInformer.GetIndexer()

	c.nodeQueue = controller.NewQueue[string](Name+"_nodes", opts.Common)
	c.podQueue = controller.NewQueue[string](Name+"_evictions", opts.Common)

	nodeReg, err := nodeInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.nodeChanged(nil, obj) },
		UpdateFunc: c.nodeChanged,
		DeleteFunc: func(obj any) { c.nodeChanged(obj, nil) },
	})
	if err != nil {
		c.shutDownQueues()
		return nil, fmt.Errorf("nodelifecycle: %w", err)
	}
	podReg, err := podInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.podChanged(nil, obj) },
		UpdateFunc: c.podChanged,
		DeleteFunc: func(obj any) { c.podChanged(obj, nil) },
	})
	if err != nil {
		c.shutDownQueues()
		return nil, fmt.Errorf("nodelifecycle: %w", err)
	}
	c.hasSynced = []func() bool{nodeReg.HasSynced, podReg.HasSynced, leaseInformer.HasSynced}
	return c, nil
}

// rate is a rate option: 0 means def, negative means none.
func rate(v, def float32) float64 {
	switch {
	case v == 0:
		return exact(def)
	case v < 0:
		return 0
	}
	return exact(v)
}

// exact widens a float32 to the float64 it was written as: 0.1, not
// 0.10000000149011612.
func exact(v float32) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(v), 'g', -1, 32), 64)
	return f
}

// Run waits for the caches to sync, starts workers workers for each queue
// and the monitor loop, and blocks until ctx is done; then it shuts the
// queues down and waits for every goroutine it started.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.nodeQueue.ShutDown()
	defer c.podQueue.ShutDown()
	c.log.Info("starting",
		"workers", workers, "monitorPeriod", c.monitorPeriod, "gracePeriod", c.gracePeriod,
		"startupGracePeriod", c.startupGrace, "evictionRate", c.evictionRate)
	if !informer.WaitForCacheSync(ctx, c.hasSynced...) {
		c.log.Info("stopped before the caches synced")
		return
	}
	var wg sync.WaitGroup
	for range controller.Workers(workers) {
		wg.Go(func() {
			for c.processNextWorkItem(ctx, c.nodeQueue, c.syncNoScheduleTaints) {
			}
		})
		wg.Go(func() {
			for c.processNextWorkItem(ctx, c.podQueue, c.syncPodEviction) {
			}
		})
	}
	wg.Go(func() { c.monitorLoop(ctx) })
	<-ctx.Done()
	c.nodeQueue.ShutDown()
	c.podQueue.ShutDown()
	wg.Wait()
	c.log.Info("stopped")
}

// nodeChanged enqueues the node for its NoSchedule taints, and its pods
// for eviction when its NoExecute taints changed. old is nil for an add,
// cur for a delete.
func (c *Controller) nodeChanged(old, cur any) {
	oldNode, _ := nodeFrom(old)
	curNode, _ := nodeFrom(cur)
	var name string
	switch {
	case curNode != nil:
		name = curNode.Name
		c.nodeQueue.Add(name)
	case oldNode != nil:
		name = oldNode.Name
	default:
		return
	}
	if oldNode != nil && curNode != nil &&
		apiequality.Semantic.DeepEqual(noExecuteTaints(oldNode), noExecuteTaints(curNode)) {
		return
	}
	for _, key := range c.podKeysOnNode(name) {
		c.podQueue.Add(key)
	}
}

// podChanged enqueues a pod whose eviction may have to be decided again:
// a new bound pod, one bound elsewhere or with other tolerations, one
// being deleted, or one gone.
func (c *Controller) podChanged(old, cur any) {
	oldPod, _ := podFrom(old)
	curPod, _ := podFrom(cur)
	switch {
	case curPod == nil && oldPod == nil:
		return
	case curPod == nil:
		c.podQueue.Add(podKey(oldPod))
		return
	case curPod.Spec.NodeName == "":
		return // not bound: nothing to evict it from
	case oldPod != nil && oldPod.Spec.NodeName == curPod.Spec.NodeName &&
		(oldPod.DeletionTimestamp == nil) == (curPod.DeletionTimestamp == nil) &&
		apiequality.Semantic.DeepEqual(oldPod.Spec.Tolerations, curPod.Spec.Tolerations):
		return // nothing that matters here changed
	}
	c.podQueue.Add(podKey(curPod))
}

// processNextWorkItem takes one key from queue and syncs it, and leaves it
// to controller.HandleErr to decide whether to retry it, forget it or look
// again later. It returns false once the queue is shut down.
func (c *Controller) processNextWorkItem(ctx context.Context, queue *workqueue.Queue[string], sync func(context.Context, string) error) bool {
	key, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(key)
	controller.HandleErr(ctx, c.log, queue, key, sync(ctx, key))
	return true
}

// monitorLoop runs a monitor pass every monitorPeriod, and the NoExecute
// tainting pass after each, and again whenever a zone's rate limit lets a
// waiting node be tainted, until ctx is done.
func (c *Controller) monitorLoop(ctx context.Context) {
	var nextMonitor time.Time // zero: at once
	for {
		now := c.clock.Now()
		if !now.Before(nextMonitor) {
			nextMonitor = now.Add(c.monitorPeriod)
			c.monitorNodeHealth(ctx, now)
			c.passes.Add(1)
		} else {
			c.taintingPass(ctx, now, nil)
		}
		until := nextMonitor
		if wake := c.nextTaintingWake(now); !wake.IsZero() && wake.Before(until) {
			until = wake
		}
		// The wait is computed from absolute times, so that time moving
		// on between the pass and the timer (a fake clock stepped by a
		// test) is not lost.
		timer := c.clock.NewTimer(until.Sub(c.clock.Now()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
	}
}

// ensureNodeNameIndex adds podNodeNameIndex to the pod informer unless
// another controller already has.
func ensureNodeNameIndex(inf *informer.Informer[*corev1.Pod]) error {
	if _, err := inf.GetIndexer().IndexKeys(podNodeNameIndex, ""); err == nil {
		return nil
	}
	err := inf.AddIndexers(informer.Indexers{podNodeNameIndex: podNodeNameIndexFunc})
	if err != nil {
		if _, e := inf.GetIndexer().IndexKeys(podNodeNameIndex, ""); e == nil {
			return nil // another controller won the race to add it
		}
		return fmt.Errorf("add %s index: %w", podNodeNameIndex, err)
	}
	return nil
}

// podNodeNameIndex indexes pods by the node they are bound to.
const podNodeNameIndex = "spec.nodeName"

func podNodeNameIndexFunc(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{pod.Spec.NodeName}, nil
}

// podKeysOnNode returns the keys of the pods bound to node, from the cache.
func (c *Controller) podKeysOnNode(node string) []string {
	keys, err := c.podIndexer.IndexKeys(podNodeNameIndex, node)
	if err != nil {
		c.log.Error("pod index", "err", err)
		return nil
	}
	return keys
}

func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

func nodeFrom(obj any) (*corev1.Node, bool) {
	n, ok := unwrapTombstone(obj).(*corev1.Node)
	return n, ok
}

func podFrom(obj any) (*corev1.Pod, bool) {
	p, ok := unwrapTombstone(obj).(*corev1.Pod)
	return p, ok
}

// unwrapTombstone returns the last known state of a deletion missed while
// the watch was down, or obj itself.
func unwrapTombstone(obj any) any {
	switch d := obj.(type) {
	case informer.DeletedFinalStateUnknown:
		return d.Obj
	case *informer.DeletedFinalStateUnknown:
		return d.Obj
	}
	return obj
}

// shutDownQueues stops the queues of a controller that will never run.
func (c *Controller) shutDownQueues() {
	c.nodeQueue.ShutDown()
	c.podQueue.ShutDown()
}
