package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

const jsonPatchDoc = `{"a":{"b":"c","n":1,"list":["x","y","z"]},"s":"a<b","empty":{},"nil":null}`

// jsonPatchCases reach every operation and its edges; want "" means the
// patch does not apply, and "400" that it is refused as malformed.
var jsonPatchCases = []struct{ name, patch, want string }{
	{"add a member", `[{"op":"add","path":"/a/d","value":1}]`,
		`{"a":{"b":"c","d":1,"n":1,"list":["x","y","z"]},"s":"a<b","empty":{},"nil":null}`},
	{"add replaces a member", `[{"op":"add","path":"/a/b","value":{"x":[1]}}]`,
		`{"a":{"b":{"x":[1]},"n":1,"list":["x","y","z"]},"s":"a<b","empty":{},"nil":null}`},
	{"add to an array", `[{"op":"add","path":"/a/list/1","value":"new"},{"op":"add","path":"/a/list/-","value":"end"},{"op":"add","path":"/a/list/0","value":"first"}]`,
		`{"a":{"b":"c","n":1,"list":["first","x","new","y","z","end"]},"s":"a<b","empty":{},"nil":null}`},
	{"add at a negative index", `[{"op":"add","path":"/a/list/-1","value":"last"},{"op":"add","path":"/a/list/-5","value":"first"}]`,
		`{"a":{"b":"c","n":1,"list":["first","x","y","z","last"]},"s":"a<b","empty":{},"nil":null}`},
	{"add without a value", `[{"op":"add","path":"/a/b"}]`, "400"},
	{"add of null", `[{"op":"add","path":"/a/b","value":null}]`,
		`{"a":{"b":null,"n":1,"list":["x","y","z"]},"s":"a<b","empty":{},"nil":null}`},
	{"add the whole document", `[{"op":"add","path":"","value":{"x":1}}]`, `{"x":1}`},
	{"add past the end of an array", `[{"op":"add","path":"/a/list/4","value":1}]`, ""},
	{"add below a missing member", `[{"op":"add","path":"/x/y","value":1}]`, ""},
	{"add below a string", `[{"op":"add","path":"/s/y","value":1}]`, ""},
	{"add below null", `[{"op":"add","path":"/nil/y","value":1}]`, ""},
	{"add with escaped names", `[{"op":"add","path":"/a~1b~0c","value":1},{"op":"add","path":"/empty/","value":2}]`,
		`{"a":{"b":"c","n":1,"list":["x","y","z"]},"a/b~c":1,"s":"a<b","empty":{"":2},"nil":null}`},
	{"remove", `[{"op":"remove","path":"/a/b"},{"op":"remove","path":"/a/list/0"},{"op":"remove","path":"/a/list/-1"}]`,
		`{"a":{"n":1,"list":["y"]},"s":"a<b","empty":{},"nil":null}`},
	{"remove a missing member", `[{"op":"remove","path":"/a/x"}]`, ""},
	{"remove past the end", `[{"op":"remove","path":"/a/list/3"}]`, ""},
	{"remove the whole document", `[{"op":"remove","path":""}]`, ""},
	{"replace", `[{"op":"replace","path":"/a/n","value":2},{"op":"replace","path":"/a/list/-1","value":"Z"}]`,
		`{"a":{"b":"c","n":2,"list":["x","y","Z"]},"s":"a<b","empty":{},"nil":null}`},
	{"replace a missing member", `[{"op":"replace","path":"/a/x","value":2}]`, ""},
	{"replace the whole document", `[{"op":"replace","path":"","value":[1]}]`, `[1]`},
	{"replace the whole document with a string", `[{"op":"replace","path":"","value":"x"}]`, ""},
	{"move", `[{"op":"move","from":"/a/b","path":"/moved"},{"op":"move","from":"/a/list/0","path":"/a/list/-"}]`,
		`{"a":{"n":1,"list":["y","z","x"]},"moved":"c","s":"a<b","empty":{},"nil":null}`},
	{"move into itself", `[{"op":"move","from":"/a","path":"/a/inner"}]`, ""},
	{"move the whole document", `[{"op":"move","from":"","path":"/x"}]`, ""},
	{"move a missing member", `[{"op":"move","from":"/x","path":"/y"}]`, ""},
	{"copy", `[{"op":"copy","from":"/a/list","path":"/a/list/-"},{"op":"copy","from":"/a/b","path":"/empty/b"}]`,
		`{"a":{"b":"c","n":1,"list":["x","y","z",["x","y","z"]]},"s":"a<b","empty":{"b":"c"},"nil":null}`},
	{"copy is deep", `[{"op":"copy","from":"/a","path":"/c"},{"op":"add","path":"/c/list/0","value":"w"}]`,
		`{"a":{"b":"c","n":1,"list":["x","y","z"]},"c":{"b":"c","n":1,"list":["w","x","y","z"]},"s":"a<b","empty":{},"nil":null}`},
	{"copy a missing member", `[{"op":"copy","from":"/x","path":"/y"}]`, ""},
	{"test", `[{"op":"test","path":"/a","value":{"list":["x","y","z"],"n":1,"b":"c"}},{"op":"test","path":"/a/list/-1","value":"z"}]`, jsonPatchDoc},
	{"test a string the object holds escaped", `[{"op":"test","path":"/s","value":"a<b"}]`, jsonPatchDoc},
	{"test numbers by value", `[{"op":"test","path":"/a/n","value":1.0}]`, jsonPatchDoc},
	{"test a missing member against null", `[{"op":"test","path":"/a/x","value":null}]`, jsonPatchDoc},
	{"test the whole document", `[{"op":"test","path":"","value":` + jsonPatchDoc + `}]`, jsonPatchDoc},
	{"test that fails", `[{"op":"test","path":"/a/b","value":"d"}]`, ""},
	{"test of a missing member", `[{"op":"test","path":"/a/x","value":"d"}]`, ""},
	{"test past the end of an array", `[{"op":"test","path":"/a/list/3","value":null}]`, ""},
	{"an unknown operation", `[{"op":"frobnicate","path":"/a"}]`, "400"},
	{"an operation without a path", `[{"op":"add","value":1}]`, "400"},
	{"an operation with a null path", `[{"op":"remove","path":null}]`, "400"},
	{"a move without a from", `[{"op":"move","path":"/a"}]`, "400"},
	{"a copy from a number", `[{"op":"copy","path":"/a","from":1}]`, "400"},
	{"a test without a value", `[{"op":"test","path":"/a"}]`, "400"},
	{"not a list", `{"op":"test","path":"/a","value":1}`, "400"},
	{"a path that is not a pointer", `[{"op":"add","path":"a/b","value":1}]`, ""},
	{"an index that is not a number", `[{"op":"add","path":"/a/list/x","value":1}]`, ""},
	{"no operations", `[]`, jsonPatchDoc},
}

