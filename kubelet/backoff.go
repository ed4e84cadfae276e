package kubelet

import (
	"maps"
	"time"
)

// Defaults of the restart back-off, as a kubelet has them: 10s, doubling
// on each restart up to 5m.
const (
	DefaultBackOffBase = 10 * time.Second
	DefaultMaxBackOff  = 5 * time.Minute
)

// backOff is the restart back-off of one pod's containers, by container
// name, as the kubelet's runtime keeps it in memory (a kubelet that
// restarts starts with none):
//
//   - A container that exits with no back-off restarts at once, and its
//     back-off becomes base.
//   - A container that exits less than its back-off after it finished
//     waits (CrashLoopBackOff); once that has passed it restarts and its
//     back-off doubles, up to max.
//   - A container that ran longer than twice max before it exited starts
//     over: it restarts at once, its back-off base again.
//
// A backOff value is not shared: nextStatus works on a copy, which the
// kubelet keeps once the status it led to is written.
type backOff struct {
	base, max time.Duration
	entries   map[string]backOffEntry
}

type backOffEntry struct {
	delay time.Duration
	// restarted is when the container last restarted.
	restarted time.Time
}

func (b backOff) clone() backOff {
	b.entries = maps.Clone(b.entries)
	return b
}

// expired reports whether e no longer holds for a run that finished at
// finished: the run lasted more than twice max.
func (b backOff) expired(e backOffEntry, finished time.Time) bool {
	return finished.Sub(e.restarted) > 2*b.max
}

// wait is how long, from now, container (whose last run finished at
// finished) must still wait before it restarts; 0 when it may restart
// now. delay is its current back-off, for the waiting message.
func (b backOff) wait(container string, finished, now time.Time) (wait, delay time.Duration) {
	e, ok := b.entries[container]
	if !ok || b.expired(e, finished) {
		return 0, 0
	}
	if left := e.delay - now.Sub(finished); left > 0 {
		return left, e.delay
	}
	return 0, e.delay
}

// restarted records that container (whose last run finished at finished)
// restarts now: its back-off starts at base, or doubles.
func (b *backOff) restarted(container string, finished, now time.Time) {
	if b.entries == nil {
		b.entries = map[string]backOffEntry{}
	}
	e, ok := b.entries[container]
	switch {
	case !ok || b.expired(e, finished):
		e.delay = b.base
	default:
		e.delay = min(2*e.delay, b.max)
	}
	e.restarted = now
	b.entries[container] = e
}
