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
// two allocations, made together. Selectors take a *packedSet: a pointer
// fits in an interface without an allocation of its own.
type packedSet []string // key, value, key, value, …

// pack returns m as a packedSet; nil when m is empty.
func pack(m map[string]string) packedSet {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	size := 0
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + len(v)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(size)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteString(m[k])
	}
	all := b.String()
	p := make(packedSet, 0, 2*len(keys))
	off := 0
	for _, k := range keys {
		v := m[k]
		p = append(p, all[off:off+len(k)], all[off+len(k):off+len(k)+len(v)])
		off += len(k) + len(v)
	}
	return p
}

// find is the index of key's value in p, or -1.
func (p packedSet) find(key string) int {
	lo, hi := 0, len(p)/2
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if p[2*mid] < key {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(p)/2 && p[2*lo] == key {
		return 2*lo + 1
	}
	return -1
}

// Has reports whether key is in p.
func (p packedSet) Has(key string) bool { return p.find(key) >= 0 }

// Lookup returns key's value in p, and whether it is there.
func (p packedSet) Lookup(key string) (string, bool) {
	if i := p.find(key); i >= 0 {
		return p[i], true
	}
	return "", false
}

// Get returns key's value in p, or "".
func (p packedSet) Get(key string) string {
	if i := p.find(key); i >= 0 {
		return p[i]
	}
	return ""
}
