package informer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
)

// ReflectorStore is what a Reflector writes into: a DeltaFIFO in an
// informer, or an Indexer directly for a cache without handlers.
type ReflectorStore interface {
	Add(obj any) error
	Update(obj any) error
	Delete(obj any) error
	// Replace is called with every object of a (re)list and the list's
	// resourceVersion.
	Replace(list []any, resourceVersion string) error
}

// Defaults of ReflectorOptions.
const (
	DefaultPageSize        = 500
	DefaultMinWatchTimeout = 5 * time.Minute
)

// TraceTypeList is the trace "type" of an object that reached the Reflector
// in a list rather than in a watch event.
const TraceTypeList = "LIST"

// minHealthyWatch is how long a watch must last to end without counting as
// a failure when it delivered nothing: a server that accepts watches and
// ends them at once must not be hammered.
const minHealthyWatch = time.Second

// Backoff is the Reflector's delay policy after a failed list or watch:
// exponential (each consecutive failure doubles the delay, up to Max), with
// jitter (a delay d becomes a random duration in [d, d+Jitter*d)), and
// forgiving (a failure more than ResetAfter after the previous retry starts
// again from Initial).
//
// The zero Backoff means the defaults: Initial 800ms, Max 30s, ResetAfter
// 2m, Jitter 1.0, as client-go's reflector has them. In a non-zero Backoff,
// zero durations take their default and Jitter is used as given (0: none).
type Backoff struct {
	Initial, Max, ResetAfter time.Duration
	Jitter                   float64
}

func (b Backoff) withDefaults() Backoff {
	if b == (Backoff{}) {
		b.Jitter = 1.0
	}
	if b.Initial <= 0 {
		b.Initial = 800 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 30 * time.Second
	}
	if b.ResetAfter <= 0 {
		b.ResetAfter = 2 * time.Minute
	}
	return b
}

// backoffState is the running state of a Backoff. It is used by one
// goroutine only.
type backoffState struct {
	cfg       Backoff
	next      time.Duration // the next delay, before jitter
	lastRetry time.Time     // when the previous delay ended
}

// delay returns how long to wait after a failure at now.
func (b *backoffState) delay(now time.Time) time.Duration {
	if b.lastRetry.IsZero() || now.Sub(b.lastRetry) > b.cfg.ResetAfter {
		b.next = b.cfg.Initial
	}
	d := b.next
	b.next = min(2*b.next, b.cfg.Max)
	if b.cfg.Jitter > 0 {
		d += time.Duration(rand.Float64() * b.cfg.Jitter * float64(d))
	}
	b.lastRetry = now.Add(d)
	return d
}

// ReflectorOptions configures a Reflector. The zero value is usable.
type ReflectorOptions struct {
	// Name names the resource in logs and traces ("pods").
	Name string
	// PageSize is the limit of each list request; 0 means
	// DefaultPageSize, a negative value lists in one request.
	PageSize int64
	// MinWatchTimeout: each watch asks the server to end it after a random
	// time between MinWatchTimeout and twice that (whole seconds, at least
	// one), so that a fleet of clients does not reconnect in a herd. 0
	// means DefaultMinWatchTimeout.
	MinWatchTimeout time.Duration
	// Backoff is the delay policy after failures; see Backoff.
	Backoff Backoff
	// Clock times backoffs. Nil means the real clock.
	Clock clock.Clock
	// Logger receives the Reflector's story: lists, relists, failures.
	// Nil means discard.
	Logger *slog.Logger
	// Trace, if set, is called with StageReflectorReceived for every
	// object listed (type LIST) and every watch event, while TraceActive
	// (if set) reports true.
	Trace       TraceFunc
	TraceActive func() bool
}

