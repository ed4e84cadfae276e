package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/store"
)

// watchCache is kube-apiserver's Cacher in small: for one resource it holds
// ONE etcd watch, the current state of every object, and a window of recent
// events, and fans each event out to every HTTP watcher.
//
// Guarantees:
//   - Every watcher sees the events that match its filter in revision order,
//     with no gaps, from the revision it asked for; if that revision is older
//     than the window (evicted, or compacted in etcd) it gets 410 Gone.
//   - A watcher whose buffer is full is closed (its client resumes from the
//     last revision it saw); it never delays the cache or other watchers.
//   - Objects in the cache are shared and never modified after they are put
//     there.
type watchCache struct {
	res      *api.Resource
	rs       *resourceStore
	log      *slog.Logger
	metrics  *metrics
	capacity int // events kept in the window
	buffer   int // events buffered per watcher

	mu       sync.RWMutex
	objects  map[string]*cachedObject // by key; the state at rv
	history  []*cachedEvent           // ring buffer of the last len(history) events
	start    int                      // index of the oldest event in history
	count    int                      // events in history
	rv       int64                    // every change up to rv is reflected
	oldest   int64                    // a watch can start after any revision >= oldest
	ready    bool
	changed  chan struct{} // closed and replaced whenever rv moves
	watchers map[*cacheWatcher]struct{}

	// offered holds, by key, the object this server is writing there and
	// its stored bytes (see offer). It has its own lock, so that writers
	// never wait for the cache's.
	offeredMu sync.Mutex
	offered   map[string]*offered
}

// offered is an object as a writer had it, and data, its stored bytes.
type offered struct {
	obj  api.Object
	data []byte

	// data stamped with a revision: spliced once, for the writer's answer
	// and the cache alike.
	stampMu sync.Mutex
	stampRV int64
	stamp   []byte
}

// stamped returns data with metadata.resourceVersion set to rev (see
// withResourceVersion), splicing it only once for a given rev. The bytes
// are shared: nobody may change them.
func (o *offered) stamped(rev int64) ([]byte, bool) {
	o.stampMu.Lock()
	defer o.stampMu.Unlock()
	if o.stamp == nil || o.stampRV != rev {
		raw, ok := withResourceVersion(o.data, rev)
		if !ok {
			return nil, false
		}
		o.stamp, o.stampRV = raw, rev
	}
	return o.stamp, true
}

// cachedObject is one object as the cache holds it: decoded, encoded once,
// and with the labels and fields that selectors match against.
type cachedObject struct {
	key       string
	namespace string
	rv        int64
	obj       api.Object
	raw       []byte
	labels    labels.Set
	fields    fields.Set

	pbOnce sync.Once
	pb     []byte // obj in protobuf, made on first use
	pbErr  error
}

// protobuf returns the object, one of res, in Kubernetes' protobuf
// encoding, made once, when the first watcher that asked for protobuf
// needs it.
func (o *cachedObject) protobuf(res *api.Resource) ([]byte, error) {
	o.pbOnce.Do(func() { o.pb, o.pbErr = protobufOf(res, o.obj) })
	return o.pb, o.pbErr
}

// cachedEvent is one change. For a deletion, obj is the last state stamped
// with the deletion's revision, as Kubernetes reports it.
type cachedEvent struct {
	typ  watch.EventType
	rv   int64
	obj  *cachedObject
	prev *cachedObject // nil for ADDED

	prevAtRVOnce sync.Once
	prevAtRV     *cachedObject // prev stamped with rv, for "left the selector"
}

// filter is what a list or watch selects.
type filter struct {
	namespace string
	label     labels.Selector
	field     fields.Selector
}

func (f *filter) matches(o *cachedObject) bool {
	if o == nil {
		return false
	}
	if f.namespace != "" && o.namespace != f.namespace {
		return false
	}
	if f.label != nil && !f.label.Empty() && !f.label.Matches(o.labels) {
		return false
	}
	if f.field != nil && !f.field.Empty() && !f.field.Matches(o.fields) {
		return false
	}
	return true
}

