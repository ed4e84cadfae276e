package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A JSON patch (RFC 6902) is applied here, to the object decoded once into
// maps and arrays, rather than by a library. What each operation costs is
// then bounded: finding, adding or removing a member is a map operation
// (evanphx/json-patch searched a list: 10,000 adds to an object of 50,000
// members took it a second); copies together add at most the body size
// limit (as in kube-apiserver since CVE-2019-1002100); and the elements an
// add or remove in an array moves are counted, at most
// MaxJSONPatchArrayMoves in all (10,000 inserts at the front of an array of
// 200,000 took the library 22 seconds).
//
// The operations mean what they meant with evanphx/json-patch, which
// minictl used before (TestJSONPatchAgreesWithTheLibrary and
// FuzzJSONPatch): an array index may be negative, counting from the end,
// and a test of a missing member against null passes. Where the library
// strays from RFC 6902, minictl does not: a path must be a JSON pointer,
// and a test compares strings and numbers by value, not as written.

// jsonPatchOp is one operation of a JSON patch; value is nil when the
// operation has none.
type jsonPatchOp struct {
	op, path, from string
	value          json.RawMessage
}

// decodeJSONPatch reads a JSON patch of at most MaxJSONPatchOperations
// operations, as kube-apiserver does: more is a 413 RequestEntityTooLarge.
// A patch that is not a list of operations, each with what RFC 6902 says
// it needs (a path; a value for add, replace and test; a from for move and
// copy), is a 400 BadRequest.
func decodeJSONPatch(body []byte) ([]jsonPatchOp, error) {
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the JSON patch is not valid: %v", err))
	}
	if len(raw) > MaxJSONPatchOperations {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
			"The allowed maximum operations in a JSON patch is %d, got %d", MaxJSONPatchOperations, len(raw)))
	}
	ops := make([]jsonPatchOp, len(raw))
	for i, m := range raw {
		if err := readJSONPatchOp(&ops[i], m); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the JSON patch is not valid: operation %d: %v", i, err))
		}
	}
	return ops, nil
}

func readJSONPatchOp(o *jsonPatchOp, m map[string]json.RawMessage) error {
	str := func(name string, to *string) error {
		v := m[name]
		if v == nil || string(v) == "null" {
			return fmt.Errorf("%s is missing", name)
		}
		if err := json.Unmarshal(v, to); err != nil {
			return fmt.Errorf("%s is not a string", name)
		}
		return nil
	}
	if err := str("op", &o.op); err != nil {
		return err
	}
	if err := str("path", &o.path); err != nil {
		return err
	}
	o.value = m["value"]
	switch o.op {
	case "add", "replace", "test":
		if o.value == nil {
			return fmt.Errorf("%s has no value", o.op)
		}
	case "move", "copy":
		return str("from", &o.from)
	case "remove":
	default:
		return fmt.Errorf("unknown operation %q: want add, remove, replace, move, copy or test", o.op)
	}
	return nil
}

// applyJSONPatch applies ops to the JSON value orig. maxBody bounds what
// the copies add (a 422 Invalid naming it beyond); an operation that does
// not apply is an error for patchObject to answer.
func applyJSONPatch(ops []jsonPatchOp, orig []byte, maxBody int64) ([]byte, error) {
	doc, err := decodeTree(orig)
	if err != nil {
		return nil, fmt.Errorf("the object is not valid JSON: %w", err)
	}
	a := &jsonPatcher{doc: doc, copyLimit: maxBody, moveLimit: MaxJSONPatchArrayMoves}
	for i := range ops {
		if err := a.apply(&ops[i]); err != nil {
			var se *apierrors.StatusError
			if errors.As(err, &se) {
				return nil, err
			}
			return nil, fmt.Errorf("operation %d (%s %s): %w", i, ops[i].op, ops[i].path, err)
		}
	}
	return appendTree(nil, a.doc), nil
}

// jsonPatcher is a document being patched, and what its operations have
// cost so far.
type jsonPatcher struct {
	doc       any
	copied    int64 // bytes the copies added
	copyLimit int64
	moved     int64 // array elements adds and removes moved
	moveLimit int64
}

func (a *jsonPatcher) apply(o *jsonPatchOp) error {
	switch o.op {
	case "add", "replace", "test":
		v, err := decodeTree(o.value)
		if err != nil {
			return fmt.Errorf("the value is not valid JSON: %w", err)
		}
		switch o.op {
		case "add":
			return a.add(o.path, v)
		case "replace":
			return a.replace(o.path, v)
		}
		return a.test(o.path, v)
	case "remove":
		_, err := a.remove(o.path)
		return err
	case "move":
		if o.from == "" {
			return errors.New("the whole document cannot be moved")
		}
		v, err := a.remove(o.from)
		if err != nil {
			return fmt.Errorf("from: %w", err)
		}
		return a.add(o.path, v)
	}
	v, err := a.get(o.from) // copy
	if err != nil {
		return fmt.Errorf("from: %w", err)
	}
	if v, err = a.copyOf(v); err != nil {
		return err
	}
	return a.add(o.path, v)
}

