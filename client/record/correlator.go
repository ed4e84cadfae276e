package record

import (
	"hash/maphash"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The limits of correlation, client-go's values.
const (
	// cacheSize bounds each of the correlator's two caches.
	cacheSize = 4096
	// maxSimilar distinct messages of similar events (same object, type,
	// reason and source) within similarWindow of each other, and every
	// further similar event is written as one combined event.
	maxSimilar    = 10
	similarWindow = 10 * time.Minute
	// combinedPrefix starts the message of a combined event.
	combinedPrefix = "(combined from similar events): "
)

// correlator turns the stream of events a component records into the
// events the API should hold, the way client-go's EventCorrelator does:
//
//   - An event seen before (same object, type, reason, message and source)
//     is a repeat: the event already written gets count+1 and a new
//     lastTimestamp instead of a new Event appearing.
//   - Similar events (the same but for the message) with many different
//     messages in a short time are combined into one event, so a
//     component that puts, say, a changing number in its message cannot
//     flood the namespace.
//
// It does no I/O, and is not safe for concurrent use: the recorder's sender
// goroutine is its only user.
//
// It remembers events by key, a hash of the fields that make two events
// the same, never by the fields themselves: a component remembers up to
// twice cacheSize events, and one process runs a kubelet per node.
type correlator struct {
	similar *lru[key, *similarRecord] // by the key of similarParts
	written *lru[key, writtenRecord]  // by the key correlate returned
}

// key identifies events: a 128-bit hash of the strings that make them the
// same (two maphash sums, with seeds of their own), so that two different
// events share a key with a probability of about 2^-128.
type key [2]uint64

var keySeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// keyOf hashes parts, each ended by a NUL (which Kubernetes names and
// reasons never hold), so that no two lists of parts hash the same string.
func keyOf(parts ...string) key {
	var k key
	for i := range k {
		var h maphash.Hash
		h.SetSeed(keySeeds[i])
		for _, p := range parts {
			h.WriteString(p)
			h.WriteByte(0)
		}
		k[i] = h.Sum64()
	}
	return k
}

// similarRecord is what the correlator remembers of the similar events of
// one key of similarParts.
type similarRecord struct {
	messages []uint64  // the distinct messages' hashes, at most maxSimilar
	last     time.Time // when the last of them happened
}

// writtenRecord is what the server holds under a correlation key: the name
// and count of the Event, and when it first happened.
type writtenRecord struct {
	name  string
	count int32
	first metav1.Time
}

func newCorrelator() *correlator {
	return &correlator{
		similar: newLRU[key, *similarRecord](cacheSize),
		written: newLRU[key, writtenRecord](cacheSize),
	}
}

// correlate returns the event to write in place of ev and the key to
// remember it by once written (see remember). When repeat is true, the event
// already exists on the server under out.Name and out carries its new count,
// lastTimestamp and message: the caller patches those three. ev is not
// modified.
func (c *correlator) correlate(ev *corev1.Event) (out *corev1.Event, k key, repeat bool) {
	out, k = c.combine(ev)
	prev, ok := c.written.get(k)
	if !ok {
		return out, k, false
	}
	if out == ev {
		out = ev.DeepCopy()
	}
	out.Name = prev.name
	out.Count = prev.count + 1
	out.FirstTimestamp = prev.first
	return out, k, true
}

// combine returns ev and its own key, or, once similar events have had too
// many different messages, a combined event and the key shared by all of
// them.
func (c *correlator) combine(ev *corev1.Event) (*corev1.Event, key) {
	parts := similarParts(ev)
	skey := keyOf(parts...)
	now := ev.LastTimestamp.Time
	rec, ok := c.similar.get(skey)
	if !ok || now.Sub(rec.last) > similarWindow {
		rec = &similarRecord{}
		c.similar.put(skey, rec)
	}
	rec.last = now
	if msg := keyOf(ev.Message)[0]; len(rec.messages) < maxSimilar && !slices.Contains(rec.messages, msg) {
		rec.messages = append(rec.messages, msg)
	}
	if len(rec.messages) < maxSimilar {
		return ev, keyOf(append(parts, ev.Message)...)
	}
	combined := ev.DeepCopy()
	combined.Message = combinedPrefix + ev.Message
	return combined, skey
}

// remember records what the server now holds under k: stored is the Event
// it answered a create or a patch with.
func (c *correlator) remember(k key, stored *corev1.Event) {
	c.written.put(k, writtenRecord{name: stored.Name, count: stored.Count, first: stored.FirstTimestamp})
}

// similarParts are the fields of the events that differ at most in their
// message: the same source, object, type and reason.
func similarParts(ev *corev1.Event) []string {
	o := ev.InvolvedObject
	return []string{
		ev.Source.Component, ev.Source.Host,
		ev.ReportingController, ev.ReportingInstance,
		o.Kind, o.Namespace, o.Name, o.FieldPath, string(o.UID), o.APIVersion,
		ev.Type, ev.Reason,
	}
}
