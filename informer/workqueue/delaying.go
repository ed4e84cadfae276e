package workqueue

import (
	"container/heap"
	"time"

	"github.com/minictl/minictl/clock"
)

// waitEntry is an item waiting for its delay to pass.
type waitEntry[T comparable] struct {
	item    T
	readyAt time.Time
	seq     uint64 // order in which readyAt was set, to break ties
	index   int    // position in the heap, kept by waitHeap
}

// waitHeap is a min-heap of waiting items by readyAt, then seq.
type waitHeap[T comparable] []*waitEntry[T]

func (h waitHeap[T]) Len() int { return len(h) }
func (h waitHeap[T]) Less(i, j int) bool {
	if h[i].readyAt.Equal(h[j].readyAt) {
		return h[i].seq < h[j].seq
	}
	return h[i].readyAt.Before(h[j].readyAt)
}
func (h waitHeap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *waitHeap[T]) Push(x any) {
	e := x.(*waitEntry[T])
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *waitHeap[T]) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return e
}

// AddAfter adds item once d has passed. If item is already waiting, it keeps
// the earlier of the two times. A d <= 0 adds it at once. After ShutDown,
// AddAfter does nothing. Each call counts as a retry in the metrics.
func (q *Queue[T]) AddAfter(item T, d time.Duration) {
	if q.ShuttingDown() {
		return
	}
	q.metrics.retry()
	if d <= 0 {
		q.Add(item)
		return
	}
	readyAt := q.clock.Now().Add(d)

	q.waitingMu.Lock()
	if e, ok := q.byItem[item]; ok {
		if readyAt.Before(e.readyAt) {
			q.seq++
			e.readyAt, e.seq = readyAt, q.seq
			heap.Fix(&q.waiting, e.index)
		}
	} else {
		q.seq++
		e := &waitEntry[T]{item: item, readyAt: readyAt, seq: q.seq}
		heap.Push(&q.waiting, e)
		q.byItem[item] = e
	}
	q.waitingMu.Unlock()

	select {
	case q.kick <- struct{}{}:
	default: // the loop is already due to look
	}
}

// popReady removes the items whose time has come. It returns them, and the
// earliest time still waiting (ok=false if none).
func (q *Queue[T]) popReady(now time.Time) (ready []T, next time.Time, ok bool) {
	q.waitingMu.Lock()
	defer q.waitingMu.Unlock()
	for len(q.waiting) > 0 {
		e := q.waiting[0]
		if e.readyAt.After(now) {
			return ready, e.readyAt, true
		}
		heap.Pop(&q.waiting)
		delete(q.byItem, e.item)
		ready = append(ready, e.item)
	}
	return ready, time.Time{}, false
}

// waitingLoop moves items whose delay has passed into the queue. It sleeps
// until the earliest deadline or until AddAfter kicks it, and returns when
// ShutDown closes q.stop.
func (q *Queue[T]) waitingLoop() {
	defer close(q.loopDone)
	var timer clock.Timer
	stopTimer := func() {
		if timer != nil {
			timer.Stop()
			timer = nil
		}
	}
	defer stopTimer()
	for {
		now := q.clock.Now()
		ready, next, ok := q.popReady(now)
		for _, item := range ready {
			q.Add(item)
		}

		stopTimer()
		var fire <-chan time.Time
		if ok {
			// The wait runs from now, not from the loop's start: adding
			// the ready items took time.
			timer = q.clock.NewTimer(next.Sub(q.clock.Now()))
			fire = timer.C()
			// The clock may still move between that reading and the
			// timer's start, which then ends that much late: if next has
			// come meanwhile, look again at once.
			if !q.clock.Now().Before(next) {
				continue
			}
		}
		select {
		case <-q.stop:
			return
		case <-fire:
		case <-q.kick:
		}
	}
}
