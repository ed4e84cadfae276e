// Package clusterroleaggregation fills the rules of every ClusterRole that
// has an aggregationRule with the rules of the ClusterRoles its selectors
// match, as kube-controller-manager's clusterrole-aggregation controller
// does: admin, edit and view grow when an extension labels a ClusterRole
// rbac.authorization.k8s.io/aggregate-to-view: "true".
//
// Properties:
//
//   - An aggregated ClusterRole's rules are the rules of the ClusterRoles
//     any of its selectors match (itself excepted), in the order of their
//     names, each rule once.
//   - A change to any ClusterRole (a label, a rule) brings every
//     aggregated ClusterRole up to date; so does a role that goes away.
//   - A ClusterRole without an aggregationRule is never written.
package clusterroleaggregation

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's kube-controller-manager name: its --controllers
// name, its logger's controller attribute and its workqueue's name.
const Name = "clusterrole-aggregation"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required); it has no knobs of its own.
type Options struct {
	controller.Common
}

// Controller keeps aggregated ClusterRoles' rules. Its queue holds the
// names of aggregated ClusterRoles.
type Controller struct {
	clusterRoles *client.Client[*rbacv1.ClusterRole]
	lister       informer.Lister[*rbacv1.ClusterRole]
	synced       []func() bool

	queue *workqueue.Queue[string]
	log   *slog.Logger
}

// New returns a controller reading ClusterRoles from opts.Informers. Call
// Run to start it.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	c := &Controller{
		clusterRoles: client.For[*rbacv1.ClusterRole](opts.Client),
		queue:        controller.NewQueue[string](Name, opts.Common),
		log:          opts.Logger,
	}
	inf := informer.For[*rbacv1.ClusterRole](opts.Informers)
	c.lister = inf.Lister()
	reg, err := inf.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(any, bool) { c.enqueueAggregated() },
		UpdateFunc: func(any, any) { c.enqueueAggregated() },
		DeleteFunc: func(any) { c.enqueueAggregated() },
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c.synced = []func() bool{reg.HasSynced}
	return c, nil
}

// enqueueAggregated queues every aggregated ClusterRole: any change to
// any ClusterRole may change what a selector matches.
func (c *Controller) enqueueAggregated() {
	for _, r := range c.lister.List(labels.Everything()) {
		if r.AggregationRule != nil {
			c.queue.Add(r.Name)
		}
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

// processNextWorkItem syncs one aggregated ClusterRole, and leaves it to
// controller.HandleErr to decide whether to retry it. It returns false
// once the queue is shut down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	controller.HandleErr(ctx, c.log, c.queue, name, c.sync(ctx, name))
	return true
}

// sync gives the aggregated ClusterRole name the rules of the
// ClusterRoles its selectors match.
func (c *Controller) sync(ctx context.Context, name string) error {
	role, err := c.lister.Get("", name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if role.AggregationRule == nil {
		return nil
	}
	var sources []*rbacv1.ClusterRole
	for _, sel := range role.AggregationRule.ClusterRoleSelectors {
		selector, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			return nil // validation keeps such selectors out; nothing to retry
		}
		for _, m := range c.lister.List(selector) {
			if m.Name != name && !slices.Contains(sources, m) {
				sources = append(sources, m)
			}
		}
	}
	slices.SortFunc(sources, func(a, b *rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
	rules := []rbacv1.PolicyRule{}
	for _, src := range sources {
		for _, r := range src.Rules {
			if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(have, r) }) {
				rules = append(rules, r)
			}
		}
	}
	if equality.Semantic.DeepEqual(rules, role.Rules) {
		return nil
	}
	updated := role.DeepCopy()
	updated.Rules = rules
	if _, err := c.clusterRoles.Update(ctx, updated); err != nil {
		return err
	}
	c.log.Info(fmt.Sprintf("clusterrole %s: %d rules from %d aggregated ClusterRoles", name, len(rules), len(sources)))
	return nil
}
