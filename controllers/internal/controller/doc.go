// Package controller holds what the workload controllers share, the part of
// upstream's pkg/controller (controller_utils.go, controller_ref_manager.go)
// that more than one controller needs.
//
// Design, one line per part:
//
//   - expectations.go: Expectations, the creates and deletes a controller
//     is waiting to see in its informer before it trusts the cache again.
//   - refmanager.go: RefManager, claiming objects by controller reference:
//     adopt matching orphans, release owned objects that stopped matching.
//   - podcontrol.go: PodControl, creating pods from a template and deleting
//     them, with an Event for each; NopRecorder, for a controller given no
//     recorder.
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
