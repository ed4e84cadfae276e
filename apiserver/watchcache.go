package apiserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/clock"
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
//   - No watcher sees a resourceVersion go back. If etcd loses its history
//     (wiped, restored from an older backup, replaced: see
//     store.ErrHistoryReset), every watcher ends with 410 Gone, so that its
//     client lists again, as kube-apiserver's watchers end when a relist
//     replaces its cache; the cache lists the new history. A client that
//     comes back later with a resourceVersion of the lost history gets
//     410 too, unless the new history has already reached that number:
//     then nothing tells the two apart.
//   - Objects in the cache are shared and never modified after they are put
//     there, but for one thing: a version's form that could not be
//     converted is swapped, atomically, for the converted one once the
//     conversion works (watchcache_convert.go).
//
// It only reads etcd: the resource's resourceStore writes, and offers the
// cache what it writes (see offer).
//
// A custom resource served at several versions has one cache, and so one
// etcd watch, for all of them, as it has one key prefix. The cache holds
// each object as stored (views[0]) and, converted once as it comes in, as
// every other served version (cachedObject.views); each version's requests
// see the cache through a cacheView. A conversion that fails leaves that
// version's form of the object marked with the error, which its readers
// get instead of the object.
type watchCache struct {
	res      *api.Resource // as stored: views[0]
	views    []*api.Resource
	conv     converter // converts to views[1:]
	store    Storage
	prefix   string // every key of res starts with it (registryPrefix)
	log      *slog.Logger
	metrics  *metrics
	clock    clock.Clock
	capacity int           // most events kept in the window
	maxBytes int64         // most encoded bytes of the window's events
	window   time.Duration // how long events are kept (watchcache_window.go)
	buffer   int           // events buffered per watcher
	// historyLost is watchCacheOptions.historyLost, never nil.
	historyLost func()
	// uncached marks a resource served from etcd alone: the cache keeps
	// nothing and each watch relays its own etcd watch
	// (watchcache_uncached.go).
	uncached bool

	// Lock order: mu, then offeredMu or an offered's stampMu; offeredMu
	// and stampMu are never held together, and neither is held while
	// taking mu. A writer offering its object (offer, withdraw) takes only
	// offeredMu, and resourceStore.create only stampMu, so a write never
	// waits for the cache's mu.

	// mu guards the fields below it down to watchers, and every watcher's
	// stopped. Readers (get, list, currentRV, bookmark, waitFresh) take it
	// shared; whatever changes the cache or its watchers takes it alone.
	//
	// Invariants, whenever mu is free:
	//   - objects holds every key's state at rv.
	//   - eventAt(i), for i < count, are the window's events in revision
	//     order, all at or below rv; count <= capacity, and bytes is the
	//     sum of their sizes (see watchcache_window.go for what bounds
	//     them).
	//   - oldest <= rv, and every event after oldest up to rv is in the
	//     window: a watch from any revision >= oldest misses nothing.
	//   - changed is closed and replaced whenever rv moves, so that a
	//     reader that saw an older rv, and took changed with it, wakes.
	//   - ready turns true at the first fill and stays true.
	//   - lost is the highest revision the cache had reached in a history
	//     etcd lost since (0: none): see waitFresh.
	//   - A watcher is in watchers iff it is not stopped; its channel is
	//     closed when, and only when, it is stopped, so nobody sends on a
	//     closed channel.
	mu       sync.RWMutex
	objects  map[string]*cachedObject // by key; the state at rv
	history  []*cachedEvent           // ring buffer of the window's events; grows up to capacity
	start    int                      // index of the oldest event in history
	count    int                      // events in history
	bytes    int64                    // the sum of the window's events' sizes
	rv       int64                    // every change up to rv is reflected
	oldest   int64                    // a watch can start after any revision >= oldest
	lost     int64                    // the highest revision of a lost history
	ready    bool
	ended    bool          // run has returned: no watch may start (uncached)
	changed  chan struct{} // closed and replaced whenever rv moves
	watchers watcherSet    // found by what they select (watchcache_index.go)

	// offered holds, by key, the object this server is writing there and
	// its stored bytes (see offer): the last offer for the key that no
	// event took, and no withdraw, deletion or fill dropped. It has its own
	// lock, so that writers never wait for the cache's.
	offeredMu sync.Mutex
	offered   map[string]*offered

	// failed holds the cached objects with a form that could not be
	// converted, to be tried again (watchcache_convert.go). Only run
	// touches it.
	failed map[*cachedObject]struct{}
}

