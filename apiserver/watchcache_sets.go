package apiserver

import (
	"slices"
	"strings"
)

// packedSet is a cached object's labels or fields as selectors read them
// (labels.Labels, fields.Fields): its keys and values, sorted by key,
// copied into one string. A map of them would be several allocations per
// object, its strings pointing into the decoded object it came from: kept
// for as long as the object stays cached, scattered among what its
// decoding freed, they leave the heap's spans part-empty. A packed set is
// one allocation, and its own index: an event has thirteen selectable
// fields, and a large cluster holds five events a pod. Selectors take a
// *packedSet: a pointer fits in an interface without an allocation of its
// own.
//
// The string is n, the number of keys, then the end of each key and each
// value (2n offsets into the text, in order: key, value, key, value, …),
// each a little-endian uint32, then the text: every key and value one
// after the other. The empty set is "".
type packedSet string

// pack returns m as a packedSet; "" when m is empty.
func pack(m map[string]string) packedSet {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	size := 4 + 8*len(m)
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + len(v)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(size)
	put := func(v int) {
		b.WriteByte(byte(v))
		b.WriteByte(byte(v >> 8))
		b.WriteByte(byte(v >> 16))
		b.WriteByte(byte(v >> 24))
	}
	put(len(keys))
	end := 0
	for _, k := range keys {
		end += len(k)
		put(end)
		end += len(m[k])
		put(end)
	}
	for _, k := range keys {
		b.WriteString(k)
		b.WriteString(m[k])
	}
	return packedSet(b.String())
}

// u32 is the little-endian uint32 at p[i:].
func (p packedSet) u32(i int) int {
	return int(uint32(p[i]) | uint32(p[i+1])<<8 | uint32(p[i+2])<<16 | uint32(p[i+3])<<24)
}

// len is the number of keys in p.
func (p packedSet) len() int {
	if p == "" {
		return 0
	}
	return p.u32(0)
}

// at is the j-th string of p: key i is at 2i, its value at 2i+1.
func (p packedSet) at(j int) string {
	return p.str(4+8*p.len(), j)
}

// str is the j-th string of p, whose text starts at text.
func (p packedSet) str(text, j int) string {
	start := 0
	if j > 0 {
		start = p.u32(4 * j)
	}
	return string(p[text+start : text+p.u32(4+4*j)])
}

// find is the index of key's value in p (see at), or -1.
func (p packedSet) find(key string) int {
	n := p.len()
	text := 4 + 8*n
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if p.str(text, 2*mid) < key {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < n && p.str(text, 2*lo) == key {
		return 2*lo + 1
	}
	return -1
}

// Has reports whether key is in p.
func (p packedSet) Has(key string) bool { return p.find(key) >= 0 }

// Lookup returns key's value in p, and whether it is there.
func (p packedSet) Lookup(key string) (string, bool) {
	if i := p.find(key); i >= 0 {
		return p.at(i), true
	}
	return "", false
}

// Get returns key's value in p, or "".
func (p packedSet) Get(key string) string {
	if i := p.find(key); i >= 0 {
		return p.at(i)
	}
	return ""
}
