package garbagecollector

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/informer"
)

// DefaultResyncPeriod is how often the collector reads discovery again,
// as kube-controller-manager's does (every 30 s).
const DefaultResyncPeriod = 30 * time.Second

// deletableVerbs are what a resource must serve for the collector to
// handle it: kube's "deletable" resources.
var deletableVerbs = []string{"list", "watch", "delete"}

// ignoredResources are never watched nor collected, whatever their owner
// references say: Events, as kube-controller-manager's collector leaves
// them (garbagecollector.DefaultIgnoredResources). A cluster writes
// several Events per pod and keeps them for an hour; the kubelet's and
// the scheduler's Events name the pod in involvedObject, not as an
// owner, so watching them would cost the collector a copy of each and
// decide nothing.
var ignoredResources = map[schema.GroupResource]bool{
	{Group: "", Resource: "events"}:              true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

// Discovery is where the collector learns what the server serves;
// *client.RESTClient is one.
type Discovery interface {
	ServerPreferredResources(ctx context.Context) (client.ServedResources, error)
}

// monitor is the collector's subscription to one resource's informer, the
// process's shared one. A kind only discovery knows may go away; the
// monitor is closed then, and the informer stops with its last user.
type monitor struct {
	res   *api.Resource
	cache informer.Indexer
	sub   *informer.Subscription
}

// stop closes the monitor: once it returns, its handler is called no more,
// and the informer has stopped if nothing else uses it.
func (m *monitor) stop() { m.sub.Close() }

// sameShape reports whether two entries for one group, version and plural
// are interchangeable for the collector.
func sameShape(a, b *api.Resource) bool {
	return a == b || (a.Kind == b.Kind && a.Namespaced == b.Namespaced && a.Unstructured() == b.Unstructured())
}

func gvrOf(res *api.Resource) schema.GroupVersionResource {
	return res.GroupVersion().WithResource(res.Plural)
}

// resync reads discovery and makes the monitors match it: one for every
// deletable resource, started for a new one, stopped for one no longer
// served. A group version discovery could not read keeps its monitors.
// It returns false when discovery gave nothing to go on.
func (gc *Controller) resync(ctx context.Context) bool {
	served, err := gc.discovery.ServerPreferredResources(ctx)
	failed := map[schema.GroupVersion]bool{}
	if err != nil {
		gerr, partial := client.IsGroupDiscoveryFailed(err)
		if !partial && served == nil {
			if ctx.Err() == nil { // a stop cut it short: nothing failed
				gc.log.Warn("discovery failed → keep the resources watched so far", slog.Any("err", err))
			}
			return false
		}
		if partial {
			for gv := range gerr.Groups {
				failed[gv] = true
			}
		}
		gc.log.Warn("discovery incomplete → keep watching the resources of the groups it could not read", slog.Any("err", err))
	}
	want := map[schema.GroupVersionResource]*api.Resource{}
	for _, res := range served.Catalogue(deletableVerbs...) {
		if !ignoredResources[res.GroupResource()] {
			want[gvrOf(res)] = res
		}
	}

	gc.mu.Lock()
	var stopping []*monitor
	for gvr, m := range gc.monitors {
		if res, ok := want[gvr]; ok && sameShape(res, m.res) {
			continue
		}
		if _, ok := want[gvr]; !ok && failed[gvr.GroupVersion()] {
			continue
		}
		delete(gc.monitors, gvr)
		stopping = append(stopping, m)
		gc.log.Info("resource no longer served → stop watching it", slog.String("resource", m.res.GroupResource().String()))
	}
	var started []*monitor
	for gvr, res := range want {
		if _, ok := gc.monitors[gvr]; ok {
			continue
		}
		m, err := gc.startMonitor(res)
		if err != nil {
			gc.log.Warn("cannot watch resource", slog.String("resource", res.GroupResource().String()), slog.Any("err", err))
			continue
		}
		gc.monitors[gvr] = m
		started = append(started, m)
	}
	catalogue := make(api.Catalogue, 0, len(gc.monitors))
	for _, m := range gc.monitors {
		catalogue = append(catalogue, m.res)
	}
	gc.mu.Unlock()

	for _, m := range stopping {
		m.stop()
	}
	if len(started) > 0 {
		gc.informers.Start(ctx) // the informers just subscribed to
		if gc.resyncs.Load() > 0 {
			gc.log.Info("new resources served → watch them", slog.Int("resources", len(started)))
		}
	}
	gc.resyncs.Add(1)
	gc.changes.Add(&graphChange{kind: changeResources, resources: catalogue})
	return true
}

// startMonitor subscribes the collector to res's informer; the factory's
// next Start runs it. Called with gc.mu held.
func (gc *Controller) startMonitor(res *api.Resource) (*monitor, error) {
	m := &monitor{res: res}
	sub, err := gc.informers.Subscribe(res, informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { gc.enqueueChange(m, changeObserved, obj) },
		UpdateFunc: func(_, obj any) { gc.enqueueChange(m, changeObserved, obj) },
		DeleteFunc: func(obj any) { gc.enqueueChange(m, changeDeleted, obj) },
	})
	if err != nil {
		return nil, err
	}
	m.sub, m.cache = sub, sub.Informer.GetIndexer()
	return m, nil
}

// missPause is the least time between two discovery reads asked for by
// misses: objects that name a kind nobody serves do not make the collector
// read discovery in a loop.
const missPause = time.Second

// runResync reads discovery every resync period, and soon when a worker
// met an owner reference of a kind it does not know (nudge), until ctx is
// done; then it stops every monitor.
func (gc *Controller) runResync(ctx context.Context) {
	defer gc.stopMonitors()
	for {
		t := gc.clock.NewTimer(gc.resyncPeriod)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-gc.missed:
			t.Stop()
			gc.log.Debug("an owner reference names a kind not known → read discovery again")
		}
		gc.resync(ctx)
		if !clock.Sleep(ctx, gc.clock, missPause) {
			return
		}
	}
}

// nudge asks for discovery to be read again soon: a kind was missed.
func (gc *Controller) nudge() {
	select {
	case gc.missed <- struct{}{}:
	default:
	}
}

func (gc *Controller) stopMonitors() {
	gc.mu.Lock()
	monitors := gc.monitors
	gc.monitors = map[schema.GroupVersionResource]*monitor{}
	gc.mu.Unlock()
	for _, m := range monitors {
		m.stop()
	}
}

// syncedFuncs returns the HasSynced of every monitor.
func (gc *Controller) syncedFuncs() []func() bool {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	var out []func() bool
	for _, m := range gc.monitors {
		out = append(out, m.sub.HasSynced)
	}
	return out
}

// monitorOf returns the monitor of res, if it is watched.
func (gc *Controller) monitorOf(res *api.Resource) (*monitor, bool) {
	if res == nil {
		return nil, false
	}
	gc.mu.Lock()
	defer gc.mu.Unlock()
	m, ok := gc.monitors[gvrOf(res)]
	return m, ok
}
