// Package resourcequota is the ResourceQuota controller: it keeps every
// quota's status true, as kube-controller-manager's resourcequota
// controller does. status.hard mirrors spec.hard; status.used is what the
// namespace uses of each limited resource that can be measured: pods,
// services, configmaps, secrets, count/<resource>.<group> of every kind
// the API server's discovery lists with create, list, watch and delete
// (read again every 30 s, as kube's quota controller does; each kind
// watched through an informer by descriptor), requests.cpu,
// requests.memory, limits.cpu, limits.memory and the rest of api/quota's
// names. The API server's quota admission checks requests against that
// status, with the same api/quota arithmetic.
//
// Properties:
//
//   - Usage is measured from informer caches only, with api/quota's rules:
//     terminal pods, and pods past their deletion grace period, count for
//     count/pods but no longer for pods, cpu or memory; a scoped quota
//     counts only the pods in its scopes.
//   - A kind is watched once some quota names a resource it is charged
//     under: its informer is taken from the shared factory (and started)
//     on first need, or, for a kind without a Go type, run by the
//     controller; a quota that needs it waits for its cache before it is
//     measured. The informer the controller runs for a kind stops, its
//     goroutines gone, when discovery no longer lists the kind, and all
//     of them when Run returns.
//   - A namespace's quotas are measured again when an object of a kind they
//     count is deleted, or changes what it is charged for (a pod turning
//     Succeeded, a service becoming a LoadBalancer); not when one is
//     added, which admission charged already (as upstream's quota
//     monitor), so that n new pods do not cost n measures of every pod in
//     the namespace. A quota is
//     measured again when its spec changes, and every quota is, every
//     ResyncPeriod. Status changes made by others (by hand) wait for that
//     resync, as upstream's do; the controller's own status write is
//     measured against once more when the cache shows it, so that a sync
//     that ran on a cache behind that write cannot leave status stale.
//   - status is written (through the status subresource) only when hard or
//     used changed, compared by value ("1000m" is "1"); each write logs one
//     line: "resourcequota team-a/compute: used pods 2→3 (hard 5)".
//   - A resource in spec.hard that no served kind is charged
//     under ("requests.storage", "count/gadgets.example.com") keeps whatever
//     status.used held for it, as upstream does.
//
// Handlers only enqueue quota keys; every decision is made in sync.
package resourcequota

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/api/quota"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// DefaultResyncPeriod is how often every quota is measured again in full,
// kube-controller-manager's --resource-quota-sync-period.
const DefaultResyncPeriod = 5 * time.Minute

// cachePoll is how soon a quota waiting for a kind's cache is tried again.
const cachePoll = 100 * time.Millisecond

// Name is the controller's kube-controller-manager name: its --controllers
// name, its logger's controller attribute and its workqueue's name.
const Name = "resourcequota"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required), and its own. It writes quota status
// through Client. The caller starts Informers after New; the controller
// starts it again itself (with Run's context) when a quota makes it watch
// a new kind. Its Recorder gets a Warning on a quota whose scope selector
// cannot be evaluated; its Clock times resyncs and pod grace periods.
type Options struct {
	controller.Common
	// ResyncPeriod is the time between full recalculations of every
	// quota; 0 means DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Discovery is where it learns the kinds a quota can count
	// (count/<resource>.<group> and the rest). Nil: Client.
	Discovery Discovery
	// DiscoveryPeriod is how often it reads discovery again; 0 means
	// DefaultDiscoveryPeriod.
	DiscoveryPeriod time.Duration
}

// Controller is the ResourceQuota controller. Create it with New, then Run
// it.
type Controller struct {
	quotas      *client.Client[*corev1.ResourceQuota]
	quotaLister informer.Lister[*corev1.ResourceQuota]
	quotaSynced func() bool
	informers   *informer.SharedInformerFactory

	queue    *workqueue.Queue[string]
	recorder record.EventRecorder
	log      *slog.Logger
	resync   time.Duration
	clock    clock.Clock

	discovery       Discovery
	discoveryPeriod time.Duration

	// mu guards the fields below. sources holds the source of every kind
	// some quota has needed; a source stays while its kind is served, and
	// is closed when discovery no longer lists the kind, or with Run. written
	// holds, per quota key, the resourceVersion of the status this
	// controller last wrote, until the quota informer shows it. resources
	// is what discovery said at discoveredAt (zero: not yet), with the
	// entries of sources reused.
	mu           sync.Mutex
	sources      map[*api.Resource]*source
	written      map[string]string
	resources    api.Catalogue
	discoveredAt time.Time
}