// watchItem is what a watcher receives: an event as this watcher sees it
// (an object entering its selector is ADDED, leaving it is DELETED), or a
// bookmark when ev is nil.
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
	b := make([]byte, 0, len(raw)+32)
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","object":`...)
	b = append(b, raw...)
	b = append(b, "}\n"...)
	return b
}

type cacheWatcher struct {
	filter    filter
	bookmarks bool
	jsonLines bool           // writes objects as plain JSON lines: wants watchItem.line
	ch        chan watchItem // closed when the watcher is stopped
	stopped   bool           // guarded by the cache's mu
}

func newWatchCache(rs *resourceStore, log *slog.Logger, m *metrics, capacity, buffer int) *watchCache {
	c := &watchCache{
		res: rs.res, rs: rs, log: log.With("resource", rs.res.Plural), metrics: m,
		capacity: capacity, buffer: buffer,
		objects:  map[string]*cachedObject{},
		history:  make([]*cachedEvent, capacity),
		changed:  make(chan struct{}),
		watchers: map[*cacheWatcher]struct{}{},
		offered:  map[string]*offered{},
	}
	rs.cached = c.current
	rs.offer = c.offer
	return c
}

// offer is told, before this server writes o.data under key, the object
// o.obj that data encodes. If etcd's watch then reports exactly that data
// under key, apply takes o.obj instead of decoding the value and encoding
// it again: equal bytes are what makes the object the same. The caller
// hands o.obj over and never changes it afterwards; withdraw drops the
// offer, if it is still there, when the write fails. A later offer for the
// same key replaces an earlier one, whose event is then decoded as usual.
func (c *watchCache) offer(key string, o *offered) (withdraw func()) {
	c.offeredMu.Lock()
	c.offered[key] = o
	c.offeredMu.Unlock()
	return func() {
		c.offeredMu.Lock()
		if c.offered[key] == o {
			delete(c.offered, key)
		}
		c.offeredMu.Unlock()
	}
}

// dropOffered forgets what was offered for key, which was just deleted.
// An offer is normally taken by its write's event; one whose event never
// comes (its write was already in the list a refill read) stays until the
// key's next offer or its deletion.
func (c *watchCache) dropOffered(key string) {
	c.offeredMu.Lock()
	delete(c.offered, key)
	c.offeredMu.Unlock()
}

// takeOffered returns, for a put of value under key at rev, the object
// offered for it, stamped with rev; nil when none was. When value cannot
// be spliced it leaves the object alone, as resourceStore.create, which
// then copies it, relies on.
func (c *watchCache) takeOffered(key string, value []byte, rev int64) *cachedObject {
	c.offeredMu.Lock()
	o := c.offered[key]
	if o == nil || !bytes.Equal(o.data, value) {
		c.offeredMu.Unlock()
		return nil
	}
	delete(c.offered, key)
	c.offeredMu.Unlock()
	raw, ok := o.stamped(rev)
	if !ok {
		return nil
	}
	o.obj.SetResourceVersion(strconv.FormatInt(rev, 10))
	return c.encoded(key, o.obj, raw, rev)
}

// current returns the cached object under key, or nil when the cache has
// none or is not filled yet.
func (c *watchCache) current(key string) *cachedObject {
	if o, ready := c.get(key); ready {
		return o
	}
	return nil
}

