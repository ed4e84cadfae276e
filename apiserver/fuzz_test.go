package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
)

// These fuzz targets feed the decoders and parsers every request body and
// query goes through. Each must not panic, must refuse what it cannot take
// with an error, and, where cheap, keeps an invariant: what decodes
// re-encodes and decodes again. `make test` runs each for a few seconds,
// `make fuzz` for longer; a crash found is kept under testdata/fuzz as a
// regression test.

const fuzzPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default","labels":{"app":"web"},"annotations":{"a":"b"}},` +
	`"spec":{"containers":[{"name":"c","image":"nginx","ports":[{"containerPort":80}],"resources":{"limits":{"cpu":"1"}}}],"tolerations":[{"key":"k","operator":"Exists"}]}}`

func fuzzServer() *Server { return &Server{maxBody: DefaultMaxRequestBodyBytes} }

func podResource(t testing.TB) *api.Resource {
	res, ok := api.Lookup("", "v1", "pods")
	if !ok {
		t.Fatal("no pods resource")
	}
	return res
}

// checkRoundTrip fails unless obj encodes to JSON that decodes again.
func checkRoundTrip(t *testing.T, res *api.Resource, obj api.Object) {
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("a decoded %s does not encode: %v", res.Kind, err)
	}
	if _, err := decodeInto(context.Background(), res, data, fieldStrict); err != nil {
		t.Fatalf("a decoded %s re-encodes to JSON that does not decode: %v\n%s", res.Kind, err, data)
	}
}

// nestingDepth is checkNesting's reference: the depth encoding/json's
// tokenizer sees in a valid document.
func nestingDepth(data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(fuzzPod))
	f.Add([]byte(`{"metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"i","resources":{"requests":{"memory":"1e3Mi"}}}]}}`))
	f.Add([]byte(`{"metadata":{"name":"x","name":"y"},"bogus":[[[[1]]]]}`))
	f.Add([]byte(`[{"a":"\"[{"}]`))
	res := podResource(f)
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, body []byte) {
		data, err := s.toJSON("application/json", body)
		if json.Valid(body) {
			if deep := nestingDepth(body) > MaxNestingDepth; deep != (err != nil) {
				t.Fatalf("depth %d, limit %d: checkNesting says %v", nestingDepth(body), MaxNestingDepth, err)
			}
		}
		if err != nil {
			return
		}
		obj, err := decodeInto(context.Background(), res, data, fieldIgnore)
		if err != nil {
			return
		}
		checkRoundTrip(t, res, obj)
	})
}

func FuzzDecodeYAML(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: nginx\n"))
	f.Add([]byte("a: &a [x, y]\nb: [*a, *a]\nmetadata: {name: x}\n"))
	f.Add([]byte("metadata:\n  name: yes\n  labels: {on: off}\n"))
	f.Add([]byte("x: [[[[[]]]]]\n---\ny: 1\n"))
	res := podResource(f)
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, body []byte) {
		data, err := s.toJSON("application/yaml", body)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("YAML turned into invalid JSON: %q", data)
		}
		obj, err := decodeInto(context.Background(), res, data, fieldIgnore)
		if err != nil {
			return
		}
		checkRoundTrip(t, res, obj)
	})
}

func FuzzDecodeProtobuf(f *testing.F) {
	res := podResource(f)
	pod, err := decodeInto(context.Background(), res, []byte(fuzzPod), fieldStrict)
	if err != nil {
		f.Fatal(err)
	}
	seed, err := api.MarshalProtobuf(pod)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte("k8s\x00\x0a\x00"))
	f.Fuzz(func(t *testing.T, body []byte) {
		obj, err := decodeProtobuf(res, body)
		if err != nil {
			return
		}
		again, err := api.MarshalProtobuf(obj)
		if err != nil {
			t.Fatalf("a decoded pod does not encode to protobuf: %v", err)
		}
		if _, err := decodeProtobuf(res, again); err != nil {
			t.Fatalf("a decoded pod re-encodes to protobuf that does not decode: %v", err)
		}
		if _, err := protobufToJSON(body); err != nil {
			t.Fatalf("a body decodeProtobuf takes does not turn into JSON: %v", err)
		}
		checkRoundTrip(t, res, obj)
	})
}

// fuzzPatch applies a patch of type pt to fuzzPod as a PATCH request would,
// and checks that what applies is a JSON document.
func fuzzPatch(t *testing.T, pt types.PatchType, patch []byte) {
	r := httptest.NewRequest(http.MethodPatch, "/api/v1/namespaces/default/pods/web", bytes.NewReader(patch))
	r.Header.Set("Content-Type", string(pt))
	apply, err := fuzzServer().readPatch(r, &corev1.Pod{})
	if err != nil {
		return
	}
	out, err := apply([]byte(fuzzPod))
	if err != nil {
		return
	}
	if !json.Valid(out) {
		t.Fatalf("a %s patch produced invalid JSON: %q", pt, out)
	}
	if obj, err := decodeInto(context.Background(), podResource(t), out, fieldIgnore); err == nil {
		checkRoundTrip(t, podResource(t), obj)
	}
}

func FuzzMergePatch(f *testing.F) {
	f.Add([]byte(`{"metadata":{"labels":{"app":null,"tier":"x"}},"spec":{"containers":null}}`))
	f.Add([]byte(`{"spec":{"containers":[{"name":"d","image":"i"}]}}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"a":{"b":{"c":{"d":{}}}}}`))
	f.Add([]byte(`{"metadata":{"labels":{"a":{"b":null}},"x":[{"y":null}]},"spec":"s"}`))
	f.Fuzz(func(t *testing.T, patch []byte) {
		fuzzPatch(t, types.MergePatchType, patch)
		if json.Valid(patch) && checkNesting("", patch) == nil {
			checkMergeAgrees(t, []byte(fuzzPod), patch)
		}
	})
}

