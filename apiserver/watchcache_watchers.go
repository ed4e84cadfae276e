package apiserver

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
)

// filter is what a list or watch selects, and at which of the cache's
// versions (watchCache.views) it sees objects.
type filter struct {
	namespace string
	label     labels.Selector
	field     fields.Selector
	view      int
}

// matches reports whether f selects o, matched as f's version sees it. An
// object that could not be converted to that version is matched by its
// namespace and labels alone, so that its reader learns of the failure.
func (f *filter) matches(o *cachedObject) bool {
	if o == nil {
		return false
	}
	o = o.at(f.view)
	if f.namespace != "" && o.namespace != f.namespace {
		return false
	}
	if f.label != nil && !f.label.Empty() && !f.label.Matches(&o.labels) {
		return false
	}
	if f.field != nil && !f.field.Empty() && o.err == nil && !f.field.Matches(&o.fields) {
		return false
	}
	return true
}

// watchItem is what a watcher receives: an event as this watcher sees it
// (an object entering its selector is ADDED, leaving it is DELETED), or a
// bookmark, which has no obj.
type watchItem struct {
	typ watch.EventType
	obj *cachedObject
	rv  int64
	// line, when set, is the event as a JSON watch line, shared by every
	// watcher the event was dispatched to: read it, never change it.
	line []byte
}

// jsonEventLine is one watch event as kube-apiserver writes it in JSON:
// {"type":..,"object":..} and a newline.
func jsonEventLine(typ watch.EventType, raw []byte) []byte {
	const open, mid, end = `{"type":"`, `","object":`, "}\n"
	b := make([]byte, 0, len(open)+len(typ)+len(mid)+len(raw)+len(end))
	b = append(b, open...)
	b = append(b, typ...)
	b = append(b, mid...)
	b = append(b, raw...)
	b = append(b, end...)
	return b
}

// cacheWatcher is one watch registered with the cache: what it selects,
// and the channel its events go to.
type cacheWatcher struct {
	filter    filter
	bookmarks bool
	jsonLines bool           // writes objects as plain JSON lines: wants watchItem.line
	ch        chan watchItem // closed when the watcher is stopped
	stopped   bool           // guarded by the cache's mu
	// relay, for an uncached resource, is the goroutine that sends on ch
	// and closes it (watchcache_uncached.go); nil for the cache's own.
	relay *relay
	// err, when set, is why the watcher was stopped, for its client: set
	// before ch is closed, read after.
	err *apierrors.StatusError

	// Where the cache keeps it (watcherSet.place): under value, the value
	// its field selector pins the resource's indexed field to, when
	// indexed; else under scope.
	indexed bool
	value   string
	scope   watcherScope
}

// itemFor is e as w sees it, or false when w does not see it at all.
func (c *watchCache) itemFor(f *filter, e *cachedEvent) (watchItem, bool) {
	cur := e.typ != watch.Deleted && f.matches(e.obj)
	was := e.prev != nil && f.matches(e.prev)
	switch {
	case e.typ == watch.Deleted && was:
		return watchItem{typ: watch.Deleted, obj: e.obj.at(f.view), rv: e.rv}, true
	case cur && was:
		return watchItem{typ: watch.Modified, obj: e.obj.at(f.view), rv: e.rv}, true
	case cur:
		return watchItem{typ: watch.Added, obj: e.obj.at(f.view), rv: e.rv}, true
	case was:
		e.prevAtRVOnce.Do(func() { e.prevAtRV = c.restamp(e.prev, e.rv) })
		return watchItem{typ: watch.Deleted, obj: e.prevAtRV.at(f.view), rv: e.rv}, true
	}
	return watchItem{}, false
}