// run lists the resource from etcd, then follows one etcd watch from the
// list's revision, until ctx ends. If the watch fails, the cache lists
// again and every watcher is closed, so that clients resume or relist.
func (c *watchCache) run(ctx context.Context) {
	defer c.stopAll()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		rev, err := c.fill(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.log.Warn("watch cache list failed; retrying", "err", err, "backoff", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		err = c.follow(ctx, rev)
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("etcd watch ended; relisting", "err", err)
	}
}

// fill replaces the cache's state with a fresh list from etcd.
func (c *watchCache) fill(ctx context.Context) (int64, error) {
	objects := map[string]*cachedObject{}
	var rev int64
	opts := store.ListOptions{Limit: 1000}
	for {
		res, err := c.rs.store.List(ctx, c.rs.prefix, opts)
		if err != nil {
			return 0, err
		}
		rev = res.Revision
		for _, kv := range res.Items {
			o, err := c.newCachedObject(kv.Key, kv.Value, kv.Revision)
			if err != nil {
				c.log.Error("skip undecodable object", "key", kv.Key, "err", err)
				continue
			}
			objects[kv.Key] = o
		}
		if !res.More || len(res.Items) == 0 {
			break
		}
		opts = store.ListOptions{Revision: rev, Limit: 1000, StartKey: res.Items[len(res.Items)-1].Key + "\x00"}
	}
	c.mu.Lock()
	c.stopWatchersLocked()
	c.objects = objects
	c.offeredMu.Lock()
	clear(c.offered)
	c.offeredMu.Unlock()
	c.start, c.count = 0, 0
	clear(c.history)
	c.oldest = rev
	c.ready = true
	c.setRVLocked(rev)
	c.mu.Unlock()
	return rev, nil
}

// follow applies etcd's events after rev until the watch fails or ctx ends.
func (c *watchCache) follow(ctx context.Context, rev int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gauge := c.metrics.etcdWatches.WithLabelValues(c.res.Plural)
	gauge.Inc()
	defer gauge.Dec()
	for ev := range c.rs.store.Watch(ctx, c.rs.prefix, rev+1) {
		if ev.Err != nil {
			return ev.Err
		}
		if ev.Progress {
			c.mu.Lock()
			if ev.Revision > c.rv {
				c.setRVLocked(ev.Revision)
			}
			c.mu.Unlock()
			continue
		}
		c.metrics.cacheEvents.WithLabelValues(c.res.Plural).Inc()
		if err := c.apply(ev); err != nil {
			c.log.Error("skip undecodable event", "key", ev.Key, "rev", ev.Revision, "err", err)
		}
	}
	return ctx.Err()
}

func (c *watchCache) newCachedObject(key string, value []byte, rev int64) (*cachedObject, error) {
	obj, err := decodeFromStorage(c.res, value, rev)
	if err != nil {
		return nil, err
	}
	return c.wrap(key, obj)
}

func (c *watchCache) wrap(key string, obj api.Object) (*cachedObject, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	rv, _ := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	return c.encoded(key, obj, raw, rv), nil
}

// encoded is obj, at revision rv, with raw its JSON.
func (c *watchCache) encoded(key string, obj api.Object, raw []byte, rv int64) *cachedObject {
	return &cachedObject{
		key: key, namespace: obj.GetNamespace(), rv: rv, obj: obj, raw: raw,
		labels: labels.Set(obj.GetLabels()), fields: c.res.Fields(obj),
	}
}

// restamp returns o as it was, with resourceVersion rv: how a deleted object
// (or one that left a watcher's selector) is reported.
func (c *watchCache) restamp(o *cachedObject, rv int64) *cachedObject {
	obj := o.obj.DeepCopyObject().(api.Object)
	obj.SetResourceVersion(strconv.FormatInt(rv, 10))
	if raw, ok := restampResourceVersion(o.raw, o.rv, rv); ok {
		return c.encoded(o.key, obj, raw, rv)
	}
	n, err := c.wrap(o.key, obj)
	if err != nil {
		return o
	}
	return n
}

func (c *watchCache) apply(ev store.WatchEvent) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.objects[ev.Key]
	e := &cachedEvent{rv: ev.Revision, prev: prev}
	switch ev.Type {
	case store.Put:
		o := c.takeOffered(ev.Key, ev.Value, ev.Revision)
		if o == nil {
			var err error
			if o, err = c.newCachedObject(ev.Key, ev.Value, ev.Revision); err != nil {
				return err
			}
		}
		e.obj = o
		e.typ = watch.Modified
		if prev == nil {
			e.typ = watch.Added
		}
		c.objects[ev.Key] = o
	case store.Delete:
		if prev == nil {
			if len(ev.PrevValue) == 0 {
				c.setRVLocked(ev.Revision)
				return nil
			}
			p, err := c.newCachedObject(ev.Key, ev.PrevValue, ev.Revision)
			if err != nil {
				return err
			}
			prev, e.prev = p, p
		}
		e.typ = watch.Deleted
		e.obj = c.restamp(prev, ev.Revision)
		delete(c.objects, ev.Key)
		c.dropOffered(ev.Key)
	}
	c.appendLocked(e)
	c.setRVLocked(ev.Revision)
	c.dispatchLocked(e)
	return nil
}

