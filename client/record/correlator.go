package record

import (
	"strings"
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
type correlator struct {
	similar *lru[string, *similarRecord] // by similarKey
	written *lru[string, writtenRecord]  // by the key correlate returned
}

// similarRecord is what the correlator remembers of the similar events of
// one similarKey.
type similarRecord struct {
	messages map[string]bool // distinct messages, at most maxSimilar
	last     time.Time       // when the last of them happened
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
		similar: newLRU[string, *similarRecord](cacheSize),
		written: newLRU[string, writtenRecord](cacheSize),
	}
}

// correlate returns the event to write in place of ev and the key to
// remember it by once written (see remember). When repeat is true, the event
// already exists on the server under out.Name and out carries its new count,
// lastTimestamp and message: the caller patches those three. ev is not
// modified.
func (c *correlator) correlate(ev *corev1.Event) (out *corev1.Event, key string, repeat bool) {
	out, key = c.combine(ev)
	prev, ok := c.written.get(key)
	if !ok {
		return out, key, false
	}
	if out == ev {
		out = ev.DeepCopy()
	}
	out.Name = prev.name
	out.Count = prev.count + 1
	out.FirstTimestamp = prev.first
	return out, key, true
}

// combine returns ev and its own key, or, once similar events have had too
// many different messages, a combined event and the key shared by all of
// them.
func (c *correlator) combine(ev *corev1.Event) (*corev1.Event, string) {
	skey := similarKey(ev)
	now := ev.LastTimestamp.Time
	rec, ok := c.similar.get(skey)
	if !ok || now.Sub(rec.last) > similarWindow {
		rec = &similarRecord{messages: make(map[string]bool)}
		c.similar.put(skey, rec)
	}
	rec.last = now
	if len(rec.messages) < maxSimilar {
		rec.messages[ev.Message] = true
	}
	if len(rec.messages) < maxSimilar {
		return ev, skey + "\x00" + ev.Message
	}
	combined := ev.DeepCopy()
	combined.Message = combinedPrefix + ev.Message
	return combined, skey
}

// remember records what the server now holds under key: stored is the Event
// it answered a create or a patch with.
func (c *correlator) remember(key string, stored *corev1.Event) {
	c.written.put(key, writtenRecord{name: stored.Name, count: stored.Count, first: stored.FirstTimestamp})
}

// similarKey identifies the events that differ at most in their message:
// the same source, object, type and reason.
func similarKey(ev *corev1.Event) string {
	o := ev.InvolvedObject
	return strings.Join([]string{
		ev.Source.Component, ev.Source.Host,
		ev.ReportingController, ev.ReportingInstance,
		o.Kind, o.Namespace, o.Name, o.FieldPath, string(o.UID), o.APIVersion,
		ev.Type, ev.Reason,
	}, "\x00")
}
