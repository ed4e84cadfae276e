package workqueue

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/minictl/minictl/clock"
)

// RateLimiter decides how long an item waits before it is retried. Items
// are compared with ==, so a Queue[T] passes its T.
type RateLimiter interface {
	// When records one more failure of item and returns how long to wait
	// before retrying it.
	When(item any) time.Duration
	// Forget clears item's failures: it succeeded, or was given up on.
	Forget(item any)
	// NumRequeues returns the failures recorded for item since the last
	// Forget.
	NumRequeues(item any) int
}

// Default rate limits, as client-go's controllers use them.
const (
	DefaultBaseDelay = 5 * time.Millisecond
	DefaultMaxDelay  = 1000 * time.Second
	DefaultQPS       = 10
	DefaultBurst     = 100
)

// DefaultControllerRateLimiter returns the limiter controllers use: per-item
// exponential backoff from 5ms to 1000s, and for all items together a token
// bucket of 10 retries per second with a burst of 100; an item waits for the
// longer of the two. A nil clock means the real clock.
func DefaultControllerRateLimiter(clk clock.Clock) RateLimiter {
	return NewMaxOfRateLimiter(
		NewItemExponentialFailureRateLimiter(DefaultBaseDelay, DefaultMaxDelay),
		NewBucketRateLimiter(DefaultQPS, DefaultBurst, clk),
	)
}

// ItemExponentialFailureRateLimiter waits base*2^failures for an item,
// capped at max: 5ms, 10ms, 20ms, ... for the default base.
type ItemExponentialFailureRateLimiter struct {
	base, max time.Duration

	// mu guards failures, which holds an entry only for items with at least
	// one failure since their last Forget.
	mu       sync.Mutex
	failures map[any]int
}

// NewItemExponentialFailureRateLimiter returns a per-item exponential
// backoff from base to max.
func NewItemExponentialFailureRateLimiter(base, max time.Duration) *ItemExponentialFailureRateLimiter {
	return &ItemExponentialFailureRateLimiter{base: base, max: max, failures: map[any]int{}}
}

// When returns base*2^(failures so far), capped at max, and counts a failure.
func (r *ItemExponentialFailureRateLimiter) When(item any) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	exp := r.failures[item]
	r.failures[item] = exp + 1
	backoff := float64(r.base) * math.Pow(2, float64(exp)) // float: no overflow
	if backoff > float64(r.max) {
		return r.max
	}
	return time.Duration(backoff)
}

// Forget clears item's failures.
func (r *ItemExponentialFailureRateLimiter) Forget(item any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failures, item)
}

// NumRequeues returns item's failures since its last Forget.
func (r *ItemExponentialFailureRateLimiter) NumRequeues(item any) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failures[item]
}

// BucketRateLimiter limits all items together with a token bucket: qps
// retries per second on average, up to burst at once. It keeps no per-item
// state.
type BucketRateLimiter struct {
	limiter *rate.Limiter
	clock   clock.Clock
}

// NewBucketRateLimiter returns a token bucket of qps and burst reading time
// from clock (nil means the real clock).
func NewBucketRateLimiter(qps float64, burst int, clk clock.Clock) *BucketRateLimiter {
	return &BucketRateLimiter{limiter: rate.NewLimiter(rate.Limit(qps), burst), clock: clock.Or(clk)}
}

// When takes a token and returns how long until it is really available.
func (r *BucketRateLimiter) When(any) time.Duration {
	now := r.clock.Now()
	return r.limiter.ReserveN(now, 1).DelayFrom(now)
}

// Forget does nothing: the bucket is shared by all items.
func (r *BucketRateLimiter) Forget(any) {}

// NumRequeues is always 0: the bucket does not count per item.
func (r *BucketRateLimiter) NumRequeues(any) int { return 0 }

// MaxOfRateLimiter combines limiters: an item waits for the longest of their
// delays.
type MaxOfRateLimiter struct {
	limiters []RateLimiter
}

// NewMaxOfRateLimiter returns a limiter waiting for the longest of limiters.
func NewMaxOfRateLimiter(limiters ...RateLimiter) *MaxOfRateLimiter {
	return &MaxOfRateLimiter{limiters: limiters}
}

// When asks every limiter (each records the failure) and returns the longest
// delay.
func (r *MaxOfRateLimiter) When(item any) time.Duration {
	var longest time.Duration
	for _, l := range r.limiters {
		longest = max(longest, l.When(item))
	}
	return longest
}

// Forget forgets item in every limiter.
func (r *MaxOfRateLimiter) Forget(item any) {
	for _, l := range r.limiters {
		l.Forget(item)
	}
}

// NumRequeues returns the largest count any limiter has for item.
func (r *MaxOfRateLimiter) NumRequeues(item any) int {
	var n int
	for _, l := range r.limiters {
		n = max(n, l.NumRequeues(item))
	}
	return n
}

// AddRateLimited adds item after the delay the rate limiter gives it: the
// retry path for a failed item.
func (q *Queue[T]) AddRateLimited(item T) {
	q.AddAfter(item, q.rateLimiter.When(item))
}

// Forget tells the rate limiter item is done being retried, resetting its
// backoff. It does not remove item from the queue.
func (q *Queue[T]) Forget(item T) {
	q.rateLimiter.Forget(item)
}

// NumRequeues returns how many times item has been rate-limited since its
// last Forget.
func (q *Queue[T]) NumRequeues(item T) int {
	return q.rateLimiter.NumRequeues(item)
}