// appendLocked adds e to the window, evicting the oldest event when full.
func (c *watchCache) appendLocked(e *cachedEvent) {
	if c.count == c.capacity {
		evicted := c.history[c.start]
		c.oldest = max(c.oldest, evicted.rv)
		c.start = (c.start + 1) % c.capacity
		c.count--
	}
	c.history[(c.start+c.count)%c.capacity] = e
	c.count++
}

func (c *watchCache) setRVLocked(rv int64) {
	c.rv = rv
	close(c.changed)
	c.changed = make(chan struct{})
}

// itemFor is e as w sees it, or false when w does not see it at all.
func (c *watchCache) itemFor(f *filter, e *cachedEvent) (watchItem, bool) {
	cur := e.typ != watch.Deleted && f.matches(e.obj)
	was := e.prev != nil && f.matches(e.prev)
	switch {
	case e.typ == watch.Deleted && was:
		return watchItem{typ: watch.Deleted, obj: e.obj, rv: e.rv}, true
	case cur && was:
		return watchItem{typ: watch.Modified, obj: e.obj, rv: e.rv}, true
	case cur:
		return watchItem{typ: watch.Added, obj: e.obj, rv: e.rv}, true
	case was:
		e.prevAtRVOnce.Do(func() { e.prevAtRV = c.restamp(e.prev, e.rv) })
		return watchItem{typ: watch.Deleted, obj: e.prevAtRV, rv: e.rv}, true
	}
	return watchItem{}, false
}