func TestJSONPatch(t *testing.T) {
	for _, tc := range jsonPatchCases {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := decodeJSONPatch([]byte(tc.patch))
			if tc.want == "400" {
				if !apierrors.IsBadRequest(err) {
					t.Fatalf("decoding: %v, want a 400 BadRequest", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := applyJSONPatch(ops, []byte(jsonPatchDoc), DefaultMaxRequestBodyBytes)
			switch {
			case tc.want == "" && err == nil:
				t.Fatalf("applied, giving %s; want an error", got)
			case tc.want == "":
				var se *apierrors.StatusError
				if errors.As(err, &se) {
					t.Fatalf("error %v is a Status; want one for patchFailed to answer", err)
				}
			case err != nil:
				t.Fatal(err)
			case !sameJSON(t, got, []byte(tc.want)):
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestJSONPatchAgreesWithTheLibrary checks the cases against
// evanphx/json-patch, which minictl used before, except where minictl
// follows RFC 6902 and the library does not: a path must be a JSON
// pointer, and test compares strings and numbers by value, not as written.
func TestJSONPatchAgreesWithTheLibrary(t *testing.T) {
	differs := map[string]bool{
		"a path that is not a pointer":           true,
		"test a string the object holds escaped": true,
		"test numbers by value":                  true,
	}
	doc, err := json.Marshal(json.RawMessage(jsonPatchDoc)) // escaped as minictl's objects are
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range jsonPatchCases {
		if differs[tc.name] {
			continue
		}
		t.Run(tc.name, func(t *testing.T) { checkJSONPatchAgrees(t, doc, []byte(tc.patch)) })
	}
}

// checkJSONPatchAgrees fails unless applyJSONPatch and the library give
// the same JSON, or both fail. Patches the library panics on, or answers
// with what is not JSON (adding null as the whole document), are skipped.
func checkJSONPatchAgrees(t *testing.T, doc, patch []byte) {
	t.Helper()
	want, libErr, panicked := libraryJSONPatch(doc, patch)
	if panicked || libErr == nil && !json.Valid(want) {
		return
	}
	ops, err := decodeJSONPatch(patch)
	if err == nil {
		var got []byte
		got, err = applyJSONPatch(ops, doc, DefaultMaxRequestBodyBytes)
		switch {
		case err == nil && libErr != nil && jsonKind(got) != '{':
			return // no object, which the PATCH refuses; the library fails to encode it
		case err == nil && libErr == nil && !sameJSON(t, got, want):
			t.Fatalf("doc %s patch %s:\ngot         %s\nthe library %s", doc, patch, got, want)
		}
	}
	if (err != nil) != (libErr != nil) {
		t.Fatalf("doc %s patch %s: error %v, the library's %v (it gave %s)", doc, patch, err, libErr, want)
	}
}

func libraryJSONPatch(doc, patch []byte) (out []byte, err error, panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, err, false
	}
	o := jsonpatch.NewApplyOptions()
	o.AccumulatedCopySizeLimit = DefaultMaxRequestBodyBytes
	out, err = p.ApplyWithOptions(doc, o)
	return out, err, false
}

// TestJSONPatchLimits checks the bounds on what a JSON patch may make the
// server do: copies add at most the body size limit, and adds and removes
// move at most MaxJSONPatchArrayMoves array elements. Each is a 422 naming
// its limit, before the work is done.
func TestJSONPatchLimits(t *testing.T) {
	many := make([]string, 100_000)
	for i := range many {
		many[i] = "0"
	}
	doc := []byte(`{"list":[` + strings.Join(many, ",") + `],"big":"` + strings.Repeat("x", 1<<20) + `"}`)
	for _, tc := range []struct {
		name, patch, names string
	}{
		{"copies past the body size limit", `[` + strings.Repeat(`{"op":"copy","from":"/big","path":"/c"},`, 3) + `{"op":"copy","from":"/big","path":"/c"}]`,
			fmt.Sprint(DefaultMaxRequestBodyBytes)},
		{"inserts at the front of a long array", `[` + strings.Repeat(`{"op":"add","path":"/list/0","value":1},`, 1001) + `{"op":"add","path":"/list/0","value":1}]`,
			fmt.Sprint(1000 * 100_000)},
		{"removes from the front of a long array", `[` + strings.Repeat(`{"op":"remove","path":"/list/0"},`, 1010) + `{"op":"remove","path":"/list/0"}]`,
			fmt.Sprint(1000 * 100_000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := decodeJSONPatch([]byte(tc.patch))
			if err != nil {
				t.Fatal(err)
			}
			a := &jsonPatcher{copyLimit: DefaultMaxRequestBodyBytes, moveLimit: 1000 * 100_000}
			if a.doc, err = decodeTree(doc); err != nil {
				t.Fatal(err)
			}
			var applyErr error
			for i := range ops {
				if applyErr = a.apply(&ops[i]); applyErr != nil {
					break
				}
			}
			var se *apierrors.StatusError
			if !errors.As(applyErr, &se) || se.ErrStatus.Code != 422 || !strings.Contains(se.ErrStatus.Message, tc.names) {
				t.Fatalf("error %v, want a 422 naming %s", applyErr, tc.names)
			}
		})
	}
}
