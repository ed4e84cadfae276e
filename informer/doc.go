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
//   - TransformFunc (transform.go, share.go, share_pod.go): what an
//     informer does to each object before caching it. StripManagedFields
//     drops managedFields; SharePodParts makes a pod share what it has in
//     common with every other pod cached in the process; Lean is the two.
//   - workqueue (subpackage): the rate-limited queue of keys that controller
//     workers drain.
//   - ListerWatcher (listwatch.go): the list and watch a Reflector needs,
//     adapted from a client.Client[T] with optional selectors.
//   - SharedInformer, Informer[T] (shared_informer.go): Reflector +
//     DeltaFIFO + Indexer, popping changes into the cache and out to
//     handlers.
//   - ResourceEventHandler (event_handler.go): what handlers implement; each
//     runs on its own goroutine from its own buffer.
//   - SharedInformerFactory (factory.go): one informer per resource per
//     process, asked for by Go type (For) or by catalogue entry
//     (ForResource, for code that handles every kind), started and stopped
//     together.
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
//     DeepCopyObject first and write the copy back through the API. With
//     SharePodParts (or Lean), a pod's parts are also shared with other
//     pods, and a pod with other informers of the process: a mutation
//     would reach all of them.
//   - The cache converges on the server's state whatever happens to the
//     connection: a watch that ends resumes from the last resourceVersion
//     seen; a resourceVersion too old to resume (410 Gone) leads to a
//     relist; other failures are retried with exponential, jittered
//     backoff.
//   - Handlers see each object's changes in resourceVersion order, after
//     the cache does; a slow handler delays no one but itself.
//   - A resource is listed and watched once per factory, however many
//     controllers ask for its informer.
//   - Every goroutine is started by a Run (or a factory's Start) and has
//     returned when Run returns (or Shutdown does); handlers must return.
//
// Lock order: a DeltaFIFO's lock is taken before its KnownObjects' (the
// Indexer's) lock, never the other way round. In a SharedInformer: the
// DeltaFIFO's lock, then the informer's, then the Indexer's or a handler
// buffer's.
package informer
