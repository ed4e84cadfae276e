package informer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
)

// MinResyncPeriod is the shortest resync period a handler gets; shorter
// requests are raised to it.
const MinResyncPeriod = 100 * time.Millisecond

// SharedInformerOptions configures a SharedInformer. The zero value is
// usable.
type SharedInformerOptions struct {
	// Name names the resource in logs and traces ("pods").
	Name string
	// ResyncPeriod is the resync period of handlers added with
	// AddEventHandler; 0 means none.
	ResyncPeriod time.Duration
	// Indexers are added to the cache besides NamespaceIndex, which every
	// informer's cache has.
	Indexers Indexers
	// Trace, if set, follows each change through every stage; see
	// TraceStage.
	Trace TraceFunc
	// TraceActive, if set, switches Trace: stages are built and reported
	// only while it reports true.
	TraceActive func() bool
	// Logger receives the informer's and its Reflector's story. Nil means
	// discard.
	Logger *slog.Logger
	// Reflector tunes the Reflector: page size, watch timeout, backoff,
	// clock (also used for resyncs). Its Name, Trace and Logger are
	// replaced by the informer's.
	Reflector ReflectorOptions
	// Transform, if set, rewrites each object before it is queued, cached
	// and handed to handlers (see TransformFunc and SetTransform).
	Transform TransformFunc
}

// SharedInformer keeps one resource's local cache (an Indexer) current and
// tells any number of handlers about every change. It is the assembly of
// the other parts: a Reflector lists and watches into a DeltaFIFO; the
// informer's loop pops each key's deltas, applies them to the Indexer, and
// hands a notification to every handler's buffer.
//
// Properties:
//
//   - One list and one watch per informer, however many handlers: share
//     informers through a SharedInformerFactory.
//   - Handlers see each object's changes in resourceVersion order, after
//     the cache has them: a handler that reads the cache (or a Lister)
//     sees the change it is told about, or a newer state.
//   - A slow handler delays only itself; its buffer is unbounded.
//   - A handler added after Run first gets an OnAdd for every object in
//     the cache, then the changes that follow, with nothing missed or
//     doubled.
//   - HasSynced is true once the first list has been applied to the cache
//     and handed to the handlers' buffers.
//
// Create one with NewSharedInformer or NewInformer, then Run it once.
type SharedInformer struct {
	name          string
	indexer       Indexer
	fifo          *DeltaFIFO
	reflector     *Reflector
	clock         clock.Clock
	log           *slog.Logger
	trace         tracer
	defaultResync time.Duration

	// mu guards the fields below, and is held while one key's deltas are
	// applied to the cache and distributed, so that a handler added
	// meanwhile sees the cache before or after them, never between.
	//
	// Lock order: the DeltaFIFO's lock, then mu, then the Indexer's or a
	// listener's lock.
	mu        sync.Mutex
	listeners []*listener
	added     int // handlers ever added, to number them
	// resyncCheck is how often the resync loop looks for handlers due a
	// resync: the shortest handler resync period (0: never). resyncChanged
	// is closed and replaced when it changes.
	resyncCheck   time.Duration
	resyncChanged chan struct{}
	runCtx        context.Context // set by Run
	stopped       bool            // Run has returned
	handlers      sync.WaitGroup  // listener goroutines
}

// NewSharedInformer returns an informer whose Reflector reads from lw.
func NewSharedInformer(lw ListerWatcher, opts SharedInformerOptions) *SharedInformer {
	s := &SharedInformer{
		name:          opts.Name,
		clock:         clock.Or(opts.Reflector.Clock),
		log:           opts.Logger,
		trace:         tracer{opts.Trace, opts.TraceActive},
		defaultResync: opts.ResyncPeriod,
		resyncChanged: make(chan struct{}),
	}
	if s.name == "" {
		s.name = "objects"
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	indexers := Indexers{NamespaceIndex: MetaNamespaceIndexFunc}
	for name, fn := range opts.Indexers {
		indexers[name] = fn
	}
	s.indexer = NewIndexer(MetaNamespaceKeyFunc, indexers)
	s.fifo = NewDeltaFIFO(DeltaFIFOOptions{KnownObjects: s.indexer, Trace: s.trace.f, TraceActive: s.trace.active, Transformer: opts.Transform})
	ro := opts.Reflector
	ro.Name, ro.Trace, ro.TraceActive, ro.Logger, ro.Clock = s.name, s.trace.f, s.trace.active, s.log, s.clock
	s.reflector = NewReflector(lw, s.fifo, ro)
	s.log = s.log.With("informer", s.name)
	return s
}

// Name returns the name the informer logs and traces under.
func (s *SharedInformer) Name() string { return s.name }

// GetIndexer returns the cache. Read it; never write it.
func (s *SharedInformer) GetIndexer() Indexer { return s.indexer }

// AddIndexers adds indexes to the cache, before or after Run.
func (s *SharedInformer) AddIndexers(indexers Indexers) error {
	return s.indexer.AddIndexers(indexers)
}

// SetTransform sets the function that rewrites each object before it is
// queued, cached and handed to handlers, as client-go's SetTransform does.
// It fails once Run has been called: the cache would then hold objects
// of both forms.
func (s *SharedInformer) SetTransform(fn TransformFunc) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runCtx != nil || s.stopped {
		return fmt.Errorf("informer %s: already started; transform not set", s.name)
	}
	s.fifo.setTransform(fn)
	return nil
}

