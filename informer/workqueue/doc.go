// Package workqueue is the queue of keys between an informer's event handlers
// and a controller's workers. It mirrors client-go's util/workqueue, generic
// over the item type instead of interface{}.
//
// Design, one line per part:
//
//   - queue.go: the queue itself (Add, Get, Done, ShutDown).
//   - delaying.go: AddAfter, with a heap and one goroutine owned by the queue.
//   - rate_limiter.go: per-item exponential backoff and an overall token
//     bucket, for AddRateLimited, Forget and NumRequeues.
//   - metrics.go: Prometheus metrics, registered on a registry the caller
//     passes in.
//   - requeue.go: RequeueAfter, a worker's "look again later" that is not
//     a failure.
//
// Properties:
//
//   - Fair: items are handed out in the order they were added.
//   - Stingy: an item is queued at most once, however often it is added
//     before a worker gets it. Ten changes to one object cost one
//     reconcile.
//   - Exclusive: an item is never handed to two workers at once. An item
//     added while a worker processes it is queued again only when that
//     worker calls Done, so the change is not lost and no two workers race
//     on one key.
//   - Multiple consumers and producers: every method is safe for
//     concurrent use; any number of workers may Get.
//   - Delays keep the earliest time: AddAfter of an item already waiting
//     moves it earlier, never later. AddAfter with a delay <= 0 is Add.
//   - Orderly shutdown: after ShutDown, Add is ignored, Get hands out what
//     is still queued and then returns shutdown=true at once.
//     ShutDownWithDrain also waits until every item handed out is Done.
//
// The caller must call Done exactly once for every item Get returned, and
// must decide retry or forget in one place: AddRateLimited to retry with
// backoff, Forget when the item succeeded (or will never succeed), Forget
// and AddAfter when its worker answered RequeueAfter.
package workqueue
