package informer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/minictl/minictl/api"
)

// DeltaType says what happened to an object.
type DeltaType string

// The kinds of change a DeltaFIFO records.
const (
	Added   DeltaType = "Added"
	Updated DeltaType = "Updated"
	Deleted DeltaType = "Deleted"
	// Replaced is queued for every object of a relist (Replace): the object
	// exists, but the cache may or may not have seen this version before.
	Replaced DeltaType = "Replaced"
	// Sync is queued by Resync for an object the cache already holds, so
	// that handlers look at it again.
	Sync DeltaType = "Sync"
)

// Delta is one change to one object. Object is the object's state after
// the change; for Deleted it is the last state known, which may be a
// DeletedFinalStateUnknown.
type Delta struct {
	Type   DeltaType
	Object any
}

// Deltas is every change seen for one key, oldest first.
type Deltas []Delta

// Oldest returns the first delta, or nil if there is none.
func (d Deltas) Oldest() *Delta {
	if len(d) == 0 {
		return nil
	}
	return &d[0]
}

// Newest returns the last delta, or nil if there is none.
func (d Deltas) Newest() *Delta {
	if len(d) == 0 {
		return nil
	}
	return &d[len(d)-1]
}

// clone returns a copy that shares no backing array with d.
func (d Deltas) clone() Deltas {
	return append(Deltas(nil), d...)
}

// DeletedFinalStateUnknown is the tombstone of an object that was deleted
// while the watch was disconnected: a relist no longer contained it, so its
// final state is unknown. Obj is the last state the cache knew, which may be
// stale; it is nil if that state was not an api.Object.
type DeletedFinalStateUnknown struct {
	Key string
	Obj api.Object
}

// KeyListerGetter is what a DeltaFIFO needs from the cache it feeds: the keys
// it holds and the object under a key. An Indexer satisfies it.
type KeyListerGetter interface {
	ListKeys() []string
	GetByKey(key string) (item any, exists bool, err error)
}

// ErrFIFOClosed is returned by Pop once the queue is closed and empty.
var ErrFIFOClosed = errors.New("deltafifo: closed")

// DeltaFIFOOptions configures a DeltaFIFO.
type DeltaFIFOOptions struct {
	// KeyFunction computes an object's key. Nil means MetaNamespaceKeyFunc.
	KeyFunction KeyFunc
	// KnownObjects is the cache the popped deltas are applied to (the
	// Indexer). Replace uses it to find objects that vanished, Delete to
	// ignore deletions of objects never seen, and Resync to list what to
	// sync. May be nil, in which case only the queue itself is consulted.
	KnownObjects KeyListerGetter
	// Trace, if set, is called when a delta is queued and when a key is
	// popped, while TraceActive (if set) reports true.
	Trace       TraceFunc
	TraceActive func() bool
	// Transformer, if set, rewrites every object Add, Update, Delete and
	// Replace are given before it is queued (see TransformFunc).
	Transformer TransformFunc
}

// DeltaFIFO is a producer-consumer queue of keys where each key carries every
// change (Delta) seen for that object since it was last popped. A Reflector
// produces (Add, Update, Delete, Replace); one informer goroutine consumes
// (Pop), applying the deltas to the Indexer and calling handlers.
//
// Unlike a plain FIFO it never loses an intermediate change: a handler that
// must see a delete followed by a re-create sees both.
type DeltaFIFO struct {
	// lock guards every field below it; cond, on lock, is broadcast when an
	// item is queued and on Close.
	lock sync.Mutex
	cond sync.Cond

	// items maps a key to its pending deltas, oldest first.
	// Invariant: a key is in queue iff items[key] is non-empty, and then it
	// is in queue exactly once.
	items map[string]Deltas
	// queue holds keys in the order they first became pending.
	queue []string

	// populated is set by the first Add, Update, Delete or Replace.
	populated bool
	// initialPopulationCount is the number of keys queued by the first
	// Replace that have not been popped yet. HasSynced is populated &&
	// initialPopulationCount == 0.
	initialPopulationCount int

	// closed is set by Close; Pop returns ErrFIFOClosed once the queue is
	// also empty.
	closed bool

	keyFunc      KeyFunc
	knownObjects KeyListerGetter
	trace        tracer
	transform    TransformFunc
}

