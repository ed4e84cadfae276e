package informer

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ResourceEventHandler is told about changes to an informer's cache. Its
// methods are called from one goroutine per handler, one call at a time, in
// the order the cache changed; each handler has its own unbounded buffer,
// so a slow handler delays only itself.
//
// The objects are the cache's own: handlers must not mutate them. A handler
// usually just enqueues the object's key into a workqueue.
type ResourceEventHandler interface {
	// OnAdd: the object entered the cache. isInInitialList is true for the
	// objects of the first list (and, for a handler added late, for the
	// cache's contents at that moment).
	OnAdd(obj any, isInInitialList bool)
	// OnUpdate: the object changed, or, when old and new have the same
	// resourceVersion, a periodic resync asks the handler to look again.
	OnUpdate(oldObj, newObj any)
	// OnDelete: the object left the cache. obj is its last state, or a
	// DeletedFinalStateUnknown when the deletion was missed while the
	// watch was down.
	OnDelete(obj any)
}

// ResourceEventHandlerFuncs adapts functions to a ResourceEventHandler; a
// nil function ignores that kind of change.
type ResourceEventHandlerFuncs struct {
	AddFunc    func(obj any, isInInitialList bool)
	UpdateFunc func(oldObj, newObj any)
	DeleteFunc func(obj any)
}

// OnAdd calls AddFunc if it is set.
func (f ResourceEventHandlerFuncs) OnAdd(obj any, isInInitialList bool) {
	if f.AddFunc != nil {
		f.AddFunc(obj, isInInitialList)
	}
}

// OnUpdate calls UpdateFunc if it is set.
func (f ResourceEventHandlerFuncs) OnUpdate(oldObj, newObj any) {
	if f.UpdateFunc != nil {
		f.UpdateFunc(oldObj, newObj)
	}
}

// OnDelete calls DeleteFunc if it is set.
func (f ResourceEventHandlerFuncs) OnDelete(obj any) {
	if f.DeleteFunc != nil {
		f.DeleteFunc(obj)
	}
}

// HandlerRegistration is what AddEventHandler returns.
type HandlerRegistration struct {
	l        *listener
	informer *SharedInformer
}

// HasSynced reports whether the informer has synced and this handler has
// returned from OnAdd for every object of the initial list (for a handler
// added late: of the cache as it was then). Wait on it before trusting what
// the handler has built up.
func (r *HandlerRegistration) HasSynced() bool {
	return r.informer.HasSynced() && r.l.initialPending.Load() == 0
}

type notificationKind int

const (
	notifyAdd notificationKind = iota
	notifyUpdate
	notifyDelete
)

// notification is one pending call of a handler.
type notification struct {
	kind            notificationKind
	oldObj, newObj  any // oldObj for updates only
	isInInitialList bool
}

// listener feeds one handler from its own unbounded buffer, on its own
// goroutine, so that neither the informer nor other handlers ever wait for
// it.
type listener struct {
	id      int
	handler ResourceEventHandler
	trace   tracer

	// initialPending counts initial-list adds queued and not yet handled.
	initialPending atomic.Int64

	// The resync schedule is guarded by the informer's mu.
	resyncPeriod time.Duration // 0: no resync
	nextResync   time.Time
	resyncing    bool // due: receives this round's resync updates

	// mu guards pending. wake (buffered 1) is signalled after an append.
	mu      sync.Mutex
	pending []notification
	wake    chan struct{}

	// removed is closed when the handler is removed; done, when run has
	// returned.
	removed chan struct{}
	done    chan struct{}
}

func newListener(id int, handler ResourceEventHandler, trace tracer) *listener {
	return &listener{
		id: id, handler: handler, trace: trace, wake: make(chan struct{}, 1),
		removed: make(chan struct{}), done: make(chan struct{}),
	}
}

// add queues n; it never blocks.
func (l *listener) add(n notification) {
	if n.kind == notifyAdd && n.isInInitialList {
		l.initialPending.Add(1)
	}
	l.mu.Lock()
	l.pending = append(l.pending, n)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run calls the handler for each notification in order, until ctx is done
// or the handler is removed. A handler call in progress is waited for, not
// interrupted.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	for {
		l.mu.Lock()
		batch := l.pending
		l.pending = nil
		l.mu.Unlock()
		if len(batch) == 0 {
			select {
			case <-l.wake:
				continue
			case <-ctx.Done():
				return
			case <-l.removed:
				return
			}
		}
		for i := range batch {
			if l.stopping(ctx) {
				return
			}
			l.dispatch(batch[i])
			batch[i] = notification{} // let the object go
		}
	}
}

// stopping reports whether run must return: ctx is done or the handler
// was removed.
func (l *listener) stopping(ctx context.Context) bool {
	select {
	case <-l.removed:
		return true
	default:
		return ctx.Err() != nil
	}
}

func (l *listener) dispatch(n notification) {
	switch n.kind {
	case notifyAdd:
		l.traceCall("OnAdd", n.newObj)
		l.handler.OnAdd(n.newObj, n.isInInitialList)
		if n.isInInitialList {
			l.initialPending.Add(-1)
		}
	case notifyUpdate:
		l.traceCall("OnUpdate", n.newObj)
		l.handler.OnUpdate(n.oldObj, n.newObj)
	case notifyDelete:
		l.traceCall("OnDelete", n.newObj)
		l.handler.OnDelete(n.newObj)
	}
}

func (l *listener) traceCall(method string, obj any) {
	if !l.trace.on() {
		return
	}
	key, _ := MetaNamespaceKeyFunc(obj)
	// The "type" of this stage is the handler method called.
	attrs := traceAttrs(key, DeltaType(method), obj)
	l.trace.f(StageHandlerCalled, append(attrs, slog.Int("handler", l.id))...)
}