// watchCacheOptions configure a watchCache; a zero field takes its default.
type watchCacheOptions struct {
	// capacity is the most events kept for watchers that resume
	// (0: DefaultWatchCacheSize), maxBytes the most bytes of their encodings
	// (0: DefaultWatchCacheMaxBytes), and window how long they are kept
	// (0: DefaultWatchCacheWindow); see watchcache_window.go.
	capacity int
	maxBytes int64
	window   time.Duration
	// buffer is the number of events buffered per watcher before it is
	// closed as too slow (0: defaultWatcherBuffer).
	buffer int
	// log receives the cache's logs (nil: discard).
	log *slog.Logger
	// metrics is the server's metrics; required.
	metrics *metrics
	// clock is the source of the cache's waits (nil: the wall clock).
	clock clock.Clock
	// historyLost, if set, is called after the cache listed the new
	// history that replaced one etcd lost.
	historyLost func()
	// versions are the other versions the cache's resource is served at,
	// which conv converts each object to as it comes in (nil: none).
	versions []*api.Resource
	conv     converter
	// uncached serves the resource from etcd alone, keeping nothing
	// (watchcache_uncached.go); a built-in resource only, of one version.
	uncached bool
}

// DefaultWatchCacheSize is how many events each resource's watch cache
// keeps, unless Config.WatchCacheSize says otherwise.
const DefaultWatchCacheSize = 10000

const (
	defaultWatcherBuffer = 1000
	// fillPageSize is how many keys each List of a fill reads.
	fillPageSize = 1000
	// firstRelistBackoff is the wait after a fill fails or the etcd watch
	// ends; each further failure doubles it, up to maxRelistBackoff.
	firstRelistBackoff = 100 * time.Millisecond
	maxRelistBackoff   = 5 * time.Second
)

// newWatchCache makes the watch cache of res, a resource as it is stored,
// over st. Nothing runs until run.
func newWatchCache(res *api.Resource, st Storage, opts watchCacheOptions) *watchCache {
	log := cmp.Or(opts.log, slog.New(slog.DiscardHandler))
	capacity := cmp.Or(opts.capacity, DefaultWatchCacheSize)
	if opts.historyLost == nil {
		opts.historyLost = func() {}
	}
	return &watchCache{
		res: res, views: append([]*api.Resource{res}, opts.versions...), conv: opts.conv,
		store: st, prefix: registryPrefix(res),
		log: log.With("resource", res.Plural), metrics: opts.metrics, clock: clock.Or(opts.clock),
		capacity: capacity, buffer: cmp.Or(opts.buffer, defaultWatcherBuffer),
		maxBytes:    cmp.Or(opts.maxBytes, DefaultWatchCacheMaxBytes),
		window:      cmp.Or(opts.window, DefaultWatchCacheWindow),
		historyLost: opts.historyLost,
		uncached:    opts.uncached,
		objects:     map[string]*cachedObject{},
		changed:     make(chan struct{}),
		watchers:    newWatcherSet(res, 1+len(opts.versions)),
		offered:     map[string]*offered{},
		failed:      map[*cachedObject]struct{}{},
	}
}