// HasSynced reports whether the first list has been applied to the cache.
func (s *SharedInformer) HasSynced() bool { return s.fifo.HasSynced() }

// LastSyncResourceVersion returns the resourceVersion the cache is current
// at (moved by bookmarks too); "" before the first list.
func (s *SharedInformer) LastSyncResourceVersion() string {
	return s.reflector.LastSyncResourceVersion()
}

// AddEventHandler registers handler with the informer's default resync
// period. It may be called before or after Run, not after Run returned.
func (s *SharedInformer) AddEventHandler(handler ResourceEventHandler) (*HandlerRegistration, error) {
	return s.AddEventHandlerWithResync(handler, s.defaultResync)
}

// AddEventHandlerWithResync registers handler, which also gets an
// OnUpdate(obj, obj) for every cached object about every resyncPeriod (0:
// never; at least MinResyncPeriod): a chance to retry what a missed or
// failed reconcile left undone.
func (s *SharedInformer) AddEventHandlerWithResync(handler ResourceEventHandler, resyncPeriod time.Duration) (*HandlerRegistration, error) {
	if resyncPeriod > 0 {
		resyncPeriod = max(resyncPeriod, MinResyncPeriod)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, fmt.Errorf("informer %s: stopped; handler not added", s.name)
	}
	s.added++
	l := newListener(s.added, handler, s.trace)
	l.resyncPeriod = resyncPeriod
	l.nextResync = s.clock.Now().Add(resyncPeriod)
	s.listeners = append(s.listeners, l)
	if resyncPeriod > 0 && (s.resyncCheck == 0 || resyncPeriod < s.resyncCheck) {
		s.resyncCheck = resyncPeriod
		close(s.resyncChanged)
		s.resyncChanged = make(chan struct{})
	}
	if s.runCtx != nil {
		// Late: catch up on the cache as it is. mu holds deltas back
		// until these are queued, so the next notification is news.
		for _, obj := range s.indexer.List() {
			l.add(notification{kind: notifyAdd, newObj: obj, isInInitialList: true})
		}
		s.startListenerLocked(l)
	}
	return &HandlerRegistration{l: l, informer: s}, nil
}

// RemoveEventHandler unregisters reg's handler: it is called no more, and
// once RemoveEventHandler returns no call of it is in progress (so it must
// not be called from that handler). The informer runs on for its other
// handlers. Removing a handler twice does nothing.
func (s *SharedInformer) RemoveEventHandler(reg *HandlerRegistration) {
	s.mu.Lock()
	i := slices.Index(s.listeners, reg.l)
	if i < 0 {
		s.mu.Unlock()
		return
	}
	s.listeners = slices.Delete(s.listeners, i, i+1)
	close(reg.l.removed)
	started := s.runCtx != nil
	s.mu.Unlock()
	if started {
		<-reg.l.done
	}
}

func (s *SharedInformer) startListenerLocked(l *listener) {
	ctx := s.runCtx
	s.handlers.Go(func() { l.run(ctx) })
}

// Run starts the Reflector, the handlers and the resync loop, applies
// changes until ctx is done, and returns once every goroutine it started
// has returned (a handler call in progress is waited for: handlers must
// return). Calling Run a second time returns at once.
func (s *SharedInformer) Run(ctx context.Context) {
	s.mu.Lock()
	if s.runCtx != nil || s.stopped {
		s.mu.Unlock()
		s.log.Warn("Run called twice; ignored")
		return
	}
	s.runCtx = ctx
	for _, l := range s.listeners {
		s.startListenerLocked(l)
	}
	s.mu.Unlock()

	var wg sync.WaitGroup
	wg.Go(func() { s.reflector.Run(ctx) })
	wg.Go(func() { s.resyncLoop(ctx) })
	for {
		_, err := s.fifo.Pop(ctx, s.handleDeltas)
		if ctx.Err() != nil || errors.Is(err, ErrFIFOClosed) {
			break
		}
		if err != nil {
			s.log.Error("cannot apply change to cache", "err", err)
		}
	}
	wg.Wait()

	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.handlers.Wait()
}

