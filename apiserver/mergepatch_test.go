package apiserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// mergeCases are documents and merge patches that reach every rule of
// RFC 7386 and the library's null pruning.
var mergeCases = []struct{ name, doc, patch, want string }{
	{"RFC 7386 example", `{"title":"Goodbye!","author":{"givenName":"John","familyName":"Doe"},"tags":["example","sample"],"content":"This will be unchanged"}`,
		`{"title":"Hello!","phoneNumber":"+01-555-555-5555","author":{"familyName":null},"tags":["example"]}`,
		`{"title":"Hello!","author":{"givenName":"John"},"tags":["example"],"content":"This will be unchanged","phoneNumber":"+01-555-555-5555"}`},
	{"replace a value", `{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
	{"add a member", `{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
	{"remove a member", `{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
	{"remove a missing member", `{"a":"b"}`, `{"x":null}`, `{"a":"b"}`},
	{"replace an array", `{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
	{"replace with an array", `{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
	{"merge nested objects", `{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
	{"an array replaces an object as it is", `{"a":{"b":"c"}}`, `{"a":[{"x":null}]}`, `{"a":[{"x":null}]}`},
	{"an object replaces a string without its nulls", `{"a":"s"}`, `{"a":{"b":null,"c":{"d":null,"e":1}}}`, `{"a":{"c":{"e":1}}}`},
	{"a new array loses the nulls of its objects", `{}`, `{"a":[{"b":null,"c":1},null,[{"d":null}]]}`, `{"a":[{"c":1},null,[{}]]}`},
	{"a null member takes the patch's value", `{"a":null}`, `{"a":{"b":null,"c":2}}`, `{"a":{"c":2}}`},
	{"the last of a repeated name counts", `{"a":1}`, `{"a":2,"a":{"b":3}}`, `{"a":{"b":3}}`},
	{"numbers stay as written", `{"a":1}`, `{"a":1.50,"b":12345678901234567890}`, `{"a":1.50,"b":12345678901234567890}`},
	{"escaped names", `{"a\"b":1,"é":2}`, `{"a\u0022b":3,"\u00e9":null}`, `{"a\"b":3}`},
	{"whitespace", "{\"a\":{\"b\":1}}", " {\n \"a\" : { \"c\" : [ 1 , 2 ] } }\n", `{"a":{"b":1,"c":[1,2]}}`},
	{"many members", `{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9}`,
		`{"k9":null,"k8":8,"k7":{"x":1},"k10":10,"k0":null,"k1":null,"k2":null,"k3":null,"k4":null}`, `{"k5":5,"k6":6,"k7":{"x":1},"k8":8,"k10":10}`},
	{"a top-level array, without its objects' nulls", `{"a":1}`, `[{"b":null},1]`, `[{},1]`},
	{"a top-level literal", `{"a":1}`, `"x"`, `"x"`},
	{"a top-level null", `{"a":1}`, `null`, `null`},
}

func TestMergePatch(t *testing.T) {
	for _, tc := range mergeCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mergePatch([]byte(tc.doc), []byte(tc.patch))
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(got) || !sameJSON(t, got, []byte(tc.want)) {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestMergePatchAgreesWithTheLibrary checks each case against
// evanphx/json-patch's MergePatch, which minictl used before.
func TestMergePatchAgreesWithTheLibrary(t *testing.T) {
	for _, tc := range mergeCases {
		t.Run(tc.name, func(t *testing.T) { checkMergeAgrees(t, []byte(tc.doc), []byte(tc.patch)) })
	}
}

// checkMergeAgrees fails unless mergePatch and the library's MergePatch
// give the same JSON, or both fail.
func checkMergeAgrees(t *testing.T, doc, patch []byte) {
	t.Helper()
	got, err := mergePatch(doc, patch)
	want, libErr := jsonpatch.MergePatch(doc, patch)
	if (err != nil) != (libErr != nil) {
		t.Fatalf("doc %s patch %s: error %v, the library's %v", doc, patch, err, libErr)
	}
	if err == nil && !sameJSON(t, got, want) {
		t.Fatalf("doc %s patch %s:\ngot         %s\nthe library %s", doc, patch, got, want)
	}
}

// sameJSON reports whether a and b are the same JSON value, numbers
// compared as written.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	for _, x := range []struct {
		data []byte
		v    *any
	}{{a, &va}, {b, &vb}} {
		d := json.NewDecoder(bytes.NewReader(x.data))
		d.UseNumber()
		if err := d.Decode(x.v); err != nil {
			t.Fatalf("%s: %v", x.data, err)
		}
	}
	return reflect.DeepEqual(va, vb)
}
