package apiserver

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The requests in flight are bounded, so that overload is answered rather
// than absorbed: every request that is not exempt (flowschema.go says
// which are) holds a seat of its priority level while it runs. A request
// that finds every seat taken is answered 429 TooManyRequests with
// Retry-After: 1 at once, as kube-apiserver's max-in-flight filter
// answers; in the system's own levels it first waits for a seat, as API
// Priority and Fairness queues, for at most queueWait among a bounded
// number of others. The seats of one level never serve another, so a
// flood of user requests cannot take those of the kubelets' heartbeats.

// Defaults of Config.MaxRequestsInflight and
// Config.MaxMutatingRequestsInflight: kube-apiserver's.
const (
	DefaultMaxRequestsInflight         = 400
	DefaultMaxMutatingRequestsInflight = 200
)

// queueWait is how long a request of a level that queues waits for a seat
// before it is refused: a quarter of kube-apiserver's default request
// timeout, as its API Priority and Fairness waits.
const queueWait = 15 * time.Second

// Why a request was refused, as apiserver_flowcontrol_rejected_requests_total
// names it.
const (
	rejectConcurrencyLimit = "concurrency-limit" // every seat taken, and the level does not queue
	rejectQueueFull        = "queue-full"        // every seat taken, and the queue full
	rejectTimeOut          = "time-out"          // no seat came free within queueWait
	rejectCancelled        = "cancelled"         // the client went away while waiting
)

// tooManyRequests is the answer to a refused request; Retry-After: 1 goes
// with it.
func tooManyRequests() error {
	return apierrors.NewTooManyRequests("Too many requests, please try again later.", 1)
}

// seats is one pool of seats. Invariant: len(sem) is the number of
// requests holding a seat, and waiting the number waiting for one.
type seats struct {
	sem     chan struct{} // one token per seat taken; nil: no limit
	queue   int64         // how many may wait for a seat; 0: none wait
	wait    time.Duration // how long each may wait
	waiting atomic.Int64
}

// newSeats returns a pool of n seats (n < 0: no limit) with a queue of
// queue requests that wait at most wait.
func newSeats(n, queue int, wait time.Duration) *seats {
	s := &seats{queue: int64(queue), wait: wait}
	if n >= 0 {
		s.sem = make(chan struct{}, n)
	}
	return s
}

// acquire takes a seat, waiting in the queue if the pool has one; it
// returns "" with a seat, which the caller gives back with release, or the
// reason it has none. inqueue counts the requests waiting.
func (s *seats) acquire(ctx context.Context, inqueue prometheus.Gauge) (reason string) {
	if s.sem == nil {
		return ""
	}
	select {
	case s.sem <- struct{}{}:
		return ""
	default:
	}
	if s.queue == 0 {
		return rejectConcurrencyLimit
	}
	if s.waiting.Add(1) > s.queue {
		s.waiting.Add(-1)
		return rejectQueueFull
	}
	inqueue.Inc()
	defer func() {
		s.waiting.Add(-1)
		inqueue.Dec()
	}()
	t := time.NewTimer(s.wait)
	defer t.Stop()
	select {
	case s.sem <- struct{}{}:
		return ""
	case <-t.C:
		return rejectTimeOut
	case <-ctx.Done():
		return rejectCancelled
	}
}

func (s *seats) release() {
	if s.sem != nil {
		<-s.sem
	}
}

// limitInflight wraps next in the bound: each request is classified, takes
// a seat of its level for as long as next serves it, or is refused.
func (fc *flowControl) limitInflight(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs, mutating := fc.classify(r)
		if fs == nil {
			next.ServeHTTP(w, r)
			return
		}
		kind := &fc.kinds[kindIndex(mutating)]
		pool := fs.level.seats(mutating)
		if reason := pool.acquire(r.Context(), fs.inqueue); reason != "" {
			fc.rejected.WithLabelValues(fs.name, fs.level.name, reason).Inc()
			kind.dropped.Inc()
			w.Header().Set("Retry-After", "1")
			writeStatus(w, tooManyRequests())
			return
		}
		fs.served.Inc()
		fs.inflight.Inc()
		kind.inflight.Inc()
		defer func() {
			kind.inflight.Dec()
			fs.inflight.Dec()
			pool.release()
		}()
		next.ServeHTTP(w, r)
	})
}

// requestKind is kube's split of requests into read-only and mutating,
// with the series that count each.
type requestKind struct {
	inflight prometheus.Gauge   // apiserver_current_inflight_requests
	dropped  prometheus.Counter // apiserver_dropped_requests_total
}

func kindIndex(mutating bool) int {
	if mutating {
		return 1
	}
	return 0
}
