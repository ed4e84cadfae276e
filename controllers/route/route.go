// Package route is the cloud controller manager's route controller: it
// makes the cloud's route table send each node's pod CIDR to the node, as
// kube's route controller does.
//
// Properties:
//
//   - Every period it compares the cloud's routes with the nodes' pod
//     CIDRs, in one pass over the whole cluster (the routes of one node
//     say nothing about another's, but the table is the cloud's and is
//     read once).
//   - Each pod CIDR of each node gets a route to the node, created with
//     the node's UID as the name hint.
//   - A route inside --cluster-cidr is deleted when it is a blackhole (its
//     machine is gone), when its node is gone, or when its node's pod
//     CIDRs no longer include it. Routes outside --cluster-cidr are not
//     the cluster's and are never touched.
//   - Each node with a pod CIDR gets the condition NetworkUnavailable:
//     False, reason RouteCreated, once all its routes exist; True,
//     reason NoRouteCreated, while one could not be created (with a
//     FailedToCreateRoute Warning on the node). The condition is written
//     only when it changes.
//   - A cloud that fails leaves everything as it was until the next
//     period.
package route

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
const Name = "route"

// DefaultPeriod is --route-reconciliation-period's default.
const DefaultPeriod = 10 * time.Second

// The NetworkUnavailable condition's reasons and messages, kube's.
const (
	ReasonRouteCreated   = "RouteCreated"
	ReasonNoRouteCreated = "NoRouteCreated"
)

// Options is what the controller needs beyond the options every controller
// takes.
type Options struct {
	controller.Common
	// Cloud is the provider; the controller needs its Routes.
	Cloud cloud.Interface
	// ClusterName names the cluster's routes in the cloud.
	ClusterName string
	// ClusterCIDRs is --cluster-cidr, comma-separated: the only routes
	// the controller may delete are inside it. Required.
	ClusterCIDRs string
	// Period is --route-reconciliation-period; 0 is DefaultPeriod.
	Period time.Duration
}

// Controller reconciles the cloud's routes with the nodes' pod CIDRs.
type Controller struct {
	routes       cloud.Routes
	clusterName  string
	clusterCIDRs []*net.IPNet
	period       time.Duration
	nodes        *client.Client[*corev1.Node]
	nodeLister   informer.Lister[*corev1.Node]
	synced       []func() bool
	recorder     record.EventRecorder
	log          *slog.Logger
	clock        clock.Clock
	syncs        prometheus.Counter
}

// New returns a controller reading Nodes from opts.Informers. It fails if
// the cloud has no routes or --cluster-cidr is missing or malformed, as
// kube's does.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	if opts.Cloud == nil {
		return nil, fmt.Errorf("%s: no cloud provider", Name)
	}
	routes, ok := opts.Cloud.Routes()
	if !ok {
		return nil, fmt.Errorf("%s: the cloud provider does not support routes", Name)
	}
	cidrs, err := parseCIDRs(opts.ClusterCIDRs)
	if err != nil {
		return nil, fmt.Errorf("%s: --cluster-cidr: %w", Name, err)
	}
	syncs := prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: "route_controller", Name: "route_sync_total",
		Help: "How many times routes have been synced with the cloud provider.",
	})
	if opts.Metrics != nil {
		if syncs, err = controller.Register(opts.Metrics, syncs); err != nil {
			return nil, err
		}
	}
	c := &Controller{
		routes: routes, clusterName: opts.ClusterName, clusterCIDRs: cidrs,
		period: opts.Period, nodes: client.For[*corev1.Node](opts.Client),
		recorder: opts.Recorder, log: opts.Logger, clock: opts.Clock, syncs: syncs,
	}
	if c.clusterName == "" {
		c.clusterName = cloud.DefaultClusterName
	}
	if c.period <= 0 {
		c.period = DefaultPeriod
	}
	nodeInformer := informer.For[*corev1.Node](opts.Informers)
	c.nodeLister = nodeInformer.Lister()
	// No handlers: the controller looks every period, as kube's does;
	// the registration is there for its HasSynced.
	reg, err := nodeInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c.synced = []func() bool{reg.HasSynced}
	return c, nil
}

func parseCIDRs(s string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		_, cidr, err := net.ParseCIDR(part)
		if err != nil {
			return nil, err
		}
		out = append(out, cidr)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("required")
	}
	return out, nil
}

// Run waits for the node cache, then reconciles every period until ctx is
// done. workers bounds the cloud calls made at once.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.log.Info("starting", slog.Duration("period", c.period))
	if !informer.WaitForCacheSync(ctx, c.synced...) {
		c.log.Info("stopped before the caches synced")
		return
	}
	for {
		if err := c.reconcile(ctx, controller.Workers(workers)); err != nil && ctx.Err() == nil {
			c.log.Warn("couldn't reconcile node routes", slog.Any("err", err))
		}
		timer := c.clock.NewTimer(c.period)
		select {
		case <-ctx.Done():
			timer.Stop()
			c.log.Info("stopped")
			return
		case <-timer.C():
		}
	}
}