// cachedObject is one object as the cache holds it: encoded once, with
// the labels and fields that selectors match against, and decoded unless
// it is of a lean resource (see object).
type cachedObject struct {
	key       string
	namespace string
	rv        int64
	res       *api.Resource // the object's resource, at its version
	decoded   api.Object    // nil for a lean resource: see object
	raw       []byte        // its JSON; nil for a lean resource: see json
	labels    packedSet
	fields    packedSet

	// views holds the object as every other version the cache serves sees
	// it: views[i] is views[i+1] of the cache's (see at). A view whose
	// conversion failed is tried again (watchcache_convert.go) and, once
	// converted, swapped in: the only change ever made to a cached object.
	views []atomic.Pointer[cachedObject]
	// err, in a view, says why the object could not be converted to it;
	// decoded is then the stored object and raw is nil.
	err error

	pbOnce sync.Once
	pb     []byte // obj in protobuf, made on first use
	pbErr  error

	// kept is a lean object's JSON while leanJSON keeps it (see
	// servedJSON); nil otherwise.
	kept atomic.Pointer[[]byte]
}

// protobuf returns the object, one of res, in Kubernetes' protobuf
// encoding, made once, when the first watcher that asked for protobuf
// needs it.
func (o *cachedObject) protobuf(res *api.Resource) ([]byte, error) {
	o.pbOnce.Do(func() { o.pb, o.pbErr = protobufOf(res, o.object()) })
	return o.pb, o.pbErr
}

// object is the object decoded. Nobody may change it: it may be shared.
//
// A lean resource's objects (pods, events and leases: the bulk of a large
// cluster, which the server itself seldom reads decoded) are held in one
// form only, their protobuf, as kube-apiserver stores built-in kinds: a
// decoded pod takes several times its protobuf's bytes, and its JSON
// nearly twice. Each call then decodes the protobuf again, for this
// caller alone. What protobuf cannot tell apart, an empty list or map from
// an absent one, a lean object does not keep either: it reads, updates
// and serves as it would from kube-apiserver's storage.
func (o *cachedObject) object() api.Object {
	if o.decoded != nil {
		return o.decoded
	}
	obj, err := o.fromProtobuf()
	if err != nil {
		// The cache encoded these bytes itself: they always decode.
		panic(fmt.Sprintf("watch cache: decode %s %s: %v", o.res.Kind, o.key, err))
	}
	return obj
}

// fromProtobuf decodes a lean object from the protobuf it is held as;
// when that could not be made, from its JSON, which encoded then keeps.
func (o *cachedObject) fromProtobuf() (api.Object, error) {
	env, err := o.protobuf(o.res)
	if err != nil {
		return decodeFromStorage(o.res, o.raw, o.rv)
	}
	_, _, msg, err := api.ProtobufObject(env)
	if err != nil {
		return nil, err
	}
	obj := o.res.New()
	if err := api.UnmarshalProtobuf(msg, obj); err != nil {
		return nil, err
	}
	setTypeMeta(o.res, obj)
	return obj, nil
}

// view is the object decoded for a reader that only looks at it: a table
// row, its metadata, an authorizer's graph. It is object: for a lean
// object, decoded again for each call.
func (o *cachedObject) view() api.Object { return o.object() }

// json is the object's JSON, as served. A lean object's is encoded again,
// from its protobuf, unless leanJSON still keeps it: callers that serve
// one object to many (a watch event to every JSON watcher) encode it once.
func (o *cachedObject) json() ([]byte, error) {
	if o.raw != nil {
		return o.raw, nil
	}
	if kept := o.kept.Load(); kept != nil {
		return *kept, nil
	}
	obj, err := o.fromProtobuf()
	if err != nil {
		return nil, err
	}
	return marshalObject(obj)
}

// servedJSON is json, for a reader that answers a client with it (a get,
// a list, a watch's first objects): a lean object's JSON is then kept for
// a while in leanJSON, so that a client listing the same objects again
// and again finds them encoded.
func (o *cachedObject) servedJSON() ([]byte, error) {
	raw, err := o.json()
	if err == nil && o.raw == nil {
		leanJSON.keep(o, raw)
	}
	return raw, err
}

// objectCopy is a copy of the object, the caller's to change.
func (o *cachedObject) objectCopy() api.Object {
	if o.decoded == nil {
		return o.object() // decoded just now, for this caller alone
	}
	return o.decoded.DeepCopyObject().(api.Object)
}

