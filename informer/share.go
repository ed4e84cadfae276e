package informer

import (
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
)

// Sharing equal parts of cached objects.
//
// Pods made from one template (a ReplicaSet's, a Job's, a DaemonSet's)
// are equal in most of what they hold: containers and their resource
// maps, tolerations, affinity, labels, owner. And the same version of a
// pod comes to several informers of the process: the controller
// manager's, the scheduler's, its node's kubelet's. Each informer decodes
// its own copy of everything it is sent, so a process holds the same
// parts thousands of times over. SharePodParts (share_pod.go) replaces
// each decoded part that equals one already held by the held one, and a
// whole pod version another informer already holds by that informer's
// object; what was decoded becomes garbage.
//
// This is safe because nothing changes a cached object: whoever reads
// one from an Indexer, a Lister or a handler must DeepCopy before
// changing it (see the package doc). What sharing changes is the cost of
// breaking that rule: a write into one cached pod's labels or containers
// is a write into every pod, in every component, that shares them.
//
// The held parts are kept in tables, one per kind of part, for the whole
// process.

// partsPerGeneration bounds each table of parts: a table keeps at most
// twice this many. A cluster has a part of each kind for each template
// in use (ReplicaSets, StatefulSets, DaemonSets, Jobs), hundreds to a few
// thousand; a table that is too small for them only shares less.
const partsPerGeneration = 1024

// stringsPerGeneration bounds the table of interned strings, which holds
// besides the templates' strings one or two strings per node (its name,
// its address).
const stringsPerGeneration = 8192

// conditionsPerGeneration bounds the table of pods' conditions. They
// carry times, so equal ones come from pods that started together, and
// come together: the table needs to remember only the last few.
const conditionsPerGeneration = 256

// podsPerGeneration bounds the table of whole pods, which needs to keep
// a pod's version only until every informer of the process has had it,
// a moment after the first.
const podsPerGeneration = 512

// table holds parts of one kind, each under its protobuf encoding, for
// objects to share. It is safe for concurrent use.
//
// It is bounded by generations, an approximation of least-recently-used
// eviction with O(1) cost and no per-entry bookkeeping: a part is added
// to the current generation; a part found in the previous one moves to
// the current one; when the current one is full it becomes the previous
// one and the old previous one is dropped. A part in use, by pods that
// keep arriving, is found at least once a generation and stays; a part
// no pod has brought for a generation goes. Dropping a part never
// changes an object: the objects that point at it keep it alive, and
// only a later equal part is not shared with them.
//
// Weak pointers (package weak, with runtime.AddCleanup removing an entry
// once its part is garbage) would keep exactly the parts that cached
// objects still use, but many parts are maps (labels, resource lists),
// and Go has no weak pointer to a map. Package unique, which interns with
// weak pointers, keeps an entry only while its Handle lives:
// unique.Make(s).Value() is a string whose entry is gone after the next
// collection, so a string interned again later is copied again. A
// generational table is bounded by count instead of by liveness: it may
// keep up to its bound of parts that no object uses any more (all the
// tables together, full of the parts of 20,000 templates come and gone,
// hold about 8 MB), and in exchange works for every kind of part and
// keeps what it holds across collections.
type table[V any] struct {
	perGeneration int

	mu sync.Mutex
	// cur and prev are the generations: every part is in at most one,
	// len(cur) <= perGeneration, len(prev) <= perGeneration.
	cur, prev map[string]entry[V]
}

// entry is a held part and the key it is held under, so that moving it
// from one generation to the next does not copy the key.
type entry[V any] struct {
	key  string
	part V
}

// share returns the held part whose encoding is key, or, if there is
// none, holds part under a copy of key and returns it; hold, if not nil,
// prepares a part for holding. key may be a scratch buffer: share does
// not keep it.
func (t *table[V]) share(key []byte, part V, hold func(V) V) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.cur[string(key)]; ok {
		return e.part
	}
	e, found := t.prev[string(key)]
	if !found {
		if hold != nil {
			part = hold(part)
		}
		e = entry[V]{key: string(key), part: part}
	}
	t.addLocked(e, found)
	return e.part
}

// lookup returns the held part whose encoding is key, if there is one.
func (t *table[V]) lookup(key []byte) (V, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.cur[string(key)]; ok {
		return e.part, true
	}
	if e, ok := t.prev[string(key)]; ok {
		t.addLocked(e, true)
		return e.part, true
	}
	var zero V
	return zero, false
}