func (c *watchCache) dispatchLocked(e *cachedEvent) {
	// Each form an event takes (ADDED, MODIFIED, DELETED, of this object or
	// of its previous state) is rendered once, for every watcher.
	type form struct {
		typ watch.EventType
		obj *cachedObject
	}
	lines := map[form][]byte{}
	for w := range c.watchers {
		item, ok := c.itemFor(&w.filter, e)
		if !ok {
			continue
		}
		if w.jsonLines {
			f := form{item.typ, item.obj}
			if item.line, ok = lines[f]; !ok {
				item.line = jsonEventLine(item.typ, item.obj.raw)
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
	c.mu.RLock()
	defer c.mu.RUnlock()
	for w := range c.watchers {
		if !w.bookmarks {
			continue
		}
		select {
		case w.ch <- watchItem{typ: watch.Bookmark, rv: c.rv}:
		default:
		}
	}
}

// waitFresh blocks until the cache has seen revision rv, asking etcd for a
// progress notification when other resources moved the revision on. It asks
// again every progressRetry: a notification sent while this resource's etcd
// watch was still being set up (just after a start or a relist) reaches
// only the watches that already existed.
func (c *watchCache) waitFresh(ctx context.Context, rv int64) error {
	deadline := time.NewTimer(3 * time.Second)
	defer deadline.Stop()
	retry := time.NewTicker(progressRetry)
	defer retry.Stop()
	ask := true
	for {
		c.mu.RLock()
		cur, ready, changed := c.rv, c.ready, c.changed
		c.mu.RUnlock()
		if ready && cur >= rv {
			return nil
		}
		if ready && ask {
			ask = false
			// etcd answers a progress request on the gRPC stream the
			// request names, and clientv3 picks the stream by the
			// context's metadata: the watch was opened with
			// WithRequireLeader (store.Watch), so the request must carry
			// it too, or it goes to a stream with no watches on it.
			_ = c.rs.store.Client().RequestProgress(clientv3.WithRequireLeader(ctx))
		}
		select {
		case <-changed:
		case <-retry.C:
			ask = true
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, cur), 1)
		}
	}
}

// progressRetry is how often waitFresh asks etcd for progress again.
const progressRetry = 100 * time.Millisecond

// list returns the cached objects f selects, in key order, and the revision
// they are current at.
func (c *watchCache) list(f *filter) ([]*cachedObject, int64) {
	c.mu.RLock()
	out := make([]*cachedObject, 0, len(c.objects))
	for _, o := range c.objects {
		if f.matches(o) {
			out = append(out, o)
		}
	}
	rv := c.rv
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, rv
}

// get returns the cached object at key (nil if there is none) and whether
// the cache is filled, without which its answer means nothing.
func (c *watchCache) get(key string) (*cachedObject, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.objects[key], c.ready
}

// watch registers a watcher. With initial, it first receives every object f
// selects as ADDED (a watch without a resourceVersion, or with "0"), as of
// a revision not older than from; otherwise it receives the window's events
// after from. The returned items come before anything on the watcher's
// channel; the returned revision is the one they are current at.
func (c *watchCache) watch(ctx context.Context, from int64, initial bool, f filter, bookmarks, jsonLines bool) ([]watchItem, int64, *cacheWatcher, error) {
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
			o := c.objects[k]
			items = append(items, watchItem{typ: watch.Added, obj: o, rv: o.rv})
		}
	} else {
		floor := max(c.oldest, c.rs.store.CompactedRevision())
		if from < floor {
			return nil, 0, nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, floor))
		}
		for i := 0; i < c.count; i++ {
			e := c.history[(c.start+i)%c.capacity]
			if e.rv <= from {
				continue
			}
			if item, ok := c.itemFor(&f, e); ok {
				items = append(items, item)
			}
		}
	}
	w := &cacheWatcher{filter: f, bookmarks: bookmarks, jsonLines: jsonLines, ch: make(chan watchItem, c.buffer)}
	c.watchers[w] = struct{}{}
	c.metrics.watchers.WithLabelValues(c.res.Plural).Inc()
	return items, c.rv, w, nil
}

// currentRV is the revision the cache reflects.
func (c *watchCache) currentRV() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rv
}

func (c *watchCache) stop(w *cacheWatcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopLocked(w)
}

func (c *watchCache) stopLocked(w *cacheWatcher) {
	if w.stopped {
		return
	}
	w.stopped = true
	delete(c.watchers, w)
	close(w.ch)
	c.metrics.watchers.WithLabelValues(c.res.Plural).Dec()
}

func (c *watchCache) stopWatchersLocked() {
	for w := range c.watchers {
		c.stopLocked(w)
	}
}

func (c *watchCache) stopAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopWatchersLocked()
}

// consistentList lists from the watch cache once it has caught up with
// etcd's current revision: a read as fresh as one from etcd, without
// decoding every object again.
func (s *Server) consistentList(ctx context.Context, res *api.Resource, f *filter) ([]*cachedObject, error) {
	rev, err := s.store.Revision(ctx)
	if err != nil {
		return nil, s.stores[res].storageError(err, "")
	}
	c := s.caches[res]
	if err := c.waitFresh(ctx, rev); err != nil {
		return nil, err
	}
	items, _ := c.list(f)
	return items, nil
}