// leanResources are the resources whose cached objects are not held
// decoded (see cachedObject.object).
var leanResources = map[*api.Resource]bool{api.Pods: true, api.Events: true, api.Leases: true}

// at is o as the view-th version of its cache sees it.
func (o *cachedObject) at(view int) *cachedObject {
	if view == 0 {
		return o
	}
	return o.views[view-1].Load()
}

// cachedEvent is one change. For a deletion, obj is the last state stamped
// with the deletion's revision, as Kubernetes reports it.
type cachedEvent struct {
	key  string
	typ  watch.EventType
	rv   int64
	obj  *cachedObject
	prev *cachedObject // nil for ADDED

	prevAtRVOnce sync.Once
	prevAtRV     *cachedObject // prev stamped with rv, for "left the selector"

	at   time.Time // when the cache took it, on its clock
	size int64     // obj.encodedSize(), counted in the window's bytes
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
// list's revision, until ctx ends.
//
// When the etcd watch fails, every watcher is closed (its client resumes
// from the last revision it saw, which the window still holds) and, after
// a backoff, the cache watches etcd again from the revision it had
// reached: an outage of etcd loses nothing and costs no list. It lists
// again only when etcd cannot replay from there: it compacted that
// revision (watchers resuming from before the new list get 410 Gone), or
// it lost its history (every watcher ends with 410 Gone at once).
func (c *watchCache) run(ctx context.Context) {
	if c.uncached {
		c.runUncached(ctx)
		return
	}
	defer c.stopAll()
	backoff := firstRelistBackoff
	mustList, historyLost := true, false
	for ctx.Err() == nil {
		if mustList {
			if err := c.fill(ctx, historyLost); err != nil {
				if ctx.Err() != nil {
					return
				}
				c.log.Warn("watch cache list failed; retrying", "err", err, "backoff", backoff)
				if !c.sleep(ctx, backoff) {
					return
				}
				backoff = min(2*backoff, maxRelistBackoff)
				continue
			}
			if historyLost {
				c.historyLost()
			}
			mustList, historyLost, backoff = false, false, firstRelistBackoff
		}
		started := c.clock.Now()
		from := c.currentRV()
		err := c.follow(ctx, from)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, store.ErrHistoryReset):
			c.log.Warn("etcd lost the history the watch cache follows; listing again, every watcher ends with 410 Gone", "err", err)
			mustList, historyLost = true, true
			continue
		case errors.Is(err, store.ErrCompacted):
			c.log.Warn("etcd watch cannot resume: compacted; listing again", "err", err)
			mustList = true
			continue
		}
		c.log.Warn("etcd watch ended; closing watchers, watching again from where the cache is", "err", err, "resourceVersion", from, "backoff", backoff)
		c.stopAll()
		if c.clock.Now().Sub(started) > maxRelistBackoff {
			backoff = firstRelistBackoff // it had been healthy a while
		}
		if !c.sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, maxRelistBackoff)
	}
}

// sleep waits for d on the cache's clock; false if ctx ended first.
func (c *watchCache) sleep(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(ctx, c.clock, d)
}

// fill replaces the cache's state with a fresh list from etcd, and closes
// every watcher: with 410 Gone when historyLost (see run).
func (c *watchCache) fill(ctx context.Context, historyLost bool) error {
	clear(c.failed) // the objects listed replace every earlier one
	objects := map[string]*cachedObject{}
	var rev int64
	opts := store.ListOptions{Limit: fillPageSize}
	for {
		res, err := c.store.List(ctx, c.prefix, opts)
		if err != nil {
			return err
		}
		rev = res.Revision
		for _, kv := range res.Items {
			o, err := c.newCachedObject(ctx, kv.Key, kv.Value, kv.Revision)
			if err != nil {
				c.log.Error("skip undecodable object", "key", kv.Key, "err", err)
				continue
			}
			objects[kv.Key] = o
		}
		if !res.More || len(res.Items) == 0 {
			break
		}
		opts = store.ListOptions{Revision: rev, Limit: fillPageSize, StartKey: res.Items[len(res.Items)-1].Key + "\x00"}
	}
	c.mu.Lock()
	var gone *apierrors.StatusError
	if historyLost {
		c.lost = max(c.lost, c.rv)
		gone = apierrors.NewResourceExpired(fmt.Sprintf("etcd's history up to resource version %d was lost: list again", c.lost))
	}
	c.stopWatchersLocked(gone)
	c.objects = objects
	c.offeredMu.Lock()
	clear(c.offered)
	c.offeredMu.Unlock()
	c.resetWindowLocked()
	c.oldest = rev
	c.ready = true
	c.setRVLocked(rev)
	c.mu.Unlock()
	return nil
}