// NewDeltaFIFO returns an empty DeltaFIFO.
func NewDeltaFIFO(opts DeltaFIFOOptions) *DeltaFIFO {
	f := &DeltaFIFO{
		items:        map[string]Deltas{},
		keyFunc:      opts.KeyFunction,
		knownObjects: opts.KnownObjects,
		trace:        tracer{opts.Trace, opts.TraceActive},
		transform:    opts.Transformer,
	}
	if f.keyFunc == nil {
		f.keyFunc = MetaNamespaceKeyFunc
	}
	f.cond.L = &f.lock
	return f
}

func (f *DeltaFIFO) setTransform(fn TransformFunc) {
	f.lock.Lock()
	defer f.lock.Unlock()
	f.transform = fn
}

// KeyOf returns the key of obj, of a tombstone, or of the newest object in a
// Deltas.
func (f *DeltaFIFO) KeyOf(obj any) (string, error) {
	if d, ok := obj.(Deltas); ok {
		newest := d.Newest()
		if newest == nil {
			return "", errors.New("deltafifo: key of empty Deltas")
		}
		obj = newest.Object
	}
	if d, ok := obj.(DeletedFinalStateUnknown); ok {
		return d.Key, nil
	}
	key, err := f.keyFunc(obj)
	if err != nil {
		return "", fmt.Errorf("deltafifo: key of %T: %w", obj, err)
	}
	return key, nil
}

// Add queues an Added delta for obj.
func (f *DeltaFIFO) Add(obj any) error {
	f.lock.Lock()
	defer f.lock.Unlock()
	f.populated = true
	return f.queueActionLocked(Added, obj)
}

// Update queues an Updated delta for obj.
func (f *DeltaFIFO) Update(obj any) error {
	f.lock.Lock()
	defer f.lock.Unlock()
	f.populated = true
	return f.queueActionLocked(Updated, obj)
}

// Delete queues a Deleted delta for obj, unless neither the queue nor
// KnownObjects has ever heard of obj's key: there is nothing to delete then.
// (Without KnownObjects, only the queue is consulted.)
func (f *DeltaFIFO) Delete(obj any) error {
	key, err := f.KeyOf(obj)
	if err != nil {
		return err
	}
	f.lock.Lock()
	defer f.lock.Unlock()
	f.populated = true
	if len(f.items[key]) == 0 {
		if f.knownObjects == nil {
			return nil
		}
		_, exists, err := f.knownObjects.GetByKey(key)
		if err != nil {
			return fmt.Errorf("deltafifo: delete %s: %w", key, err)
		}
		if !exists {
			return nil
		}
	}
	return f.queueActionLocked(Deleted, obj)
}