// New returns a controller reading from opts.Informers, with its quota
// handlers registered. Nothing runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	c := &Controller{
		quotas:          client.For[*corev1.ResourceQuota](opts.Client),
		informers:       opts.Informers,
		discovery:       opts.Discovery,
		discoveryPeriod: opts.DiscoveryPeriod,
		queue:           controller.NewQueue[string](Name, opts.Common),
		recorder:        opts.Recorder,
		log:             opts.Logger,
		resync:          opts.ResyncPeriod,
		clock:           opts.Clock,
		sources:         map[*api.Resource]*source{},
		written:         map[string]string{},
	}
	if c.resync <= 0 {
		c.resync = DefaultResyncPeriod
	}
	if c.discovery == nil {
		c.discovery = opts.Client
	}
	if c.discoveryPeriod <= 0 {
		c.discoveryPeriod = DefaultDiscoveryPeriod
	}

	quotaInformer := informer.For[*corev1.ResourceQuota](opts.Informers)
	c.quotaLister = quotaInformer.Lister()
	reg, err := quotaInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueue(obj) },
		UpdateFunc: c.updateQuota,
		// A deleted quota has nothing left to keep true; its sync, if one
		// is queued, finds it gone.
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("resourcequota: %w", err)
	}
	c.quotaSynced = reg.HasSynced
	return c, nil
}

// Run waits for the quota cache, runs workers workers and the periodic
// full recalculation, and blocks until ctx is done; then it shuts the
// queue down and waits for all of them.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	c.log.Info("starting", "workers", workers, "resyncPeriod", c.resync)
	if !informer.WaitForCacheSync(ctx, c.quotaSynced) {
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
	wg.Go(func() { c.resyncLoop(ctx) })
	wg.Go(func() { c.discoveryLoop(ctx) })
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	c.stopSources()
	c.log.Info("stopped")
}

// resyncLoop enqueues every quota every resync period, so that what no
// event told us about (a pod's grace period running out, a status changed
// by hand) is set right.
func (c *Controller) resyncLoop(ctx context.Context) {
	for {
		timer := c.clock.NewTimer(c.resync)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
		all := c.quotaLister.List(nil)
		c.log.Debug(fmt.Sprintf("full recalculation of %d quotas", len(all)), slog.Int("quotas", len(all)))
		for _, q := range all {
			c.enqueue(q)
		}
	}
}

// processNextWorkItem syncs one quota, and leaves it to
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

