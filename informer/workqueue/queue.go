package workqueue

import (
	"container/heap"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/minictl/minictl/clock"
)

// Options configures a Queue. The zero value is usable: real clock, the
// default controller rate limiter, no metrics.
type Options struct {
	// Clock is the time source for delays, the default rate limiter and
	// metrics. Nil means the real clock.
	Clock clock.Clock
	// RateLimiter decides AddRateLimited's delays. Nil means
	// DefaultControllerRateLimiter(Clock).
	RateLimiter RateLimiter
	// MetricsRegisterer, if set, receives the queue's metrics, labelled
	// name=<the queue's name>. They are unregistered by ShutDown, so a
	// queue of the same name may be created again afterwards. Two live
	// queues of one name on one registry are a wiring bug: New panics.
	MetricsRegisterer prometheus.Registerer
}

// Queue is a work queue of items of type T (usually string keys), with
// delays and rate-limited retries. See the package doc for its properties.
// Create it with New; the zero value is not usable.
type Queue[T comparable] struct {
	name        string
	clock       clock.Clock
	rateLimiter RateLimiter
	metrics     *queueMetrics[T] // nil when metrics are off

	// cond.L guards every field down to shuttingDown. cond is signalled
	// when an item is queued and broadcast on shutdown and when the last
	// processing item is Done.
	cond sync.Cond
	mu   sync.Mutex
	// queue holds the items waiting for a worker, oldest first.
	// Invariant: an item is in queue iff it is in dirty and not in
	// processing, and then it is in queue exactly once.
	queue []T
	// dirty holds the items that need processing: queued, or added again
	// while being processed.
	dirty map[T]struct{}
	// processing holds the items handed out by Get and not yet Done.
	processing map[T]struct{}
	// shuttingDown is set by ShutDown; from then on Add is ignored.
	shuttingDown bool
	// drain is set while ShutDownWithDrain waits for processing to empty;
	// ShutDown clears it to stop the wait.
	drain bool

	// The delaying part; see delaying.go. waitingMu guards waiting, byItem
	// and seq. Invariant: an item is in waiting iff it is in byItem, which
	// points at its entry. Lock order: waitingMu is never held while taking
	// mu.
	waitingMu sync.Mutex
	waiting   waitHeap[T]
	byItem    map[T]*waitEntry[T]
	seq       uint64        // last sequence number given to a waitEntry
	kick      chan struct{} // wakes the waiting loop; buffered 1
	stop      chan struct{} // closed by ShutDown
	loopDone  chan struct{} // closed when the waiting loop returns
	stopOnce  sync.Once
}

// New returns a running queue named name (the name labels its metrics). It
// starts one goroutine, for AddAfter, which ShutDown stops.
func New[T comparable](name string, opts Options) *Queue[T] {
	q := &Queue[T]{
		name:        name,
		clock:       clock.Or(opts.Clock),
		rateLimiter: opts.RateLimiter,
		dirty:       map[T]struct{}{},
		processing:  map[T]struct{}{},
		byItem:      map[T]*waitEntry[T]{},
		kick:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
		loopDone:    make(chan struct{}),
	}
	q.cond.L = &q.mu
	if q.rateLimiter == nil {
		q.rateLimiter = DefaultControllerRateLimiter(q.clock)
	}
	if opts.MetricsRegisterer != nil {
		q.metrics = newQueueMetrics[T](name, q.clock, opts.MetricsRegisterer)
		if err := opts.MetricsRegisterer.Register(q.metrics); err != nil {
			panic(fmt.Sprintf("workqueue %q: register metrics: %v", name, err))
		}
	}
	heap.Init(&q.waiting)
	go q.waitingLoop()
	return q
}

// Name returns the queue's name.
func (q *Queue[T]) Name() string { return q.name }

// Add marks item as needing processing. It is queued unless it already is,
// or, if a worker is processing it, queued again when that worker calls
// Done. After ShutDown, Add does nothing.
func (q *Queue[T]) Add(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	if _, ok := q.dirty[item]; ok {
		return
	}
	q.metrics.add(item)
	q.dirty[item] = struct{}{}
	if _, ok := q.processing[item]; ok {
		return
	}
	q.queue = append(q.queue, item)
	q.metrics.depth(len(q.queue))
	q.cond.Signal()
}

// Len returns the number of queued items (not counting those processing).
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// Get blocks until an item is queued and hands it out; the caller must call
// Done(item) when finished with it. shutdown is true, and item the zero
// value, when the queue is shutting down and empty.
func (q *Queue[T]) Get() (item T, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.queue) == 0 && !q.shuttingDown {
		q.cond.Wait()
	}
	if len(q.queue) == 0 {
		return item, true
	}
	item = q.queue[0]
	var zero T
	q.queue[0] = zero // let the backing array forget it
	q.queue = q.queue[1:]
	q.metrics.get(item)
	q.metrics.depth(len(q.queue))
	q.processing[item] = struct{}{}
	delete(q.dirty, item)
	return item, false
}

// Done marks item as processed. If it was added while being processed, it is
// queued again now.
func (q *Queue[T]) Done(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.processing[item]; !ok {
		return
	}
	q.metrics.done(item)
	delete(q.processing, item)
	if _, ok := q.dirty[item]; ok {
		q.queue = append(q.queue, item)
		q.metrics.depth(len(q.queue))
		q.cond.Signal()
	}
	if len(q.processing) == 0 {
		q.cond.Broadcast() // ShutDownWithDrain may be waiting
	}
}

// ShutDown makes Add ignore new items and Get return shutdown=true once the
// queue is empty, stops the AddAfter goroutine (items still waiting for
// their delay are dropped), and unregisters the metrics. It does not wait
// for workers; see ShutDownWithDrain. Calling it again is harmless.
func (q *Queue[T]) ShutDown() {
	q.mu.Lock()
	q.shuttingDown = true
	q.drain = false
	q.cond.Broadcast()
	q.mu.Unlock()
	q.stopWaitingLoop()
}

// ShutDownWithDrain is ShutDown that then waits until every item handed out
// by Get is Done. Items still queued are not waited for, but workers calling
// Get will get them. A concurrent ShutDown ends the wait early.
func (q *Queue[T]) ShutDownWithDrain() {
	q.mu.Lock()
	q.shuttingDown = true
	q.drain = true
	q.cond.Broadcast()
	for q.drain && len(q.processing) > 0 {
		q.cond.Wait()
	}
	q.drain = false
	q.mu.Unlock()
	q.stopWaitingLoop()
}

// ShuttingDown reports whether ShutDown or ShutDownWithDrain was called.
func (q *Queue[T]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

// stopWaitingLoop stops the AddAfter goroutine, waits for it, and
// unregisters the metrics; only the first call does anything.
func (q *Queue[T]) stopWaitingLoop() {
	q.stopOnce.Do(func() {
		close(q.stop)
		<-q.loopDone
		q.metrics.unregister()
	})
}