// errMissing is an operation on a path the document does not have.
var errMissing = errors.New("the document has no such path")

// parent finds the container of the value path points to, and that
// value's name or index in it.
func (a *jsonPatcher) parent(path string) (any, string, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, "", fmt.Errorf("%q is not a JSON pointer: it must be empty or start with /", path)
	}
	tokens := strings.Split(path[1:], "/")
	for i, t := range tokens {
		tokens[i] = unescapePointerToken(t)
	}
	cur := a.doc
	for _, t := range tokens[:len(tokens)-1] {
		next, err := child(cur, t)
		if err != nil {
			return nil, "", err
		}
		cur = next
	}
	return cur, tokens[len(tokens)-1], nil
}

func unescapePointerToken(t string) string {
	if !strings.Contains(t, "~") {
		return t
	}
	return strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
}

// child is the member or element t of the container c.
func child(c any, t string) (any, error) {
	switch c := c.(type) {
	case map[string]any:
		v, ok := c[t]
		if !ok {
			return nil, errMissing
		}
		return v, nil
	case *jsonArray:
		i, err := c.index(t, len(c.elems))
		if err != nil {
			return nil, err
		}
		return c.elems[i], nil
	}
	return nil, errMissing
}

func (a *jsonPatcher) get(path string) (any, error) {
	if path == "" {
		return a.doc, nil
	}
	c, t, err := a.parent(path)
	if err != nil {
		return nil, err
	}
	return child(c, t)
}

func (a *jsonPatcher) add(path string, v any) error {
	if path == "" {
		a.doc = v
		return nil
	}
	c, t, err := a.parent(path)
	if err != nil {
		return err
	}
	switch c := c.(type) {
	case map[string]any:
		c[t] = v
		return nil
	case *jsonArray:
		i := len(c.elems)
		if t != "-" {
			if i, err = c.index(t, len(c.elems)+1); err != nil {
				return err
			}
		}
		if err := a.move(len(c.elems) - i); err != nil {
			return err
		}
		c.elems = slices.Insert(c.elems, i, v)
		return nil
	}
	return errMissing
}

func (a *jsonPatcher) remove(path string) (any, error) {
	if path == "" {
		return nil, errors.New("the whole document cannot be removed")
	}
	c, t, err := a.parent(path)
	if err != nil {
		return nil, err
	}
	switch c := c.(type) {
	case map[string]any:
		v, ok := c[t]
		if !ok {
			return nil, errMissing
		}
		delete(c, t)
		return v, nil
	case *jsonArray:
		i, err := c.index(t, len(c.elems))
		if err != nil {
			return nil, err
		}
		if err := a.move(len(c.elems) - i - 1); err != nil {
			return nil, err
		}
		v := c.elems[i]
		c.elems = slices.Delete(c.elems, i, i+1)
		return v, nil
	}
	return nil, errMissing
}

func (a *jsonPatcher) replace(path string, v any) error {
	if path == "" {
		switch v.(type) {
		case map[string]any, *jsonArray:
			a.doc = v
			return nil
		}
		return errors.New("the whole document can only be replaced by an object or an array")
	}
	c, t, err := a.parent(path)
	if err != nil {
		return err
	}
	switch c := c.(type) {
	case map[string]any:
		if _, ok := c[t]; !ok {
			return errMissing
		}
		c[t] = v
		return nil
	case *jsonArray:
		i, err := c.index(t, len(c.elems))
		if err != nil {
			return err
		}
		c.elems[i] = v
		return nil
	}
	return errMissing
}

func (a *jsonPatcher) test(path string, want any) error {
	got, err := a.get(path)
	if errors.Is(err, errMissing) && want == nil && path != "" {
		if c, _, perr := a.parent(path); perr == nil {
			if _, ok := c.(map[string]any); ok {
				return nil // a missing member is null
			}
		}
	}
	if err != nil {
		return err
	}
	if !equalTree(got, want) {
		return fmt.Errorf("testing value %s failed", path)
	}
	return nil
}

// move counts n array elements moved by an add or a remove.
func (a *jsonPatcher) move(n int) error {
	a.moved += int64(n)
	if a.moved > a.moveLimit {
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure,
			Code:   http.StatusUnprocessableEntity,
			Reason: metav1.StatusReasonInvalid,
			Message: fmt.Sprintf("the JSON patch's adds and removes move more than %d array elements "+
				"(each moves the elements after it), the most minictl allows one patch", a.moveLimit),
		}}
	}
	return nil
}