// sync measures one quota's usage and writes its status if it changed.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		c.log.Error("bad key", "key", key, "err", err)
		return nil // a malformed key never gets better
	}
	q, err := c.quotaLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		c.mu.Lock()
		delete(c.written, key)
		c.mu.Unlock()
		return nil // the quota is gone; nothing to keep true
	}
	if err != nil {
		return err
	}

	// The kinds this quota counts, each with a filled cache.
	hardNames := quota.ResourceNames(q.Spec.Hard)
	sources, err := c.sourcesFor(ctx, hardNames)
	if err != nil {
		return err
	}
	for _, s := range sources {
		if !s.synced() {
			// Not a failure: look again shortly, without backing off.
			return workqueue.RequeueAfter(cachePoll, s.res.GroupResource().String()+" cache not synced")
		}
	}

	measured, err := measure(q, sources, c.clock.Now())
	if err != nil {
		c.log.Error("cannot measure usage", slog.String("object", key), slog.Any("err", err))
		c.recorder.Eventf(q, corev1.EventTypeWarning, "InvalidScopeSelector", "Cannot measure usage: %v", err)
		return nil // only a change to the quota's scopes can fix this; that enqueues it
	}
	if uncovered := without(hardNames, quota.ResourceNames(measured)); len(uncovered) > 0 {
		c.log.Debug(fmt.Sprintf("nothing served is charged under %v; their usage is left as is", uncovered), slog.String("object", key))
	}

	status := corev1.ResourceQuotaStatus{
		Hard: q.Spec.Hard.DeepCopy(),
		// Keep what we cannot measure, replace what we can, and drop
		// what is no longer limited.
		Used: quota.Mask(overlay(q.Status.Used, measured), hardNames),
	}
	if quota.Equals(status.Hard, q.Status.Hard) && quota.Equals(status.Used, q.Status.Used) {
		c.log.Debug("usage unchanged", slog.String("object", key))
		return nil
	}
	// Admission adds to status.used before it writes an object, so a cache
	// older than the quota may not hold objects already charged. Lowering
	// usage from such a cache would let admission hand out a slot twice:
	// wait until every cache has seen the quota's revision (resourceVersions
	// are etcd revisions, so they compare).
	if lowers(q.Status.Used, status.Used) {
		qrv, _ := strconv.ParseInt(q.ResourceVersion, 10, 64)
		for _, s := range sources {
			if rv := s.revision(); s.revision != nil && rv < qrv {
				c.log.Debug(fmt.Sprintf("%s cache at %d, quota at %d → wait before lowering usage", s.res.Plural, rv, qrv),
					slog.String("object", key))
				c.queue.AddAfter(key, time.Second)
				return nil
			}
		}
	}
	updated := q.DeepCopy()
	updated.Status = status
	stored, err := c.quotas.UpdateStatus(ctx, updated)
	if err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	c.mu.Lock()
	c.written[key] = stored.ResourceVersion
	c.mu.Unlock()
	c.log.Info(story(q.Status, status), slog.String("object", key),
		slog.Any("hard", asStrings(status.Hard)), slog.Any("from", asStrings(q.Status.Used)), slog.Any("to", asStrings(status.Used)))
	return nil
}

// sourcesFor returns the sources of the kinds charged under any of names,
// opening (and starting, on ctx) the informers of kinds needed for the
// first time.
func (c *Controller) sourcesFor(ctx context.Context, names []corev1.ResourceName) ([]*source, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.discoveredAt.IsZero() {
		if _, err := c.discoverLocked(ctx); err != nil {
			return nil, err
		}
	}
	var out []*source
	opened := false
	for _, res := range c.resources {
		if len(quota.MatchingResources(res, names)) == 0 {
			continue
		}
		s, ok := c.sources[res]
		if !ok {
			var err error
			if s, err = openSource(c.informers, res, c.objectHandler(res)); err != nil {
				return nil, err
			}
			c.sources[res] = s
			opened = true
			c.log.Info(fmt.Sprintf("a quota counts %s → watch them", res.GroupResource()),
				slog.String("resource", res.GroupResource().String()))
		}
		out = append(out, s)
	}
	if opened {
		c.informers.Start(ctx)
	}
	return out, nil
}

// measure returns the usage, in namespace q.Namespace, of every resource in
// q's spec.hard that the sources' kinds are charged under: zero when
// nothing uses it.
func measure(q *corev1.ResourceQuota, sources []*source, now time.Time) (corev1.ResourceList, error) {
	hardNames := quota.ResourceNames(q.Spec.Hard)
	used := corev1.ResourceList{}
	for _, s := range sources {
		names := quota.MatchingResources(s.res, hardNames)
		for _, name := range names {
			if _, ok := used[name]; !ok {
				used[name] = resource.Quantity{Format: resource.DecimalSI}
			}
		}
		for _, obj := range s.list(q.Namespace) {
			in, err := quota.MatchesScopes(q, s.res, obj)
			if err != nil {
				return nil, err
			}
			if in {
				used = quota.Add(used, quota.Mask(quota.ObjectUsageAt(s.res, obj, now), names))
			}
		}
	}
	return used, nil
}

// --- event handlers: they only enqueue ---

func (c *Controller) enqueue(obj any) {
	key, err := informer.MetaNamespaceKeyFunc(obj)
	if err != nil {
		c.log.Error("cannot key object", "err", err)
		return
	}
	c.queue.Add(key)
}

// updateQuota enqueues a quota whose spec changed, and one whose status
// write by this controller has just reached the cache: a sync that ran
// before it compared against an older status, and may have skipped a write
// it needed. Other status changes (by hand) wait for the resync.
func (c *Controller) updateQuota(oldObj, curObj any) {
	old, ok1 := oldObj.(*corev1.ResourceQuota)
	cur, ok2 := curObj.(*corev1.ResourceQuota)
	if !ok1 || !ok2 || !apiequality.Semantic.DeepEqual(old.Spec, cur.Spec) {
		c.enqueue(curObj)
		return
	}
	key, err := informer.MetaNamespaceKeyFunc(cur)
	if err != nil {
		return
	}
	c.mu.Lock()
	ours := c.written[key] == cur.ResourceVersion
	if ours {
		delete(c.written, key)
	}
	c.mu.Unlock()
	if ours {
		c.queue.Add(key)
	}
}