// dispatchLocked hands e to every watcher that sees it; only the watchers
// the set finds for e are asked (watcherSet.candidates).
func (c *watchCache) dispatchLocked(e *cachedEvent) {
	// Each form an event takes (ADDED, MODIFIED, DELETED, of this object or
	// of its previous state) is rendered once, for every watcher.
	type form struct {
		typ watch.EventType
		obj *cachedObject
	}
	lines := map[form][]byte{}
	for w := range c.watchers.candidates(e) {
		item, ok := c.itemFor(&w.filter, e)
		if !ok {
			continue
		}
		if w.jsonLines && item.obj.err == nil {
			f := form{item.typ, item.obj}
			if item.line, ok = lines[f]; !ok {
				if raw, err := item.obj.json(); err == nil {
					item.line = jsonEventLine(item.typ, raw)
				} // else the watcher's encoder answers the error
				lines[f] = item.line
			}
		}
		select {
		case w.ch <- item:
		default:
			c.log.Debug("closing a watcher that did not keep up", "buffer", c.buffer)
			c.metrics.closedSlow.WithLabelValues(c.res.Plural).Inc()
			c.stopLocked(w)
		}
	}
}

// bookmark offers every watcher that asked for bookmarks the current
// revision. A full buffer just skips the bookmark.
func (c *watchCache) bookmark() {
	if c.uncached {
		c.requestProgress()
		return
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for w := range c.watchers.all {
		if !w.bookmarks {
			continue
		}
		select {
		case w.ch <- watchItem{typ: watch.Bookmark, rv: c.rv}:
		default:
		}
	}
}

// watch registers a watcher. With initial, it first receives every object f
// selects as ADDED (a watch without a resourceVersion, or with "0"), as of
// a revision not older than from; otherwise it receives the window's events
// after from. The returned items come before anything on the watcher's
// channel; the returned revision is the one they are current at.
func (c *watchCache) watch(ctx context.Context, from int64, initial bool, f filter, bookmarks, jsonLines bool) ([]watchItem, int64, *cacheWatcher, error) {
	if c.uncached {
		return c.watchEtcd(ctx, from, initial, f, bookmarks)
	}
	if err := c.waitFresh(ctx, from); err != nil {
		return nil, 0, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var items []watchItem
	if initial {
		keys := make([]string, 0, len(c.objects))
		for k, o := range c.objects {
			if f.matches(o) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			o := c.objects[k].at(f.view)
			items = append(items, watchItem{typ: watch.Added, obj: o, rv: o.rv})
		}
	} else {
		floor := max(c.oldest, c.store.CompactedRevision())
		if from < floor {
			return nil, 0, nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, floor))
		}
		for i := 0; i < c.count; i++ {
			e := c.eventAt(i)
			if e.rv <= from {
				continue
			}
			if item, ok := c.itemFor(&f, e); ok {
				items = append(items, item)
			}
		}
	}
	w := &cacheWatcher{filter: f, bookmarks: bookmarks, jsonLines: jsonLines}
	c.watchers.place(w)
	w.ch = make(chan watchItem, bufferFor(w, c.buffer))
	c.watchers.add(w)
	c.metrics.watchers.WithLabelValues(c.res.Plural).Inc()
	return items, c.rv, w, nil
}

// stop stops w; once it returns, nothing more is sent on w's channel.
func (c *watchCache) stop(w *cacheWatcher) {
	c.mu.Lock()
	c.stopLocked(w)
	c.mu.Unlock()
	if w.relay != nil {
		<-w.relay.done
	}
}

// stopLocked stops w: closes its channel, or, for a relayed watcher, tells
// its relay to end and close it.
func (c *watchCache) stopLocked(w *cacheWatcher) {
	if w.stopped {
		return
	}
	w.stopped = true
	c.watchers.remove(w)
	if w.relay != nil {
		w.relay.cancel()
	} else {
		close(w.ch)
	}
	c.metrics.watchers.WithLabelValues(c.res.Plural).Dec()
}

// stopWatchersLocked stops every watcher; with err, each tells its client
// err before its stream ends.
func (c *watchCache) stopWatchersLocked(err *apierrors.StatusError) {
	for w := range c.watchers.all {
		if err != nil {
			w.err = err
		}
		c.stopLocked(w)
	}
}

func (c *watchCache) stopAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopWatchersLocked(nil)
}