// copyOf is a deep copy of v, counted against the copy limit.
func (a *jsonPatcher) copyOf(v any) (any, error) {
	budget := a.copyLimit - a.copied
	size, ok := treeSize(v, budget)
	a.copied += size
	if !ok {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure,
			Code:   http.StatusUnprocessableEntity,
			Reason: metav1.StatusReasonInvalid,
			Message: fmt.Sprintf("the JSON patch's copy operations add more than %d bytes, the request size limit",
				a.copyLimit),
		}}
	}
	return copyTree(v), nil
}

// jsonArray is a JSON array in a document being patched, held by pointer
// so that adds and removes change it where it is.
type jsonArray struct {
	elems []any
}

// index reads t as an index below n; a negative one counts from n.
func (arr *jsonArray) index(t string, n int) (int, error) {
	i, err := strconv.Atoi(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not an array index", t)
	}
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return 0, fmt.Errorf("index %s is out of range for an array of %d", t, len(arr.elems))
	}
	return i, nil
}

// decodeTree decodes the JSON value data into maps, *jsonArrays, strings,
// json.Numbers (as written), bools and nils.
func decodeTree(data []byte) (any, error) {
	d := newValueDecoder(data)
	defer decoders.Put(d)
	v, err := readTree(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.ReadToken(); err == nil {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

func readTree(d *jsontext.Decoder) (any, error) {
	tok, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '{':
		m := map[string]any{}
		for d.PeekKind() != '}' {
			name, err := d.ReadToken()
			if err != nil {
				return nil, err
			}
			k := name.String()
			if m[k], err = readTree(d); err != nil {
				return nil, err
			}
		}
		_, err := d.ReadToken()
		return m, err
	case '[':
		arr := &jsonArray{}
		for d.PeekKind() != ']' {
			v, err := readTree(d)
			if err != nil {
				return nil, err
			}
			arr.elems = append(arr.elems, v)
		}
		_, err := d.ReadToken()
		return arr, err
	case '"':
		return tok.String(), nil
	case '0':
		return json.Number(tok.String()), nil
	case 't', 'f':
		return tok.Bool(), nil
	}
	return nil, nil
}

// appendTree appends the JSON of v to dst, the members of objects in the
// order of their names.
func appendTree(dst []byte, v any) []byte {
	switch v := v.(type) {
	case map[string]any:
		names := make([]string, 0, len(v))
		for k := range v {
			names = append(names, k)
		}
		slices.Sort(names)
		dst = append(dst, '{')
		for i, k := range names {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst, _ = jsontext.AppendQuote(dst, k)
			dst = append(dst, ':')
			dst = appendTree(dst, v[k])
		}
		return append(dst, '}')
	case *jsonArray:
		dst = append(dst, '[')
		for i, e := range v.elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendTree(dst, e)
		}
		return append(dst, ']')
	case string:
		dst, _ = jsontext.AppendQuote(dst, v)
		return dst
	case json.Number:
		return append(dst, v...)
	case bool:
		return strconv.AppendBool(dst, v)
	}
	return append(dst, "null"...)
}

// treeSize is the size of v's JSON, or false as soon as it passes limit.
func treeSize(v any, limit int64) (int64, bool) {
	var n int64
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			n += 2 + int64(len(v))
			for k, e := range v {
				n += int64(len(k)) + 3
				if n > limit || !walk(e) {
					return false
				}
			}
		case *jsonArray:
			n += 2 + int64(len(v.elems))
			for _, e := range v.elems {
				if n > limit || !walk(e) {
					return false
				}
			}
		case string:
			n += int64(len(v)) + 2
		case json.Number:
			n += int64(len(v))
		case bool:
			n += 5
		default:
			n += 4
		}
		return n <= limit
	}
	ok := walk(v)
	return n, ok
}

// copyTree is a deep copy of v.
func copyTree(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = copyTree(e)
		}
		return m
	case *jsonArray:
		arr := &jsonArray{elems: make([]any, len(v.elems))}
		for i, e := range v.elems {
			arr.elems[i] = copyTree(e)
		}
		return arr
	}
	return v
}

// equalTree reports whether a and b are the same JSON value; numbers are
// compared by value.
func equalTree(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, e := range b {
			f, ok := a[k]
			if !ok || !equalTree(f, e) {
				return false
			}
		}
		return true
	case *jsonArray:
		b, ok := b.(*jsonArray)
		if !ok || len(a.elems) != len(b.elems) {
			return false
		}
		for i := range a.elems {
			if !equalTree(a.elems[i], b.elems[i]) {
				return false
			}
		}
		return true
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		if a == b {
			return true
		}
		x, errA := a.Float64()
		y, errB := b.Float64()
		return errA == nil && errB == nil && x == y
	}
	return a == b
}
