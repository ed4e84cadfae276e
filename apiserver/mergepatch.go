package apiserver

import (
	"bytes"
	"errors"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// A JSON merge patch (RFC 7386) is applied here, on the patch's and the
// object's bytes, rather than by a library. Its cost is linear: each member
// of each object is found through a map, and only where both the object and
// the patch hold an object under the same name is that pair read again, at
// most MaxNestingDepth times. (evanphx/json-patch looks each name up in a
// list: a flat patch of 100,000 names took it half a minute.)
//
// What it computes is the JSON value evanphx/json-patch's MergePatch, which
// minictl used before, computes (TestMergePatchAgreesWithTheLibrary and
// FuzzMergePatch), though names may come in another order and values keep
// the patch's spacing: a member whose
// patch value is null is removed; a name the object has as an object is
// merged with the patch's object; anything else takes the patch's value,
// with the null members of its objects (in arrays too) dropped when it
// replaces what was not an object. Members keep their place; new ones
// follow in the patch's order.

// errMergePatchNotJSON refuses a merge patch that is not JSON.
var errMergePatchNotJSON = errors.New("the merge patch is not valid JSON")

// mergePatch applies patch, a JSON merge patch, to doc, a JSON object.
func mergePatch(doc, patch []byte) ([]byte, error) {
	doc, patch = bytes.TrimSpace(doc), bytes.TrimSpace(patch)
	out := make([]byte, 0, len(doc)+len(patch))
	var err error
	switch jsonKind(patch) {
	case '{':
		out, err = appendMerged(out, doc, patch)
	case '[':
		out, err = appendPruned(out, patch)
	default:
		if !jsontext.Value(patch).IsValid(jsontext.AllowInvalidUTF8(true)) {
			return nil, errMergePatchNotJSON
		}
		out = append(out, patch...)
	}
	if err != nil {
		return nil, errMergePatchNotJSON
	}
	return out, nil
}

// jsonKind is the kind of the JSON value v: '{', '[', '"', 'n' and so on.
func jsonKind(v []byte) byte {
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

// appendMerged appends cur merged with patch to dst.
func appendMerged(dst, cur, patch []byte) ([]byte, error) {
	if jsonKind(cur) != '{' {
		return appendPruned(dst, patch)
	}
	if jsonKind(patch) != '{' {
		return append(dst, patch...), nil
	}
	curMembers, err := readMembers(cur)
	if err != nil {
		return nil, err
	}
	patchMembers, err := readMembers(patch)
	if err != nil {
		return nil, err
	}
	byName := indexMembers(patchMembers)
	used := make([]bool, len(patchMembers))
	dst = append(dst, '{')
	n := 0
	for _, m := range curMembers {
		i, ok := byName.lookup(patchMembers, m.name)
		if !ok {
			dst = appendMember(dst, &n, m.name)
			dst = append(dst, m.value...)
			continue
		}
		used[i] = true
		p := patchMembers[i]
		switch {
		case jsonKind(p.value) == 'n': // null: remove
			continue
		case jsonKind(m.value) == 'n':
			dst = appendMember(dst, &n, m.name)
			dst, err = appendPruned(dst, p.value)
		default:
			dst = appendMember(dst, &n, m.name)
			dst, err = appendMerged(dst, m.value, p.value)
		}
		if err != nil {
			return nil, err
		}
	}
	for i, p := range patchMembers {
		if used[i] || jsonKind(p.value) == 'n' {
			continue
		}
		if j, _ := byName.lookup(patchMembers, p.name); j != i {
			continue // a later member of the same name wins
		}
		dst = appendMember(dst, &n, p.name)
		if dst, err = appendPruned(dst, p.value); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendPruned appends v to dst without the null members of its objects,
// at any depth, arrays included.
func appendPruned(dst, v []byte) ([]byte, error) {
	if k := jsonKind(v); (k != '{' && k != '[') || !bytes.Contains(v, []byte("null")) {
		return append(dst, v...), nil
	}
	if jsonKind(v) == '[' {
		elems, err := readElements(v)
		if err != nil {
			return nil, err
		}
		dst = append(dst, '[')
		for i, e := range elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendPruned(dst, e); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	}
	ms, err := readMembers(v)
	if err != nil {
		return nil, err
	}
	byName := indexMembers(ms)
	dst = append(dst, '{')
	n := 0
	for i, m := range ms {
		if j, _ := byName.lookup(ms, m.name); j != i || jsonKind(m.value) == 'n' {
			continue
		}
		dst = appendMember(dst, &n, m.name)
		if dst, err = appendPruned(dst, m.value); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendMember appends the name of the n-th member of an object, with the
// comma before it if it is not the first, and counts it.
func appendMember(dst []byte, n *int, name string) []byte {
	if *n > 0 {
		dst = append(dst, ',')
	}
	*n++
	dst, _ = jsontext.AppendQuote(dst, name) // invalid UTF-8 is replaced, as encoding/json does
	return append(dst, ':')
}

// member is one name and value of a JSON object; value is a slice of the
// object's bytes.
type member struct {
	name  string
	value []byte
}

// readMembers reads the members of the JSON object obj, in order.
func readMembers(obj []byte) ([]member, error) {
	var ms []member
	d := newValueDecoder(obj)
	defer decoders.Put(d)
	if _, err := d.ReadToken(); err != nil {
		return nil, err
	}
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String()
		v, err := readValue(d, obj)
		if err != nil {
			return nil, err
		}
		ms = append(ms, member{name: name, value: v})
	}
	return ms, nil
}

// readElements reads the elements of the JSON array arr, in order.
func readElements(arr []byte) ([][]byte, error) {
	var es [][]byte
	d := newValueDecoder(arr)
	defer decoders.Put(d)
	if _, err := d.ReadToken(); err != nil {
		return nil, err
	}
	for d.PeekKind() != ']' {
		v, err := readValue(d, arr)
		if err != nil {
			return nil, err
		}
		es = append(es, v)
	}
	return es, nil
}

// newValueDecoder reads the JSON value v in place (a bytes.Buffer is not
// copied) and as leniently as encoding/json: a name may repeat (the last
// one counts) and strings may hold invalid UTF-8. Put it back in decoders
// when done.
func newValueDecoder(v []byte) *jsontext.Decoder {
	d := decoders.Get().(*jsontext.Decoder)
	d.Reset(bytes.NewBuffer(v), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	return d
}

// decoders keeps jsontext.Decoders for reuse: merging an array of small
// objects reads each with one.
var decoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }}

// readValue reads the next value of d, a decoder of in, and returns it as
// a slice of in.
func readValue(d *jsontext.Decoder, in []byte) ([]byte, error) {
	v, err := d.ReadValue()
	if err != nil {
		return nil, err
	}
	end := int(d.InputOffset())
	return in[end-len(v) : end : end], nil
}

// memberIndex finds an object's members by name: the last of that name.
// Small objects are searched; larger ones get a map.
type memberIndex map[string]int

func indexMembers(ms []member) memberIndex {
	if len(ms) <= 8 {
		return nil
	}
	idx := make(memberIndex, len(ms))
	for i, m := range ms {
		idx[m.name] = i
	}
	return idx
}

func (idx memberIndex) lookup(ms []member, name string) (int, bool) {
	if idx != nil {
		i, ok := idx[name]
		return i, ok
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].name == name {
			return i, true
		}
	}
	return 0, false
}