// reconcile lists the cloud's routes and the nodes, deletes the routes no
// node wants, creates those missing, and sets each node's
// NetworkUnavailable condition from the outcome.
func (c *Controller) reconcile(ctx context.Context, parallel int) error {
	c.syncs.Inc()
	routes, err := c.routes.ListRoutes(ctx, c.clusterName)
	if err != nil {
		return fmt.Errorf("error listing routes: %w", err)
	}
	nodes := c.nodeLister.List(nil)
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })

	// have: the routes each node has; want: the pod CIDRs each node has.
	have := map[types.NodeName]map[string]bool{}
	for _, r := range routes {
		if r.TargetNode == "" {
			continue
		}
		if have[r.TargetNode] == nil {
			have[r.TargetNode] = map[string]bool{}
		}
		have[r.TargetNode][r.DestinationCIDR] = true
	}
	want := map[types.NodeName][]string{}
	for _, n := range nodes {
		want[types.NodeName(n.Name)] = podCIDRs(n)
	}

	ops := newLimiter(parallel)
	for _, r := range routes {
		if !c.responsibleFor(r) {
			continue
		}
		if !r.Blackhole && slices.Contains(want[r.TargetNode], r.DestinationCIDR) {
			continue
		}
		ops.Go(func() {
			why := "its node is gone or no longer has that pod CIDR"
			if r.Blackhole {
				why = "it is a blackhole"
			}
			if err := c.routes.DeleteRoute(ctx, c.clusterName, r); err != nil {
				c.log.Warn("could not delete route", slog.String("route", r.Name), slog.String("cidr", r.DestinationCIDR), slog.Any("err", err))
				return
			}
			c.log.Info(fmt.Sprintf("route %s %s → deleted: %s", r.Name, r.DestinationCIDR, why), slog.String("object", string(r.TargetNode)))
		})
	}
	ops.Wait()

	// failed holds the nodes one of whose routes could not be created.
	var mu sync.Mutex
	failed := map[string]bool{}
	for _, n := range nodes {
		for _, cidr := range podCIDRs(n) {
			if have[types.NodeName(n.Name)][cidr] {
				continue
			}
			ops.Go(func() {
				r := &cloud.Route{TargetNode: types.NodeName(n.Name), DestinationCIDR: cidr}
				if err := c.routes.CreateRoute(ctx, c.clusterName, string(n.UID), r); err != nil {
					mu.Lock()
					failed[n.Name] = true
					mu.Unlock()
					c.recorder.Eventf(n, corev1.EventTypeWarning, "FailedToCreateRoute",
						"Could not create route %s %s for node %s: %v", n.UID, cidr, n.Name, err)
					c.log.Warn("could not create route", slog.String("object", n.Name), slog.String("cidr", cidr), slog.Any("err", err))
					return
				}
				c.log.Info(fmt.Sprintf("pod CIDR %s → route created", cidr), slog.String("object", n.Name))
			})
		}
	}
	ops.Wait()

	for _, n := range nodes {
		if len(podCIDRs(n)) == 0 && len(have[types.NodeName(n.Name)]) == 0 {
			continue // no pod CIDR yet, and no route: nothing to say
		}
		created := len(podCIDRs(n)) > 0 && !failed[n.Name]
		if err := c.setNetworkCondition(ctx, n, created); err != nil && ctx.Err() == nil {
			c.log.Warn("could not update the NetworkUnavailable condition", slog.String("object", n.Name), slog.Any("err", err))
		}
	}
	return nil
}

// setNetworkCondition sets the node's NetworkUnavailable condition: False
// (RouteCreated) when its routes exist, True (NoRouteCreated) otherwise,
// unless it already says so.
func (c *Controller) setNetworkCondition(ctx context.Context, n *corev1.Node, routesCreated bool) error {
	cond := corev1.NodeCondition{
		Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse,
		Reason: ReasonRouteCreated, Message: "RouteController created a route",
	}
	if !routesCreated {
		cond.Status, cond.Reason, cond.Message = corev1.ConditionTrue, ReasonNoRouteCreated, "RouteController failed to create a route"
	}
	for _, cur := range n.Status.Conditions {
		if cur.Type == cond.Type && cur.Status == cond.Status && cur.Reason == cond.Reason {
			return nil
		}
	}
	now := metav1.NewTime(c.clock.Now())
	cond.LastTransitionTime, cond.LastHeartbeatTime = now, now
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
	if err != nil {
		return err
	}
	// Conditions merge by type: the patch sets this one and leaves the
	// kubelet's alone.
	if _, err := c.nodes.Patch(ctx, "", n.Name, types.StrategicMergePatchType, patch, "status"); err != nil {
		return err
	}
	c.log.Info(fmt.Sprintf("NetworkUnavailable → %s (%s)", cond.Status, cond.Reason), slog.String("object", n.Name))
	return nil
}

// responsibleFor: the route's destination overlaps the cluster CIDR.
func (c *Controller) responsibleFor(r *cloud.Route) bool {
	_, cidr, err := net.ParseCIDR(r.DestinationCIDR)
	if err != nil {
		c.log.Warn("ignoring route with an unparsable CIDR", slog.String("route", r.Name), slog.String("cidr", r.DestinationCIDR))
		return false
	}
	last := make(net.IP, len(cidr.IP))
	for i := range cidr.IP {
		last[i] = cidr.IP[i] | ^cidr.Mask[i]
	}
	for _, cluster := range c.clusterCIDRs {
		if cluster.Contains(cidr.IP) || cluster.Contains(last) {
			return true
		}
	}
	return false
}

// podCIDRs are the node's pod CIDRs: spec.podCIDRs, or spec.podCIDR alone
// for a node written before podCIDRs existed.
func podCIDRs(n *corev1.Node) []string {
	if len(n.Spec.PodCIDRs) > 0 {
		return n.Spec.PodCIDRs
	}
	if n.Spec.PodCIDR != "" {
		return []string{n.Spec.PodCIDR}
	}
	return nil
}

// limiter runs functions with at most n at once.
type limiter struct {
	wg  sync.WaitGroup
	sem chan struct{}
}

func newLimiter(n int) *limiter { return &limiter{sem: make(chan struct{}, n)} }

func (l *limiter) Go(f func()) {
	l.wg.Go(func() {
		l.sem <- struct{}{}
		defer func() { <-l.sem }()
		f()
	})
}

func (l *limiter) Wait() { l.wg.Wait() }
