package controller

import (
	"sync"
	"time"

	"github.com/minictl/minictl/clock"
)

// ExpectationsTimeout is how long a controller waits to observe the creates
// and deletes it made before it stops waiting and trusts its cache again:
// a watch event that never comes must not stall a controller for good.
const ExpectationsTimeout = 5 * time.Minute

// Expectations remembers, per controller key ("default/web"), the creates
// and deletes the controller has asked the API for but not yet seen in its
// informer. While a key has some outstanding, the cache is known to be
// behind the API, and a sync that trusted it would create or delete again:
// the controller syncs status only until the informer catches up (or
// ExpectationsTimeout passes).
//
// Deletes are tracked by pod key, not only counted: a pod that is observed
// going away twice (marked for deletion, then removed) lowers the
// expectation once, and a pod someone else deleted does not lower it at
// all.
//
// Invariant: a key's entry has add >= 0 and del == len(deleting).
type Expectations struct {
	clock clock.Clock

	mu    sync.Mutex
	byKey map[string]*expectation
}

type expectation struct {
	add       int                 // creates not yet observed
	deleting  map[string]struct{} // keys of pods whose deletion is not yet observed
	timestamp time.Time           // when these were set
}

// NewExpectations returns empty Expectations reading time from c (nil: the
// real clock).
func NewExpectations(c clock.Clock) *Expectations {
	return &Expectations{clock: clock.Or(c), byKey: map[string]*expectation{}}
}

// Satisfied reports whether the controller may trust its cache for key:
// nothing is outstanding, the expectations have expired, or none were ever
// set (a controller that just started).
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp, ok := e.byKey[key]
	if !ok {
		return true
	}
	if exp.add <= 0 && len(exp.deleting) == 0 {
		return true
	}
	return e.clock.Now().Sub(exp.timestamp) > ExpectationsTimeout
}

// ExpectCreations records that n creates for key are on their way,
// replacing whatever key expected before.
func (e *Expectations) ExpectCreations(key string, n int) { e.Expect(key, n, nil) }

// ExpectDeletions records that the pods podKeys ("namespace/name") are
// being deleted for key, replacing whatever key expected before.
func (e *Expectations) ExpectDeletions(key string, podKeys []string) { e.Expect(key, 0, podKeys) }

// Expect records that n creates and the deletions of the pods podKeys are
// on their way for key at once, replacing whatever key expected before:
// for a controller that creates and deletes in one sync (the DaemonSet's
// rolling update).
func (e *Expectations) Expect(key string, n int, podKeys []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	deleting := make(map[string]struct{}, len(podKeys))
	for _, k := range podKeys {
		deleting[k] = struct{}{}
	}
	e.byKey[key] = &expectation{add: n, deleting: deleting, timestamp: e.clock.Now()}
}

// CreationObserved lowers key's outstanding creates by one: the informer
// saw a pod key created, or a create was given up.
func (e *Expectations) CreationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.byKey[key]; ok && exp.add > 0 {
		exp.add--
	}
}

// DeletionObserved marks the deletion of podKey, if key was waiting for
// it, as seen.
func (e *Expectations) DeletionObserved(key, podKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.byKey[key]; ok {
		delete(exp.deleting, podKey)
	}
}

// Delete forgets key, when its controller object is gone.
func (e *Expectations) Delete(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byKey, key)
}

// Pending returns key's outstanding creates and deletes, for logs and
// tests.
func (e *Expectations) Pending(key string) (adds, deletes int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.byKey[key]; ok {
		return exp.add, len(exp.deleting)
	}
	return 0, 0
}
