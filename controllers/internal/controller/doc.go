// Package controller holds what the controllers share: the skeleton every
// one of them is built on, and the part of upstream's pkg/controller
// (controller_utils.go, controller_ref_manager.go) that more than one
// controller needs.
//
// The skeleton is deliberately not a framework: each controller still reads
// top to bottom in its own file (Options → New → Run → processNextWorkItem
// → sync → helpers), and only what must not differ between controllers
// lives here:
//
//   - options.go: Common, the options every controller's Options embeds
//     (client, informer factory, recorder, logger, metrics, clock), and
//     Complete, which checks them and applies their defaults: a nil
//     Recorder records nothing, a nil Logger discards, a nil Clock is the
//     real clock; the logger gets controller=<name>, once.
//   - worker.go: NewQueue, a workqueue on the controller's clock and
//     metrics; Workers, the guard that runs at least one worker; and
//     HandleErr, the one place that decides retry, forget or look again
//     later (workqueue.RequeueAfter) for every processNextWorkItem.
//
// And what the workload controllers share:
//
//   - expectations.go: Expectations, the creates and deletes a controller
//     is waiting to see in its informer before it trusts the cache again.
//   - refmanager.go: RefManager, claiming objects by controller reference:
//     adopt matching orphans, release owned objects that stopped matching.
//   - podcontrol.go: PodControl, creating pods from a template and deleting
//     them, with an Event for each.
//   - pods.go: which pods count (active, available) and the order in which
//     pods are deleted on scale-down.
//   - index.go: the index of objects by their controller's uid.
//   - slowstart.go: SlowStartBatch, creating in growing batches.
//   - metrics.go: Register, registering a controller's metrics on a
//     registry that may hold them from an earlier leadership term.
//
// Properties:
//
//   - Nothing here keeps a reference to an object it is given: objects
//     from an informer's cache are read, never mutated.
//   - Every type is safe for concurrent use unless its doc says otherwise.
package controller