func FuzzStrategicMergePatch(f *testing.F) {
	f.Add([]byte(`{"spec":{"containers":[{"name":"c","image":"nginx:2"},{"name":"d","image":"i"}]}}`))
	f.Add([]byte(`{"spec":{"containers":[{"name":"c","$patch":"delete"}],"$setElementOrder/containers":[{"name":"c"}]}}`))
	f.Add([]byte(`{"metadata":{"$deleteFromPrimitiveList/finalizers":["x"],"labels":{"$patch":"replace","a":"b"}}}`))
	f.Add([]byte(`{"spec":{"tolerations":[{"$retainKeys":["key"],"key":"k"}]}}`))
	f.Fuzz(func(t *testing.T, patch []byte) { fuzzPatch(t, types.StrategicMergePatchType, patch) })
}

func FuzzJSONPatch(f *testing.F) {
	f.Add([]byte(`[{"op":"add","path":"/metadata/labels/tier","value":"x"},{"op":"remove","path":"/metadata/annotations"}]`))
	f.Add([]byte(`[{"op":"copy","from":"/spec/containers","path":"/spec/containers/-"},{"op":"move","from":"/metadata/labels","path":"/metadata/annotations"}]`))
	f.Add([]byte(`[{"op":"test","path":"/metadata/name","value":"web"},{"op":"replace","path":"/spec/containers/0/image","value":"i"}]`))
	f.Add([]byte(`[{"op":"add","path":"/spec/containers/-1","value":{}}]`))
	f.Add([]byte(`[{"op":"remove","path":"/spec/containers/0/ports/-1"},{"op":"add","path":"/metadata/labels/a~1b","value":null}]`))
	f.Fuzz(func(t *testing.T, patch []byte) {
		fuzzPatch(t, types.JSONPatchType, patch)
		if json.Valid(patch) && checkNesting("", patch) == nil && libraryAgreesOn(patch) {
			checkJSONPatchAgrees(t, []byte(fuzzPod), patch)
		}
	})
}

// libraryAgreesOn reports whether the JSON patch p avoids what minictl
// does as RFC 6902 says and evanphx/json-patch does not: paths that are
// not JSON pointers, members named "" (the library takes "/" for the
// whole document), a copy or move to the whole document (it adds a member
// named ""), and tests (it compares values as written).
func libraryAgreesOn(p []byte) bool {
	var ops []map[string]any
	if json.Unmarshal(p, &ops) != nil {
		return true // both refuse it
	}
	for _, op := range ops {
		if op["op"] == "test" || (op["op"] == "copy" || op["op"] == "move") && op["path"] == "" {
			return false
		}
		for _, f := range []string{"path", "from"} {
			s, ok := op[f].(string)
			if ok && s != "" && (!strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "//")) {
				return false
			}
		}
	}
	return true
}

// fuzzListOptions parses a list request's query as serveList does.
func fuzzListOptions(t *testing.T, query string) (*listOptions, error) {
	r := httptest.NewRequest(http.MethodGet, "/api/v1/pods?"+query, nil)
	return fuzzServer().parseListOptions(r, &requestInfo{res: podResource(t), verb: "list"})
}

func FuzzLabelSelector(f *testing.F) {
	for _, s := range []string{"app=web", "app!=web,tier in (a,b)", "!gone,env notin (x)", "a==b,c", "x in ()", "a.b/c-d=e_f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := fuzzListOptions(t, "labelSelector="+url.QueryEscape(s))
		if err != nil {
			return
		}
		again, err := fuzzListOptions(t, "labelSelector="+url.QueryEscape(o.filter.label.String()))
		if err != nil {
			t.Fatalf("selector %q prints as %q, which does not parse: %v", s, o.filter.label.String(), err)
		}
		if again.filter.label.String() != o.filter.label.String() {
			t.Fatalf("selector %q prints as %q, then as %q", s, o.filter.label.String(), again.filter.label.String())
		}
	})
}

func FuzzFieldSelector(f *testing.F) {
	for _, s := range []string{"metadata.name=web", "spec.nodeName!=n1,status.phase=Running", `metadata.name=a\,b`, "metadata.namespace==default", "bogus=1"} {
		f.Add(s)
	}
	res := podResource(f)
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := parseFieldSelector(res, s)
		if err != nil {
			return
		}
		if _, err := parseFieldSelector(res, sel.String()); err != nil {
			t.Fatalf("selector %q prints as %q, which does not parse: %v", s, sel.String(), err)
		}
	})
}

func FuzzContinueToken(f *testing.F) {
	f.Add(encodeContinue(42, "/registry/pods/default/web\x00"))
	f.Add(encodeContinue(1, ""))
	f.Add(encodeContinue(continueLatest, "default/web\x00"))
	f.Add("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTF9")
	f.Add("not base64!")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := decodeContinue(s)
		if err != nil {
			return
		}
		again, err := decodeContinue(encodeContinue(tok.RV, tok.Start))
		if err != nil || again != tok {
			t.Fatalf("token %q decodes to %+v, which re-encodes to %+v, %v", s, tok, again, err)
		}
		if strings.Contains(tok.Start, "/..") {
			t.Fatalf("token %q escapes its prefix: start %q", s, tok.Start)
		}
		_, _ = fuzzListOptions(t, "limit=1&continue="+url.QueryEscape(s))
	})
}
