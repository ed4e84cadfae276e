// Package slicetracker remembers the EndpointSlices a controller wrote, so
// that it can tell its cache is behind its own writes (upstream's
// EndpointSliceTracker). The endpointslice and endpointslicemirroring
// controllers each keep one. Slices are grouped by their
// kubernetes.io/service-name label; a tracker is safe for concurrent use.
package slicetracker

import (
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Tracker remembers the generation of every slice a controller wrote, by
// service, so that a sync can tell that its cache has not yet seen its own
// last writes. Syncing from such a cache would create a second set of
// slices next to the first; a sync that finds its cache behind waits for
// it instead, and a slice event the controller caused itself does not wake
// the service again.
type Tracker struct {
	mu sync.Mutex
	// generations holds, by service key, each written slice's generation;
	// deletionExpected marks one this controller deleted.
	generations map[string]map[types.UID]int64
}

const deletionExpected = -1

// New returns an empty tracker.
func New() *Tracker {
	return &Tracker{generations: map[string]map[types.UID]int64{}}
}

func serviceKeyOf(s *discoveryv1.EndpointSlice) (string, bool) {
	name, ok := s.Labels[discoveryv1.LabelServiceName]
	return s.Namespace + "/" + name, ok && name != ""
}

// Update records a slice as written.
func (t *Tracker) Update(s *discoveryv1.EndpointSlice) {
	key, ok := serviceKeyOf(s)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.generations[key] == nil {
		t.generations[key] = map[types.UID]int64{}
	}
	t.generations[key][s.UID] = s.Generation
}

// ExpectDeletion records a slice as deleted by this controller.
func (t *Tracker) ExpectDeletion(s *discoveryv1.EndpointSlice) {
	key, ok := serviceKeyOf(s)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.generations[key] == nil {
		t.generations[key] = map[types.UID]int64{}
	}
	t.generations[key][s.UID] = deletionExpected
}

// HandleDeletion forgets a deleted slice, and reports whether the
// deletion was unexpected: someone else's, which the service must repair.
func (t *Tracker) HandleDeletion(s *discoveryv1.EndpointSlice) bool {
	key, ok := serviceKeyOf(s)
	if !ok {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	gens := t.generations[key]
	g, known := gens[s.UID]
	delete(gens, s.UID)
	return !known || g != deletionExpected
}

// ShouldSync reports whether an event about s is news: a slice not
// written by this controller, or changed since.
func (t *Tracker) ShouldSync(s *discoveryv1.EndpointSlice) bool {
	key, ok := serviceKeyOf(s)
	if !ok {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	g, known := t.generations[key][s.UID]
	return !known || s.Generation > g
}

// Stale reports whether the cache's slices of service key are older than
// what this controller wrote: one it wrote is missing or of an older
// generation, or one it deleted is still there.
func (t *Tracker) Stale(key string, cached []*discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	gens := t.generations[key]
	seen := make(map[types.UID]bool, len(cached))
	for _, s := range cached {
		seen[s.UID] = true
		if g, ok := gens[s.UID]; ok && (g == deletionExpected || g > s.Generation) {
			return true
		}
	}
	for uid, g := range gens {
		if g != deletionExpected && !seen[uid] {
			return true
		}
	}
	return false
}

// DeleteService drops what is known of a deleted service.
func (t *Tracker) DeleteService(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.generations, key)
}
