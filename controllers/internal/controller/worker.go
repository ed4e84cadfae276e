package controller

import (
	"context"
	"errors"
	"log/slog"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/informer/workqueue"
)

// NewQueue returns a controller's workqueue named name (its metrics' name
// label), on c's clock and registered on c.Metrics.
func NewQueue[K comparable](name string, c Common) *workqueue.Queue[K] {
	return workqueue.New[K](name, workqueue.Options{Clock: c.Clock, MetricsRegisterer: c.Metrics})
}

// NewQueueWithRateLimiter is NewQueue with limiter deciding the delays of
// AddRateLimited, for a controller whose retries kube paces its own way
// (the service controller's 5s doubling to 300s).
func NewQueueWithRateLimiter[K comparable](name string, c Common, limiter workqueue.RateLimiter) *workqueue.Queue[K] {
	return workqueue.New[K](name, workqueue.Options{Clock: c.Clock, MetricsRegisterer: c.Metrics, RateLimiter: limiter})
}

// Workers is how many workers Run starts when asked for n: n, and at least
// one, so that a controller run with 0 still does its job.
func Workers(n int) int { return max(n, 1) }

// HandleErr decides what becomes of key now that its sync returned err. A
// controller's processNextWorkItem calls it, and nothing else decides:
//
//   - nil: Forget; the key's next failure backs off from the start.
//   - a workqueue.RequeueAfterError, however wrapped: not a failure. Forget,
//     then AddAfter its delay; logged at Debug.
//   - a conflict or an "already exists": the controller wrote from a cache
//     older than the server, and the newer version is on its way.
//     AddRateLimited; logged at Debug.
//   - anything else: AddRateLimited; logged at Warn, or at Debug once ctx
//     is done: a controller stopping has every call cut short, and its
//     queue, however long, is not worth a line per key.
//
// The log line is a decision like the others: a message, with the key as
// its object; the logger already names the controller.
func HandleErr[K comparable](ctx context.Context, log *slog.Logger, queue *workqueue.Queue[K], key K, err error) {
	var requeue *workqueue.RequeueAfterError
	switch {
	case err == nil:
		queue.Forget(key)
	case errors.As(err, &requeue):
		queue.Forget(key)
		queue.AddAfter(key, requeue.After)
		log.Debug(err.Error(), slog.Any("object", key))
	default:
		level := slog.LevelWarn
		if client.IsConflict(err) || client.IsAlreadyExists(err) || ctx.Err() != nil {
			level = slog.LevelDebug
		}
		log.Log(ctx, level, "sync failed, will retry", slog.Any("object", key),
			slog.Any("err", err), slog.Int("retries", queue.NumRequeues(key)))
		queue.AddRateLimited(key)
	}
}
