package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/store"
)

// A resource can be served without a watch cache, as kube-apiserver
// serves Events (its --watch-cache-sizes, whose default is events#0):
// Events are the most numerous objects of a busy cluster, each written
// once or a few times and read by few, and holding them all in memory
// costs more than reading them from etcd when asked.
//
// Such a resource's watchCache is uncached: it keeps no objects and no
// window, and is never ready, so that a get reads etcd (serveGet), a list
// reads etcd (serveList, consistentList), and an update starts from what
// etcd holds (resourceStore.update). Each watch is its own etcd watch,
// from the revision the client asked for; a goroutine of the watch, its
// relay, turns etcd's events into the watcher's items exactly as the
// cache dispatches them (itemFor), and ends with the watch. What the
// cache promises its watchers holds: the events a watcher's filter
// selects, in revision order, from its revision, or 410 Gone when etcd
// has compacted it; a watcher that does not keep up is closed.

// DefaultWatchCacheSizes are kube-apiserver's: Events are served from
// etcd, every other resource from its watch cache.
func DefaultWatchCacheSizes() map[schema.GroupResource]int {
	return map[schema.GroupResource]int{{Resource: "events"}: 0}
}

// ParseWatchCacheSizes reads kube-apiserver's --watch-cache-sizes:
// comma-separated resource[.group]#size, the resource in lower-case
// plural, the group left out for the core API ("events#0",
// "deployments.apps#100").
func ParseWatchCacheSizes(s string) (map[schema.GroupResource]int, error) {
	sizes := map[schema.GroupResource]int{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, size, ok := strings.Cut(item, "#")
		n, err := strconv.Atoi(size)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("%q: give resource[.group]#size, such as events#0", item)
		}
		resource, group, _ := strings.Cut(name, ".")
		sizes[schema.GroupResource{Group: group, Resource: resource}] = n
	}
	return sizes, nil
}

// cacheOptional are the resources that may be served without a watch
// cache: those no part of the API server reads from its own caches, as
// admission, authorization and the service allocator read the others.
var cacheOptional = map[schema.GroupResource]bool{{Resource: "events"}: true}

// uncachedResources is which of builtins are served without a watch
// cache: those sizes gives 0, and those DefaultWatchCacheSizes does that
// sizes does not name.
func uncachedResources(builtins api.Catalogue, sizes map[schema.GroupResource]int) (map[*api.Resource]bool, error) {
	stored := func(gr schema.GroupResource) []*api.Resource {
		var out []*api.Resource
		for _, res := range builtins {
			if res.GroupResource() == gr && !res.CreateOnly && !res.ReadOnly {
				out = append(out, res)
			}
		}
		return out
	}
	uncached := map[*api.Resource]bool{}
	for gr, n := range DefaultWatchCacheSizes() {
		for _, res := range stored(gr) {
			uncached[res] = n == 0
		}
	}
	for gr, n := range sizes {
		found := stored(gr)
		switch {
		case n < 0:
			return nil, fmt.Errorf("watch cache size of %s is %d: give 0 (no watch cache) or more", gr, n)
		case len(found) == 0:
			return nil, fmt.Errorf("watch cache size of %s: no built-in resource of that name is stored (give resource[.group], such as events or deployments.apps)", gr)
		case n == 0 && !cacheOptional[gr]:
			return nil, fmt.Errorf("watch cache size of %s is 0: minictl serves only events without a watch cache; the API server reads %s from its own caches", gr, gr)
		}
		for _, res := range found {
			uncached[res] = n == 0
		}
	}
	return uncached, nil
}

// relay is the goroutine that feeds an uncached resource's watcher.
type relay struct {
	cancel context.CancelFunc // ends the relay; it then closes the watcher's channel
	done   chan struct{}      // closed when the relay has ended
}

// prefixFor is where the objects f can select live in etcd: one
// namespace's keys, or all of the resource's.
func (c *watchCache) prefixFor(f *filter) string {
	if c.res.Namespaced && f.namespace != "" {
		return c.prefix + f.namespace + "/"
	}
	return c.prefix
}