// handleDeltas applies one key's deltas to the cache and distributes them.
// It runs inside Pop, with the DeltaFIFO locked.
func (s *SharedInformer) handleDeltas(deltas Deltas, isInInitialList bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range deltas {
		if d.Type == Deleted {
			if err := s.indexer.Delete(d.Object); err != nil {
				return err
			}
			s.traceIndexer(d)
			s.distributeLocked(notification{kind: notifyDelete, newObj: d.Object}, false)
			continue
		}
		// Added, Updated, Replaced, Sync: the object exists.
		old, exists, err := s.indexer.Get(d.Object)
		if err != nil {
			return err
		}
		if err := s.indexer.Update(d.Object); err != nil {
			return err
		}
		s.traceIndexer(d)
		if !exists {
			s.distributeLocked(notification{kind: notifyAdd, newObj: d.Object, isInInitialList: isInInitialList}, false)
			continue
		}
		// A resync, or a relist that found the object unchanged, is news
		// only to handlers due a resync.
		isSync := d.Type == Sync || (d.Type == Replaced && sameResourceVersion(old, d.Object))
		s.distributeLocked(notification{kind: notifyUpdate, oldObj: old, newObj: d.Object}, isSync)
	}
	return nil
}

func (s *SharedInformer) distributeLocked(n notification, isSync bool) {
	for _, l := range s.listeners {
		if !isSync || l.resyncing {
			l.add(n)
		}
	}
}

func (s *SharedInformer) traceIndexer(d Delta) {
	if !s.trace.on() {
		return
	}
	key, _ := MetaNamespaceKeyFunc(d.Object)
	s.trace.f(StageIndexerUpdated, traceAttrs(key, d.Type, d.Object)...)
}

func sameResourceVersion(a, b any) bool {
	ma, errA := meta.Accessor(a)
	mb, errB := meta.Accessor(b)
	return errA == nil && errB == nil && ma.GetResourceVersion() == mb.GetResourceVersion()
}

// resyncLoop queues a Sync delta for every cached object whenever some
// handler is due a resync.
func (s *SharedInformer) resyncLoop(ctx context.Context) {
	for {
		s.mu.Lock()
		period, changed := s.resyncCheck, s.resyncChanged
		s.mu.Unlock()
		var timer clock.Timer
		var fire <-chan time.Time
		if period > 0 {
			timer = s.clock.NewTimer(period)
			fire = timer.C()
		}
		fired := false
		select {
		case <-ctx.Done():
		case <-changed:
		case <-fire:
			fired = true
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		if fired && s.markResyncDue() {
			if err := s.fifo.Resync(); err != nil {
				s.log.Error("resync failed", "err", err)
			}
		}
	}
}

// markResyncDue marks the handlers whose resync is due and reports whether
// there is any.
func (s *SharedInformer) markResyncDue() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	due := false
	for _, l := range s.listeners {
		l.resyncing = l.resyncPeriod > 0 && !now.Before(l.nextResync)
		if l.resyncing {
			l.nextResync = now.Add(l.resyncPeriod)
			due = true
		}
	}
	return due
}

// WaitForCacheSync waits until every hasSynced function returns true, and
// reports whether they did before ctx was done. Pass informers' and handler
// registrations' HasSynced.
func WaitForCacheSync(ctx context.Context, hasSynced ...func() bool) bool {
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		all := true
		for _, synced := range hasSynced {
			if !synced() {
				all = false
				break
			}
		}
		if all {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ticker.C:
		}
	}
}

// Informer is a SharedInformer of objects of type T (*corev1.Pod), with a
// typed Lister; or, from ForResource, of objects of any kind (T is
// api.Object).
type Informer[T api.Object] struct {
	*SharedInformer
	// resource names the objects in the Lister's NotFound errors; empty:
	// T's type name, as NewLister does.
	resource schema.GroupResource
}

// NewInformer returns the informer of c's resource in namespace ("": all
// namespaces); tweak, if not nil, sets the selectors (see NewListWatch).
// opts.Name defaults to the resource's plural.
func NewInformer[T api.Object](c *client.Client[T], namespace string, tweak func(*metav1.ListOptions), opts SharedInformerOptions) *Informer[T] {
	if opts.Name == "" {
		opts.Name = c.Resource().Plural
	}
	return &Informer[T]{SharedInformer: NewSharedInformer(NewListWatch(c, namespace, tweak), opts)}
}

// Lister returns a typed, read-only view of the cache.
func (i *Informer[T]) Lister() Lister[T] {
	l := NewLister[T](i.GetIndexer())
	if !i.resource.Empty() {
		l.resource = i.resource
	}
	return l
}