// objectHandler is the handler on the informer of res's objects. It has no
// AddFunc: the API server's admission charged a new object to its quotas
// before writing it, and measuring the namespace again (every object of
// the kind) for each new one would make creating n objects cost n²; the
// quota that opened the source measures what it holds once synced, and the
// resync catches the rest.
func (c *Controller) objectHandler(res *api.Resource) informer.ResourceEventHandler {
	return informer.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, curObj any) {
			old, ok1 := oldObj.(api.Object)
			cur, ok2 := curObj.(api.Object)
			if !ok1 || !ok2 {
				return
			}
			now := c.clock.Now()
			if quota.Equals(quota.ObjectUsageAt(res, old, now), quota.ObjectUsageAt(res, cur, now)) {
				return // charged for the same as before
			}
			c.objectChanged(res, cur)
		},
		DeleteFunc: func(obj any) { c.objectChanged(res, obj) },
	}
}

// objectChanged enqueues the quotas of obj's namespace that count res.
func (c *Controller) objectChanged(res *api.Resource, obj any) {
	o, ok := controller.ObjectFromDelete[api.Object](obj)
	if !ok {
		return
	}
	for _, q := range c.quotaLister.ByNamespace(o.GetNamespace()).List(nil) {
		if len(quota.MatchingResources(res, quota.ResourceNames(q.Spec.Hard))) > 0 {
			c.enqueue(q)
		}
	}
}

// --- small pure helpers ---

// overlay returns base with every entry of top put over it.
func overlay(base, top corev1.ResourceList) corev1.ResourceList {
	out := base.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range top {
		out[name] = q.DeepCopy()
	}
	return out
}

// without returns the names of a not in b.
func without(a, b []corev1.ResourceName) []corev1.ResourceName {
	return slices.DeleteFunc(slices.Clone(a), func(n corev1.ResourceName) bool { return slices.Contains(b, n) })
}

// story tells what a status write changes, sorted by name:
// "hard pods 5→10; used pods 2→3 (hard 10), requests.cpu 200m→300m (hard 2)".
func story(old, cur corev1.ResourceQuotaStatus) string {
	var parts []string
	if changes := changed(old.Hard, cur.Hard, nil); len(changes) > 0 {
		parts = append(parts, "hard "+strings.Join(changes, ", "))
	}
	if changes := changed(old.Used, cur.Used, cur.Hard); len(changes) > 0 {
		parts = append(parts, "used "+strings.Join(changes, ", "))
	}
	return strings.Join(parts, "; ")
}

// changed lists "name old→new" for each name whose value differs between
// before and after ("none" where it is missing), with " (hard h)" when
// hard has it.
func changed(before, after, hard corev1.ResourceList) []string {
	var out []string
	for _, name := range quota.ResourceNames(overlay(before, after)) {
		b, inBefore := before[name]
		a, inAfter := after[name]
		if inBefore && inAfter && b.Cmp(a) == 0 {
			continue
		}
		line := string(name) + " " + quantityOrNone(b, inBefore) + "→" + quantityOrNone(a, inAfter)
		if h, ok := hard[name]; ok {
			line += " (hard " + h.String() + ")"
		}
		out = append(out, line)
	}
	return out
}

// asStrings is l as a log attribute's value: {"pods": "3"}.
func asStrings(l corev1.ResourceList) map[string]string {
	out := make(map[string]string, len(l))
	for name, q := range l {
		out[string(name)] = q.String()
	}
	return out
}

func quantityOrNone(q resource.Quantity, ok bool) string {
	if !ok {
		return "none"
	}
	return q.String()
}

// lowers reports whether next gives any resource less usage than cur.
func lowers(cur, next corev1.ResourceList) bool {
	for name, q := range cur {
		if n, ok := next[name]; ok && n.Cmp(q) < 0 {
			return true
		}
	}
	return false
}