// Replace is what a relist produces: list is the complete current state. It
// queues a Replaced delta for every listed object, and a Deleted delta with a
// DeletedFinalStateUnknown tombstone for every key that is pending in the
// queue or known to KnownObjects but missing from list. The tombstone carries
// the last state known: the newest queued delta's object if the key is
// pending, otherwise KnownObjects' object.
//
// resourceVersion is the list's version; the DeltaFIFO does not need it.
func (f *DeltaFIFO) Replace(list []any, resourceVersion string) error {
	f.lock.Lock()
	defer f.lock.Unlock()

	listed := make(map[string]struct{}, len(list))
	for _, obj := range list {
		key, err := f.KeyOf(obj)
		if err != nil {
			return err
		}
		listed[key] = struct{}{}
		if err := f.queueActionLocked(Replaced, obj); err != nil {
			return err
		}
	}

	// Keys pending in the queue but no longer listed.
	deletions := 0
	for key, deltas := range f.items {
		if _, ok := listed[key]; ok {
			continue
		}
		deletions++
		tomb := DeletedFinalStateUnknown{Key: key, Obj: lastKnown(deltas.Newest().Object)}
		if err := f.queueActionLocked(Deleted, tomb); err != nil {
			return err
		}
	}

	// Keys the cache holds, not pending, and no longer listed.
	if f.knownObjects != nil {
		for _, key := range f.knownObjects.ListKeys() {
			if _, ok := listed[key]; ok {
				continue
			}
			if len(f.items[key]) > 0 {
				continue // handled above
			}
			obj, exists, err := f.knownObjects.GetByKey(key)
			if err != nil {
				return fmt.Errorf("deltafifo: replace: get %s: %w", key, err)
			}
			if !exists {
				continue // deleted from the cache since ListKeys
			}
			deletions++
			tomb := DeletedFinalStateUnknown{Key: key, Obj: lastKnown(obj)}
			if err := f.queueActionLocked(Deleted, tomb); err != nil {
				return err
			}
		}
	}

	if !f.populated {
		// The queue was empty (nothing was ever added), so every key queued
		// above is distinct and in the queue once.
		f.populated = true
		f.initialPopulationCount = len(listed) + deletions
	}
	return nil
}

// lastKnown returns the api.Object inside obj, looking through a tombstone.
func lastKnown(obj any) api.Object {
	if d, ok := obj.(DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	o, _ := obj.(api.Object)
	return o
}

// Resync queues a Sync delta for every object in KnownObjects whose key is
// not already pending: a pending key will reach the handlers anyway. Without
// KnownObjects, Resync does nothing.
func (f *DeltaFIFO) Resync() error {
	f.lock.Lock()
	defer f.lock.Unlock()
	if f.knownObjects == nil {
		return nil
	}
	for _, key := range f.knownObjects.ListKeys() {
		if len(f.items[key]) > 0 {
			continue
		}
		obj, exists, err := f.knownObjects.GetByKey(key)
		if err != nil {
			return fmt.Errorf("deltafifo: resync: get %s: %w", key, err)
		}
		if !exists {
			continue
		}
		if err := f.queueActionLocked(Sync, obj); err != nil {
			return err
		}
	}
	return nil
}

// queueActionLocked appends a delta to obj's key, queueing the key if it was
// not pending.
func (f *DeltaFIFO) queueActionLocked(typ DeltaType, obj any) error {
	key, err := f.KeyOf(obj)
	if err != nil {
		return err
	}
	// Every object a reflector delivers passes here once, so this is
	// where it is transformed. A tombstone holds what the cache already
	// had, and a Sync the cached object itself: both were transformed
	// when they first came.
	if f.transform != nil && typ != Sync {
		if _, tomb := obj.(DeletedFinalStateUnknown); !tomb {
			if obj, err = f.transform(obj); err != nil {
				return fmt.Errorf("deltafifo: transform %s: %w", key, err)
			}
		}
	}
	// items[key] is never handed out (Get clones, Pop removes it from the
	// map first), so appending in place is safe.
	old := f.items[key]
	deltas := dedupDeltas(append(old, Delta{Type: typ, Object: obj}))
	if len(old) == 0 {
		f.queue = append(f.queue, key)
	}
	f.items[key] = deltas
	if f.trace.on() {
		f.trace.f(StageDeltaFIFOQueued, traceAttrs(key, typ, obj)...)
	}
	f.cond.Broadcast()
	return nil
}

// dedupDeltas merges the last two deltas if both are deletions: an object
// is deleted once. Of the two, it keeps the one that knows the object's
// final state, not a tombstone.
func dedupDeltas(deltas Deltas) Deltas {
	n := len(deltas)
	if n < 2 {
		return deltas
	}
	older, newer := deltas[n-2], deltas[n-1]
	if older.Type != Deleted || newer.Type != Deleted {
		return deltas
	}
	if _, tomb := older.Object.(DeletedFinalStateUnknown); tomb {
		deltas[n-2] = newer
	}
	return deltas[:n-1]
}

// Pop waits until a key is pending, removes it with all its deltas, and calls
// process with them before returning them. isInInitialList reports whether
// the key came from the first Replace and HasSynced was still false.
//
// process runs with the queue locked, so that the cache it updates and the
// queue never disagree in the eyes of Replace, Resync and HasSynced: process
// must not call the DeltaFIFO. process may be nil. If process returns an error, Pop returns it
// too; the deltas are not re-queued.
//
// Pop returns ctx.Err() once ctx is done, and ErrFIFOClosed once the queue is
// closed and empty. Only one goroutine should Pop.
func (f *DeltaFIFO) Pop(ctx context.Context, process func(obj Deltas, isInInitialList bool) error) (Deltas, error) {
	stop := context.AfterFunc(ctx, func() {
		f.lock.Lock()
		defer f.lock.Unlock()
		f.cond.Broadcast()
	})
	defer stop()

	f.lock.Lock()
	defer f.lock.Unlock()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(f.queue) > 0 {
			break
		}
		if f.closed {
			return nil, ErrFIFOClosed
		}
		f.cond.Wait()
	}

	isInInitialList := !f.hasSyncedLocked()
	key := f.queue[0]
	f.queue[0] = ""
	f.queue = f.queue[1:]
	if f.initialPopulationCount > 0 {
		f.initialPopulationCount--
	}
	deltas := f.items[key]
	delete(f.items, key)
	if f.trace.on() {
		newest := deltas.Newest()
		attrs := traceAttrs(key, newest.Type, newest.Object)
		f.trace.f(StageDeltaFIFOPopped, append(attrs, slog.Int("deltas", len(deltas)))...)
	}
	if process == nil {
		return deltas, nil
	}
	return deltas, process(deltas, isInInitialList)
}