// follow applies etcd's events after rev until the watch fails or ctx ends.
func (c *watchCache) follow(ctx context.Context, rev int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gauge := c.metrics.etcdWatches.WithLabelValues(c.res.Plural)
	gauge.Inc()
	defer gauge.Dec()
	events := c.store.Watch(ctx, c.prefix, rev+1)
	retry := c.newConversionRetry()
	defer retry.stop()
	expire := c.clock.NewTimer(windowCheckInterval)
	defer func() { expire.Stop() }()
	for {
		var ev store.WatchEvent
		select {
		case e, ok := <-events:
			if !ok {
				return ctx.Err()
			}
			ev = e
		case <-expire.C():
			c.trim()
			expire = c.clock.NewTimer(windowCheckInterval)
			continue
		case <-retry.due():
			c.retryConversions(ctx)
			retry.done(len(c.failed) == 0)
			continue
		}
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
		if err := c.handle(ctx, ev); err != nil {
			c.log.Error("skip undecodable event", "key", ev.Key, "rev", ev.Revision, "err", err)
		}
	}
}

// handle takes one etcd event into the cache (prepare, then apply); an
// event that cannot be decoded changes nothing.
func (c *watchCache) handle(ctx context.Context, ev store.WatchEvent) error {
	e, err := c.prepare(ctx, ev)
	if err != nil {
		return err
	}
	c.apply(e)
	return nil
}

// wrap is obj, an object of res (one of the cache's views), encoded; pb,
// when not nil, is obj in protobuf already.
func (c *watchCache) wrap(res *api.Resource, key string, obj api.Object, pb []byte) (*cachedObject, error) {
	rv, _ := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	if leanResources[res] {
		return encoded(res, key, obj, nil, pb, rv), nil
	}
	raw, err := marshalObject(obj)
	if err != nil {
		return nil, err
	}
	return encoded(res, key, obj, raw, pb, rv), nil
}

// encoded is obj, an object of res at revision rv, with raw its JSON (nil
// if not at hand, for a lean resource) and pb its protobuf (nil if not at
// hand: made when first asked for). Of a lean resource, it keeps only the
// object's protobuf, made now while obj is at hand if pb is nil, and lets
// obj and raw go; should the protobuf fail, it keeps the JSON instead,
// from which its readers decode and which its protobuf readers get the
// error of.
func encoded(res *api.Resource, key string, obj api.Object, raw, pb []byte, rv int64) *cachedObject {
	o := &cachedObject{
		key: key, namespace: obj.GetNamespace(), rv: rv, res: res, decoded: obj, raw: raw,
		labels: pack(obj.GetLabels()), fields: pack(res.Fields(obj)),
	}
	if pb != nil {
		o.pbOnce.Do(func() { o.pb = pb })
	}
	if !leanResources[res] {
		return o
	}
	if _, err := o.protobuf(res); err == nil {
		o.raw = nil
	} else if o.raw == nil {
		if o.raw, err = marshalObject(obj); err != nil {
			return o // held decoded after all: nothing else serves it
		}
	}
	o.decoded = nil
	return o
}