// Reflector keeps a ReflectorStore in step with the API server for one
// resource: it lists (Replace), then watches from the list's
// resourceVersion (Add, Update, Delete), and never loses a change:
//
//   - A watch the server ends cleanly (its timeout, or a watcher closed for
//     falling behind) resumes at once from the last resourceVersion seen,
//     so nothing is missed and nothing is listed again.
//   - A resourceVersion too old to resume from (410 Gone: etcd compacted
//     it, or the server's watch cache no longer holds it) means changes
//     were missed: the Reflector lists again and Replace tells the store
//     what vanished meanwhile.
//   - Any other failure (server down, 5xx) is retried from the same
//     resourceVersion after an exponential, jittered Backoff.
//   - A list is one snapshot: its pages share one resourceVersion. If the
//     snapshot expires between pages, the list starts again in a single
//     request, which cannot expire.
//   - Bookmarks move the resourceVersion without touching the store.
//
// Create it with NewReflector; Run it once.
type Reflector struct {
	name            string
	lw              ListerWatcher
	store           ReflectorStore
	pageSize        int64
	minWatchTimeout time.Duration
	clock           clock.Clock
	log             *slog.Logger
	trace           tracer
	backoff         backoffState // used by Run's goroutine only

	// mu guards lastSyncRV: the resourceVersion of the last list or event
	// applied to the store.
	mu         sync.Mutex
	lastSyncRV string
}

// NewReflector returns a Reflector feeding store from lw. Nothing happens
// until Run.
func NewReflector(lw ListerWatcher, store ReflectorStore, opts ReflectorOptions) *Reflector {
	r := &Reflector{
		name:            opts.Name,
		lw:              lw,
		store:           store,
		pageSize:        opts.PageSize,
		minWatchTimeout: opts.MinWatchTimeout,
		clock:           clock.Or(opts.Clock),
		log:             opts.Logger,
		trace:           tracer{opts.Trace, opts.TraceActive},
		backoff:         backoffState{cfg: opts.Backoff.withDefaults()},
	}
	if r.name == "" {
		r.name = "objects"
	}
	switch {
	case r.pageSize == 0:
		r.pageSize = DefaultPageSize
	case r.pageSize < 0:
		r.pageSize = 0
	}
	if r.minWatchTimeout <= 0 {
		r.minWatchTimeout = DefaultMinWatchTimeout
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.log = r.log.With("reflector", r.name)
	return r
}

// LastSyncResourceVersion returns the resourceVersion the store is current
// at: that of the last list, event or bookmark applied. It is "" before the
// first list.
func (r *Reflector) LastSyncResourceVersion() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastSyncRV
}

func (r *Reflector) setLastSyncRV(rv string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastSyncRV = rv
}

// Run lists and watches until ctx is done, and returns once its watch is
// closed. Call it once.
func (r *Reflector) Run(ctx context.Context) {
	// needList: the store may have missed changes. fresh: no watch has
	// delivered an event or ended cleanly since the last list.
	needList, fresh := true, false
	for ctx.Err() == nil {
		if needList {
			if err := r.list(ctx); err != nil {
				r.retryAfter(ctx, err)
				continue
			}
			needList, fresh = false, true
		}
		events, err := r.watch(ctx)
		if events > 0 || err == nil {
			fresh = false
		}
		switch {
		case ctx.Err() != nil:
		case err == nil:
			r.log.Debug("watch ended; resuming", "resourceVersion", r.LastSyncResourceVersion(), "events", events)
		case client.IsGone(err):
			r.log.Info("resourceVersion too old to resume; relisting", "resourceVersion", r.LastSyncResourceVersion(), "err", err)
			needList = true
			if fresh {
				// Gone straight after a list: do not relist in a
				// tight loop.
				r.retryAfter(ctx, err)
			}
		default:
			r.retryAfter(ctx, err)
		}
	}
}

// retryAfter logs a failure and waits out the backoff, or until ctx is done.
func (r *Reflector) retryAfter(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	d := r.backoff.delay(r.clock.Now())
	r.log.Warn("retrying after failure", "err", err, "backoff", d)
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-ctx.Done():
	}
}

