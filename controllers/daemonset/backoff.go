package daemonset

import (
	"sync"
	"time"
)

// backoff spaces out the replacement of a node's failed daemon pods, as
// kube's failedPodsBackoff (1s doubling to 15m) does: a pod the kubelet
// keeps failing is deleted and recreated at a slowing pace, not in a hot
// loop. Keys are "<ds uid>/<node>".
type backoff struct {
	initial, max time.Duration

	mu      sync.Mutex
	entries map[string]*backoffEntry
}

type backoffEntry struct {
	delay      time.Duration
	lastUpdate time.Time
}

func newBackoff(initial, max time.Duration) *backoff {
	return &backoff{initial: initial, max: max, entries: map[string]*backoffEntry{}}
}

// inBackoff reports whether key's last step was less than its delay ago,
// and how much of the delay is left.
func (b *backoff) inBackoff(key string, now time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		return false, 0
	}
	left := e.delay - now.Sub(e.lastUpdate)
	return left > 0, left
}

// next takes a step for key: the first step, or one after a quiet spell
// of twice the maximum, waits the initial delay; each further one twice
// the last, up to the maximum.
func (b *backoff) next(key string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || now.Sub(e.lastUpdate) > 2*b.max {
		b.entries[key] = &backoffEntry{delay: b.initial, lastUpdate: now}
		return
	}
	e.delay = min(2*e.delay, b.max)
	e.lastUpdate = now
}

// gc forgets the keys quiet for twice the maximum.
func (b *backoff) gc(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, e := range b.entries {
		if now.Sub(e.lastUpdate) > 2*b.max {
			delete(b.entries, k)
		}
	}
}