// restamp returns o as it was, with resourceVersion rv: how a deleted object
// (or one that left a watcher's selector) is reported.
func (c *watchCache) restamp(o *cachedObject, rv int64) *cachedObject {
	n := restampAs(c.res, o, rv)
	if len(o.views) > 0 {
		n.views = make([]atomic.Pointer[cachedObject], len(o.views))
		for i := range o.views {
			n.views[i].Store(restampAs(c.views[i+1], o.views[i].Load(), rv))
		}
	}
	return n
}

// restampAs is restamp of one form of an object, of res.
func restampAs(res *api.Resource, o *cachedObject, rv int64) *cachedObject {
	if o.err != nil {
		return unconverted(o.key, o.decoded, o.err) // rv: only its error is served
	}
	obj := o.objectCopy()
	obj.SetResourceVersion(strconv.FormatInt(rv, 10))
	if o.raw == nil { // lean: protobuf only, restamped in place
		held, _ := o.protobuf(res) // nil if it failed: encoded tries again
		return encoded(res, o.key, obj, nil, stampedProtobuf(held, rv), rv)
	}
	if raw, ok := restampResourceVersion(o.raw, o.rv, rv); ok {
		return encoded(res, o.key, obj, raw, nil, rv)
	}
	raw, err := marshalObject(obj)
	if err != nil {
		return o
	}
	return encoded(res, o.key, obj, raw, nil, rv)
}

// prepare turns one etcd event into the cache's event: decoded, converted
// and restamped, before the cache is locked, so that neither decoding nor
// a conversion webhook holds up readers. Only run changes objects, and run
// calls prepare, so the object it finds under the key is still there when
// apply takes the lock. An event of nothing (the deletion of a key the
// cache never held) has no type: apply only moves the cache's revision.
func (c *watchCache) prepare(ctx context.Context, ev store.WatchEvent) (*cachedEvent, error) {
	c.mu.RLock()
	prev := c.objects[ev.Key]
	c.mu.RUnlock()
	e := &cachedEvent{key: ev.Key, rv: ev.Revision, prev: prev}
	switch ev.Type {
	case store.Put:
		o := c.takeOffered(ev.Key, ev.Value, ev.Revision)
		if o != nil {
			c.convert(ctx, o)
		} else {
			var err error
			if o, err = c.newCachedObject(ctx, ev.Key, ev.Value, ev.Revision); err != nil {
				return nil, err
			}
		}
		e.obj = o
		e.typ = watch.Modified
		if prev == nil {
			e.typ = watch.Added
		}
	case store.Delete:
		if prev == nil {
			if len(ev.PrevValue) == 0 {
				return e, nil
			}
			p, err := c.newCachedObject(ctx, ev.Key, ev.PrevValue, ev.Revision)
			if err != nil {
				return nil, err
			}
			prev, e.prev = p, p
		}
		e.typ = watch.Deleted
		e.obj = c.restamp(prev, ev.Revision)
	}
	return e, nil
}

// apply puts a prepared event into the cache and hands it to the watchers.
func (c *watchCache) apply(e *cachedEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e.typ {
	case "":
		c.setRVLocked(e.rv)
		return
	case watch.Deleted:
		delete(c.objects, e.key)
		c.dropOffered(e.key)
	default:
		c.objects[e.key] = e.obj
	}
	c.appendLocked(e)
	c.setRVLocked(e.rv)
	c.dispatchLocked(e)
}

func (c *watchCache) setRVLocked(rv int64) {
	c.rv = rv
	close(c.changed)
	c.changed = make(chan struct{})
}

// list returns the cached objects f selects, in key order, and the revision
// they are current at.
func (c *watchCache) list(f *filter) ([]*cachedObject, int64) {
	c.mu.RLock()
	out := make([]*cachedObject, 0, len(c.objects))
	for _, o := range c.objects {
		if f.matches(o) {
			out = append(out, o.at(f.view))
		}
	}
	rv := c.rv
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, rv
}

// get returns the cached object at key, as stored (nil if there is none),
// and whether the cache is filled, without which its answer means nothing.
func (c *watchCache) get(key string) (*cachedObject, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.objects[key], c.ready
}

// currentRV is the revision the cache reflects.
func (c *watchCache) currentRV() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rv
}
