package endpointslice

import (
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// tracker remembers the generation of every slice this controller wrote,
// by service, so that a sync can tell that its cache has not yet seen its
// own last writes (upstream's EndpointSliceTracker). Syncing from such a
// cache would create a second set of slices next to the first; a sync
// that finds its cache behind waits for it instead, and a slice event the
// controller caused itself does not wake the service again.
type tracker struct {
	mu sync.Mutex
	// generations holds, by service key, each written slice's generation;
	// deletionExpected marks one this controller deleted.
	generations map[string]map[types.UID]int64
}

const deletionExpected = -1

func newTracker() *tracker {
	return &tracker{generations: map[string]map[types.UID]int64{}}
}

func serviceKeyOf(s *discoveryv1.EndpointSlice) (string, bool) {
	name, ok := s.Labels[discoveryv1.LabelServiceName]
	return s.Namespace + "/" + name, ok && name != ""
}

// update records a slice as written.
func (t *tracker) update(s *discoveryv1.EndpointSlice) {
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

// expectDeletion records a slice as deleted by this controller.
func (t *tracker) expectDeletion(s *discoveryv1.EndpointSlice) {
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

// handleDeletion forgets a deleted slice, and reports whether the
// deletion was unexpected: someone else's, which the service must repair.
func (t *tracker) handleDeletion(s *discoveryv1.EndpointSlice) bool {
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

// shouldSync reports whether an event about s is news: a slice not
// written by this controller, or changed since.
func (t *tracker) shouldSync(s *discoveryv1.EndpointSlice) bool {
	key, ok := serviceKeyOf(s)
	if !ok {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	g, known := t.generations[key][s.UID]
	return !known || s.Generation > g
}

// stale reports whether the cache's slices of service key are older than
// what this controller wrote: one it wrote is missing or of an older
// generation, or one it deleted is still there.
func (t *tracker) stale(key string, cached []*discoveryv1.EndpointSlice) bool {
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

// forget drops what is known of a deleted service.
func (t *tracker) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.generations, key)
}
