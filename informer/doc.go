// Package informer keeps a local, always-current copy of API objects and
// tells controllers when it changes. It mirrors client-go's tools/cache.
//
// Design, one line per part:
//
//   - Reflector (reflector.go): lists, then watches, one resource and feeds
//     every change into a DeltaFIFO.
//   - DeltaFIFO (delta_fifo.go): a queue of keys, each holding every change
//     (Delta) seen for that object since it was last popped.
//   - Indexer (indexer.go, store.go): the thread-safe local cache, with
//     secondary indexes such as "namespace".
//   - Lister (lister.go): typed, read-only views of an Indexer for
//     controllers.
//   - Trace (trace.go): an optional per-stage log of one change's journey.
//   - workqueue (subpackage): the rate-limited queue of keys that controller
//     workers drain.
//
// Properties:
//
//   - One consumer pops a DeltaFIFO; every key is popped at most once per
//     batch of changes, with all of its deltas in order, and keys are popped
//     in the order they first became dirty.
//   - An object that vanished while the watch was down comes out of the
//     DeltaFIFO as a Deleted delta carrying a DeletedFinalStateUnknown with
//     the last state the cache knew.
//   - Objects handed out by the Indexer and by Listers are shared with the
//     cache and with every other reader: callers must not mutate them. Call
//     DeepCopyObject first and write the copy back through the API.
//
// Lock order: a DeltaFIFO's lock is taken before its KnownObjects' (the
// Indexer's) lock, never the other way round.
package informer
