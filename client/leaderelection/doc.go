// Package leaderelection elects one leader among the replicas of a
// component (the controller manager, the scheduler) through a
// coordination.k8s.io/v1 Lease, as client-go's tools/leaderelection does:
// the replica that holds the lease does the work, the others wait to take
// over.
//
// Design, one line per part:
//
//   - config.go: Config, its defaults and its checks (client-go's
//     LeaderElectionConfig).
//   - leaderelection.go: LeaderElector, Run's loops (acquire, then renew
//     until lost or cancelled), IsLeader and GetLeader (client-go's
//     LeaderElector).
//   - lease.go: one attempt to acquire or renew, and release, as
//     compare-and-swap writes of the Lease (client-go's LeaseLock).
//
// Properties:
//
//   - Every write of the lease is a compare-and-swap on its
//     resourceVersion: of two candidates writing at once, one wins and the
//     other gets a Conflict and reads again. The apiserver, not a clock,
//     decides who holds the lease.
//   - A candidate takes over another holder's lease only after it has seen
//     the lease unchanged for leaseDurationSeconds by its own clock. It
//     never compares the holder's renewTime with its clock, so clock skew
//     between machines cannot make it steal a live lease (clock rates are
//     assumed equal).
//   - The leader stops leading if it has not renewed within RenewDeadline
//     of its last successful renewal, and IsLeader turns false by then even
//     if a renewal request hangs. As RenewDeadline < LeaseDuration, an old
//     leader has stopped before any other candidate may take over: IsLeader
//     is never true for two candidates at once (provided each Identity is
//     unique).
//   - OnStartedLeading runs in a goroutine with a context that ends when
//     leadership does; work it starts is guarded only while that context
//     is live. Run waits for it to return before releasing the lease and
//     calling OnStoppedLeading, so with ReleaseOnCancel the next leader
//     starts only after this one's work has returned.
//   - leaseTransitions counts changes of holder (releasing is not one;
//     taking a released lease is); acquireTime is when the holder took it.
//   - A LeaderElector runs once: after Run returns, make a new one to stand
//     again (a manager that lost leadership usually exits instead).
//
// Unlike client-go, OnStoppedLeading is called only if leadership started,
// OnNewLeader never reports "" (a released lease), and Run returns an
// error saying whether leadership was lost (ErrLeaseLost) or cancelled
// (nil).
package leaderelection