// addLocked puts e in the current generation, starting a new one if it
// is full; fromPrev says e is in the previous one, which must lose it.
func (t *table[V]) addLocked(e entry[V], fromPrev bool) {
	if fromPrev {
		delete(t.prev, e.key)
	}
	switch {
	case t.cur == nil:
		t.cur = make(map[string]entry[V])
	case len(t.cur) >= t.size():
		// The next generation will likely fill up as this one did: made
		// at its size, it need not grow on the way.
		t.prev, t.cur = t.cur, make(map[string]entry[V], t.size())
	}
	t.cur[e.key] = e
}

// size is how many parts a generation of t holds.
func (t *table[V]) size() int {
	if t.perGeneration == 0 {
		return partsPerGeneration
	}
	return t.perGeneration
}

// bound is the most parts t holds.
func (t *table[V]) bound() int { return 2 * t.size() }

// len is how many parts t holds.
func (t *table[V]) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.cur) + len(t.prev)
}

// reset drops every part t holds.
func (t *table[V]) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cur, t.prev = nil, nil
}

// intern returns the held string equal to s, holding a copy of s if
// there is none.
func intern(s string) string {
	if s == "" {
		return s
	}
	t := &held.strings
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.cur[s]; ok {
		return e.key
	}
	e, found := t.prev[s]
	if !found {
		// A copy, so that a string cut from a larger one does not keep
		// the larger one alive.
		e = entry[struct{}]{key: strings.Clone(s)}
	}
	t.addLocked(e, found)
	return e.key
}

// internAs is intern for the string types of the API (PodPhase,
// DNSPolicy, ...).
func internAs[S ~string](s S) S {
	return S(intern(string(s)))
}

// message is what every k8s.io/api type's generated protobuf code has:
// its size, and its encoding written into a buffer of that size.
type message interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// appendMessage appends m's protobuf encoding to b, after its length, so
// that a list of messages appended one after the other is read back in
// one way only. ok is false if m cannot be encoded.
func appendMessage(b []byte, m message) (_ []byte, ok bool) {
	n := m.Size()
	b = protowire.AppendVarint(b, uint64(n))
	start := len(b)
	b = slices.Grow(b, n)[:start+n]
	if _, err := m.MarshalToSizedBuffer(b[start:]); err != nil {
		return b, false
	}
	return b, true
}

// appendString appends s to b after its length.
func appendString(b []byte, s string) []byte {
	return protowire.AppendString(b, s)
}

// keyBuffers are the scratch buffers keys are encoded into, one per
// transform at a time.
var keyBuffers = sync.Pool{New: func() any { return new(encoder) }}

// encoder encodes parts into a scratch buffer for looking them up.
type encoder struct {
	whole []byte   // a whole object's encoding
	buf   []byte   // a part's
	keys  []string // scratch for a map's sorted keys
}

// sharePtr returns the held part equal to *p, or holds p. A nil p is
// returned as it is.
func sharePtr[T any, PT interface {
	*T
	message
}](t *table[PT], e *encoder, p PT) PT {
	if p == nil {
		return p
	}
	key, ok := appendMessage(e.buf[:0], p)
	e.buf = key
	if !ok {
		return p
	}
	return t.share(key, p, nil)
}

// shareSlice returns the held slice equal to s, element by element, or
// holds s, as hold prepares it. An empty s is returned as it is.
func shareSlice[E any, PE interface {
	*E
	message
}](t *table[[]E], e *encoder, s []E, hold func([]E) []E) []E {
	if len(s) == 0 {
		return s
	}
	key := e.buf[:0]
	for i := range s {
		var ok bool
		if key, ok = appendMessage(key, PE(&s[i])); !ok {
			e.buf = key
			return s
		}
	}
	e.buf = key
	return t.share(key, s, hold)
}

// clip is how slices are held: with their capacity cut to their length,
// in a new array if the decoder left spare room (a pod's five conditions
// arrive in an array of eight). An append to a held slice then always
// copies, and never writes into an array another object shares.
func clip[E any](s []E) []E {
	if cap(s) > len(s) {
		s = slices.Clone(s)
	}
	return slices.Clip(s)
}