// listEtcd lists, in key order, the objects f selects as etcd holds them
// now, with the revision they are current at, reading pages of
// fillPageSize keys at one revision.
func (c *watchCache) listEtcd(ctx context.Context, f *filter) ([]*cachedObject, int64, error) {
	prefix := c.prefixFor(f)
	var out []*cachedObject
	opts := store.ListOptions{Limit: fillPageSize}
	for {
		page, err := c.store.List(ctx, prefix, opts)
		if err != nil {
			return nil, 0, err
		}
		for _, kv := range page.Items {
			o, err := c.fromEtcd(kv.Key, kv.Value, kv.Revision)
			if err != nil {
				return nil, 0, err
			}
			if f.matches(o) {
				out = append(out, o)
			}
		}
		if !page.More || len(page.Items) == 0 {
			return out, page.Revision, nil
		}
		opts = store.ListOptions{Revision: page.Revision, Limit: fillPageSize, StartKey: page.Items[len(page.Items)-1].Key + "\x00"}
	}
}

// fromEtcd is a stored value, at revision rev, as a cached object. Only
// built-in resources, which have one version, are served uncached.
func (c *watchCache) fromEtcd(key string, value []byte, rev int64) (*cachedObject, error) {
	obj, err := decodeFromStorage(c.res, value, rev)
	if err != nil {
		return nil, err
	}
	return c.wrap(c.res, key, obj, stampedProtobuf(value, rev))
}

// watchEtcd is watch for an uncached resource: the initial objects, if
// asked for, are listed from etcd, and the watcher's relay follows etcd
// from the revision after them, or after from.
func (c *watchCache) watchEtcd(ctx context.Context, from int64, initial bool, f filter, bookmarks bool) ([]watchItem, int64, *cacheWatcher, error) {
	cur, err := c.store.Revision(ctx)
	if err != nil {
		return nil, 0, nil, storageError(c.res, err, "")
	}
	if from > cur {
		return nil, 0, nil, errTooLargeResourceVersion(from, cur)
	}
	var items []watchItem
	if initial {
		objs, rev, err := c.listEtcd(ctx, &f)
		if err != nil {
			return nil, 0, nil, storageError(c.res, err, "")
		}
		for _, o := range objs {
			items = append(items, watchItem{typ: watch.Added, obj: o, rv: o.rv})
		}
		from = rev
	} else if floor := c.store.CompactedRevision(); from < floor {
		return nil, 0, nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, floor))
	}
	// The relay outlives this call: it is ended by stop, by the end of
	// the cache (stopAll), or by itself (etcd failed, or the watcher fell
	// behind), never by ctx, whose request stops it on its way out.
	rctx, cancel := context.WithCancel(context.Background())
	w := &cacheWatcher{filter: f, bookmarks: bookmarks, ch: make(chan watchItem, c.buffer),
		relay: &relay{cancel: cancel, done: make(chan struct{})}}
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		cancel()
		return nil, 0, nil, apierrors.NewServiceUnavailable("the server is shutting down")
	}
	c.watchers.place(w)
	c.watchers.add(w)
	c.metrics.watchers.WithLabelValues(c.res.Plural).Inc()
	c.mu.Unlock()
	events := c.store.Watch(rctx, c.prefixFor(&f), from+1)
	go c.relayEvents(rctx, w, events)
	return items, from, w, nil
}

// relayEvents hands w the items of etcd's events until the watch fails, w
// falls behind, or w is stopped; then it closes w's channel, which only it
// sends on.
func (c *watchCache) relayEvents(ctx context.Context, w *cacheWatcher, events <-chan store.WatchEvent) {
	defer close(w.relay.done)
	defer close(w.ch)
	defer func() {
		c.mu.Lock()
		c.stopLocked(w)
		c.mu.Unlock()
	}()
	gauge := c.metrics.etcdWatches.WithLabelValues(c.res.Plural)
	gauge.Inc()
	defer gauge.Dec()
	for {
		var ev store.WatchEvent
		var ok bool
		select {
		case ev, ok = <-events:
		case <-ctx.Done():
			return
		}
		if !ok || ctx.Err() != nil {
			return
		}
		item, send, err := c.relayed(&w.filter, ev, w.bookmarks)
		if err != nil {
			w.err = err
			return
		}
		if !send {
			continue
		}
		select {
		case w.ch <- item:
		default:
			if item.typ == watch.Bookmark {
				continue // a full buffer skips a bookmark, as the cache's does
			}
			c.log.Debug("closing a watcher that did not keep up", "buffer", c.buffer)
			c.metrics.closedSlow.WithLabelValues(c.res.Plural).Inc()
			return
		}
	}
}

