package apiserver

import (
	"sync"
	"weak"
)

// leanJSON keeps the JSON of the lean objects (see cachedObject.object)
// most recently served as JSON, up to defaultLeanJSONBytes for the whole
// process. A lean object is held as protobuf alone, and its JSON costs a
// decoding and an encoding each time a client asks for it, several times
// the cost of copying bytes: a client listing the same pods every few
// seconds in JSON (kubectl get -o json in a loop, a script, the bench
// harness) would pay it for every pod of every list. The components read
// protobuf, and a table is built from the protobuf, so what the process
// keeps for JSON clients is bounded by this budget, not by the cluster.
var leanJSON = newJSONMemo(defaultLeanJSONBytes)

// defaultLeanJSONBytes is leanJSON's budget: the JSON of some 10,000 pods.
const defaultLeanJSONBytes = 32 << 20

// jsonMemo keeps the JSON of cached objects, first kept first dropped,
// within a budget of bytes. It refers to the objects weakly: an object the
// cache has replaced or dropped goes, with its JSON, as it would without
// the memo, and its bytes leave the budget when its entry's turn comes.
type jsonMemo struct {
	budget int64

	mu    sync.Mutex
	bytes int64       // the sizes of the entries in queue
	queue []jsonEntry // oldest first, from head
	head  int
}

type jsonEntry struct {
	obj  weak.Pointer[cachedObject]
	size int64
}

func newJSONMemo(budget int64) *jsonMemo { return &jsonMemo{budget: budget} }

// keep makes raw, o's JSON, what o.json returns until the memo drops it
// to make room for newer JSON. JSON larger than the whole budget is not
// kept.
func (m *jsonMemo) keep(o *cachedObject, raw []byte) {
	size := int64(len(raw))
	if size > m.budget {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !o.kept.CompareAndSwap(nil, &raw) {
		return // kept already, by another reader
	}
	m.queue = append(m.queue, jsonEntry{weak.Make(o), size})
	m.bytes += size
	for m.bytes > m.budget {
		e := m.queue[m.head]
		m.queue[m.head] = jsonEntry{}
		m.head++
		m.bytes -= e.size
		if old := e.obj.Value(); old != nil {
			old.kept.Store(nil)
		}
	}
	if m.head > len(m.queue)/2 {
		m.queue = append(m.queue[:0], m.queue[m.head:]...)
		m.head = 0
	}
}

// size is the bytes the memo counts as kept.
func (m *jsonMemo) size() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes
}