// list reads the whole collection at one resourceVersion, page by page,
// and replaces the store's content with it.
func (r *Reflector) list(ctx context.Context) error {
	// No resourceVersion: the most recent state, read from etcd, so that
	// a relist after 410 never goes back in time.
	opts := metav1.ListOptions{Limit: r.pageSize}
	var items []any
	var rv string
	for {
		page, err := r.lw.List(ctx, opts)
		if err != nil && opts.Continue != "" && client.IsGone(err) {
			// The snapshot the first page was read at was compacted
			// away. One request without a limit cannot expire.
			r.log.Info("list snapshot expired between pages; listing again in one request", "err", err)
			items, opts = items[:0], metav1.ListOptions{}
			continue
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", r.name, err)
		}
		for _, obj := range page.Items {
			items = append(items, obj)
		}
		rv = page.ResourceVersion
		if page.Continue == "" {
			break
		}
		opts = metav1.ListOptions{Limit: r.pageSize, Continue: page.Continue}
	}
	if rv == "" {
		return fmt.Errorf("list %s: the server sent no resourceVersion", r.name)
	}
	if r.trace.on() {
		for _, obj := range items {
			r.traceReceived(TraceTypeList, obj.(api.Object))
		}
	}
	if err := r.store.Replace(items, rv); err != nil {
		return fmt.Errorf("list %s: replace: %w", r.name, err)
	}
	r.setLastSyncRV(rv)
	r.log.Debug("listed", "items", len(items), "resourceVersion", rv)
	return nil
}

// errShortWatch is returned for a watch the server ended at once without
// sending anything.
var errShortWatch = errors.New("watch ended at once without an event")

// watch runs one watch from the last resourceVersion until it ends, and
// returns how many events it applied. A nil error is a clean end: resume
// from LastSyncResourceVersion.
func (r *Reflector) watch(ctx context.Context) (events int, err error) {
	timeout := r.minWatchTimeout + rand.N(r.minWatchTimeout)
	secs := max(int64(timeout/time.Second), 1)
	// The server ends the watch after secs. Should the connection die
	// without a word, give up on it after twice that.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Duration(secs)*time.Second)
	defer cancel()

	from := r.LastSyncResourceVersion()
	start := r.clock.Now()
	w, err := r.lw.Watch(wctx, metav1.ListOptions{
		ResourceVersion:     from,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      &secs,
	})
	if err != nil {
		return 0, fmt.Errorf("watch %s from %s: %w", r.name, from, err)
	}
	defer w.Stop()
	for {
		ev, ok := w.Next()
		if !ok {
			break
		}
		if err := r.apply(ev); err != nil {
			return events, fmt.Errorf("watch %s from %s: %w", r.name, from, err)
		}
		events++
	}
	if err := w.Err(); err != nil {
		return events, fmt.Errorf("watch %s from %s: %w", r.name, from, err)
	}
	if events == 0 && ctx.Err() == nil && r.clock.Now().Sub(start) < minHealthyWatch {
		return 0, fmt.Errorf("watch %s from %s: %w", r.name, from, errShortWatch)
	}
	return events, nil
}

// apply passes one watch event to the store and moves the resourceVersion.
// An ERROR event is returned as its *client.StatusError.
func (r *Reflector) apply(ev WatchEvent) error {
	if ev.Type == watch.Error {
		if ev.Status == nil {
			return errors.New("ERROR event without a status")
		}
		return &client.StatusError{ErrStatus: *ev.Status}
	}
	if ev.Object == nil {
		return fmt.Errorf("%s event without an object", ev.Type)
	}
	r.traceReceived(string(ev.Type), ev.Object)
	var err error
	switch ev.Type {
	case watch.Added:
		err = r.store.Add(ev.Object)
	case watch.Modified:
		err = r.store.Update(ev.Object)
	case watch.Deleted:
		err = r.store.Delete(ev.Object)
	case watch.Bookmark:
	default:
		return fmt.Errorf("unexpected event type %q", ev.Type)
	}
	if err != nil {
		// Only a broken key function fails here; the event cannot be
		// stored however often it is retried.
		r.log.Error("cannot store event; dropped", "type", ev.Type, "err", err)
	}
	r.setLastSyncRV(ev.Object.GetResourceVersion())
	return nil
}

// traceReceived traces StageReflectorReceived for obj; a bookmark has no
// key.
func (r *Reflector) traceReceived(typ string, obj api.Object) {
	if !r.trace.on() {
		return
	}
	attrs := make([]slog.Attr, 0, 3)
	if key, err := MetaNamespaceKeyFunc(obj); err == nil {
		attrs = append(attrs, slog.String(TraceAttrKey, key))
	}
	attrs = append(attrs,
		slog.String(TraceAttrType, typ),
		slog.String(TraceAttrResourceVersion, obj.GetResourceVersion()))
	r.trace.f(StageReflectorReceived, attrs...)
}