// relayed is one etcd event as the watcher of f sees it (see itemFor),
// and whether it sees it at all; an error ends the watch with that
// Status. A progress notification is a bookmark, for a watcher that asked
// for bookmarks.
func (c *watchCache) relayed(f *filter, ev store.WatchEvent, bookmarks bool) (watchItem, bool, *apierrors.StatusError) {
	switch {
	case ev.Err != nil:
		if errors.Is(ev.Err, store.ErrCompacted) || errors.Is(ev.Err, store.ErrHistoryReset) {
			return watchItem{}, false, apierrors.NewResourceExpired(fmt.Sprintf("etcd can no longer replay the watch: %v", ev.Err))
		}
		c.log.Warn("etcd watch of an uncached resource ended; its client watches again", "err", ev.Err)
		return watchItem{}, false, nil
	case ev.Progress:
		return watchItem{typ: watch.Bookmark, rv: ev.Revision}, bookmarks, nil
	}
	e := &cachedEvent{key: ev.Key, rv: ev.Revision}
	var err error
	if len(ev.PrevValue) > 0 {
		if e.prev, err = c.fromEtcd(ev.Key, ev.PrevValue, ev.Revision); err != nil {
			return watchItem{}, false, apierrors.NewInternalError(err)
		}
	}
	switch ev.Type {
	case store.Put:
		if e.obj, err = c.fromEtcd(ev.Key, ev.Value, ev.Revision); err != nil {
			return watchItem{}, false, apierrors.NewInternalError(err)
		}
		e.typ = watch.Modified
		if ev.Created {
			e.typ, e.prev = watch.Added, nil
		}
	case store.Delete:
		if e.prev == nil {
			// etcd compacted the state before the deletion: what was
			// deleted, and whether this watcher saw it, is lost with it.
			return watchItem{}, false, apierrors.NewResourceExpired(fmt.Sprintf("the state %s had before its deletion at %d is compacted: list again", ev.Key, ev.Revision))
		}
		e.typ, e.obj = watch.Deleted, e.prev // decoded at the deletion's revision
	}
	item, ok := c.itemFor(f, e)
	return item, ok, nil
}

// requestProgress asks etcd for a progress notification on every watch of
// an uncached resource, which its relays turn into bookmarks: the cache's
// bookmark, for watchers that have no cache.
func (c *watchCache) requestProgress() {
	prefixes := map[string]bool{}
	c.mu.RLock()
	for w := range c.watchers.all {
		if w.bookmarks {
			prefixes[c.prefixFor(&w.filter)] = true
		}
	}
	c.mu.RUnlock()
	ctx, cancel := context.WithTimeout(context.Background(), freshTimeout)
	defer cancel()
	for prefix := range prefixes {
		if err := c.store.RequestProgress(ctx, prefix); err != nil {
			c.log.Debug("no progress notification for bookmarks", "err", err)
		}
	}
}

// runUncached is run for an uncached resource: there is nothing to
// follow; when ctx ends, every watcher's relay is ended, and waited for.
func (c *watchCache) runUncached(ctx context.Context) {
	<-ctx.Done()
	c.mu.Lock()
	c.ended = true
	var relays []*relay
	for w := range c.watchers.all {
		relays = append(relays, w.relay)
	}
	c.stopWatchersLocked(nil)
	c.mu.Unlock()
	for _, r := range relays {
		<-r.done
	}
}