// Close makes Pop return ErrFIFOClosed once the queue is empty. Items
// already queued can still be popped.
func (f *DeltaFIFO) Close() {
	f.lock.Lock()
	defer f.lock.Unlock()
	f.closed = true
	f.cond.Broadcast()
}

// IsClosed reports whether Close was called.
func (f *DeltaFIFO) IsClosed() bool {
	f.lock.Lock()
	defer f.lock.Unlock()
	return f.closed
}

// HasSynced reports whether the initial state has been delivered: every key
// queued by the first Replace has been popped (and processed), or the first
// call was an Add, Update or Delete. It is false before any of them.
func (f *DeltaFIFO) HasSynced() bool {
	f.lock.Lock()
	defer f.lock.Unlock()
	return f.hasSyncedLocked()
}

func (f *DeltaFIFO) hasSyncedLocked() bool {
	return f.populated && f.initialPopulationCount == 0
}

// Len returns the number of pending keys.
func (f *DeltaFIFO) Len() int {
	f.lock.Lock()
	defer f.lock.Unlock()
	return len(f.queue)
}

// List returns the newest object of every pending key, in queue order.
func (f *DeltaFIFO) List() []any {
	f.lock.Lock()
	defer f.lock.Unlock()
	list := make([]any, 0, len(f.queue))
	for _, key := range f.queue {
		list = append(list, f.items[key].Newest().Object)
	}
	return list
}

// ListKeys returns the pending keys, in queue order.
func (f *DeltaFIFO) ListKeys() []string {
	f.lock.Lock()
	defer f.lock.Unlock()
	return append([]string(nil), f.queue...)
}

// Get returns a copy of the deltas pending for obj's key.
func (f *DeltaFIFO) Get(obj any) (item Deltas, exists bool, err error) {
	key, err := f.KeyOf(obj)
	if err != nil {
		return nil, false, err
	}
	return f.GetByKey(key)
}

// GetByKey returns a copy of the deltas pending for key.
func (f *DeltaFIFO) GetByKey(key string) (item Deltas, exists bool, err error) {
	f.lock.Lock()
	defer f.lock.Unlock()
	d, ok := f.items[key]
	if !ok {
		return nil, false, nil
	}
	return d.clone(), true, nil
}
