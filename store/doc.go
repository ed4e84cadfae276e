// Package store keeps minictl's objects in etcd, the way kube-apiserver's
// storage layer (k8s.io/apiserver/pkg/storage/etcd3) does. It knows keys,
// opaque values and revisions; it knows nothing about kinds.
//
// # Design
//
//   - store.go: Open and Close an embedded etcd, called in process through
//     etcd's v3client (no gRPC encoding, no socket), or dial an external one.
//   - kv.go: Create, Get, List, Update, Delete, Revision: reads and
//     compare-and-swap writes of single keys; CreateExpiring and
//     UpdateExpiring write a key that etcd deletes after a TTL, with a
//     lease shared by the writes of a minute (leases.go).
//   - watch.go: Watch: an ordered stream of changes under a prefix, each
//     on an etcd watch stream of its own; RequestProgress: every open
//     watch on a prefix learns the current revision now.
//   - compact.go: Compact and the periodic compaction loop.
//   - member.go: StartMember: one member of an etcd cluster of several,
//     each in a process of its own (`minictl etcd`), for a Store whose
//     Endpoints name them all.
//   - call.go: what every request to etcd goes through: its deadline, the
//     check of Health, and the mapping of etcd's errors to ours.
//   - health.go: Health: the probe that tells whether etcd answers.
//   - history.go: which etcd history the Store follows, and how it
//     notices that etcd lost it.
//   - zaplog.go: etcd's zap logs, forwarded to the caller's slog.Logger.
//
// # Guarantees
//
// Revisions. Every successful write (create, update, delete) is given a
// revision by etcd: one counter for the whole store, strictly increasing,
// never reused, and preserved across restarts on the same data directory. A
// key's Revision is the revision of its last write; the apiserver shows it as
// metadata.resourceVersion. Two reads that report the same revision saw the
// same state.
//
// Compare-and-swap. Create succeeds only if the key is absent (ErrExists
// otherwise). Update and a conditional Delete succeed only if the key exists
// (ErrNotFound otherwise) and its Revision is still the one the caller read
// (ErrConflict otherwise); a failed write changes nothing. Each call is one
// etcd transaction, so there is no window between the check and the write.
//
// Reads. Get, Revision, and List without a Revision are linearizable: they
// see every write that returned before they started. List at a Revision sees
// the state exactly as it was then. List returns keys in byte order, so
// paging with Limit and StartKey at a fixed Revision visits every key
// exactly once.
//
// Watch. A watch from revision R delivers every change under its prefix with
// revision >= R, each exactly once, in revision order, with the previous
// value. It never skips silently: if R's history has been compacted, the
// watch ends with an event whose Err wraps ErrCompacted, and the caller must
// list again and watch from the list's revision.
//
// Compaction. etcd keeps old revisions until they are compacted. After
// Compact(R), reads at revisions below R and watches from below R fail with
// ErrCompacted; the latest value of every key is always kept. Open starts a
// loop that, like kube-apiserver, compacts every CompactionInterval to the
// revision seen one interval earlier, so at least one interval of history is
// always available to watchers that fall behind.
//
// Clusters. With Endpoints naming the members of an etcd cluster, the
// client moves to another member when one fails; revisions are the
// cluster's, so every guarantee above holds across a failover. A write in
// flight when the leader fails may end in an error (after etcd's request
// timeout) without telling whether it happened: read the key back.
//
// Deadlines. Every request but a watch has a deadline: its context's, or
// Config.RequestTimeout. One that passes fails the request with
// context.DeadlineExceeded; nothing waits on etcd for ever.
//
// Outages. The Store probes etcd every second (a linearizable read that
// must answer within two seconds). Health reports the last probe: within
// about three seconds of etcd becoming unreachable it is ErrUnavailable,
// and every request fails at once with it instead of waiting out its
// deadline; within a second of etcd's return it is nil again, without
// anyone reopening anything. Watches stay open across an outage and resume
// where they were.
//
// History. Revisions only grow within one etcd history. If etcd comes back
// from an outage without its data (wiped, restored from an older backup) or
// as another cluster, an answer shows a lower revision than one it had
// committed, or another cluster ID: the Store then follows the new
// history, ends every watch with ErrHistoryReset, and forgets what it knew
// of compaction. A caller that keeps state by revision (a cache) must list
// again; revisions it read before mean nothing now. An etcd of the same
// cluster ID that has already written past every revision the Store saw
// cannot be told from the one it replaced: restore backups with revisions
// bumped past the old ones (etcdutl snapshot restore --bump-revision
// --mark-compacted), as Kubernetes asks.
//
// Values are the caller's: the Store keeps no reference to a value it was
// given or returned.
package store
