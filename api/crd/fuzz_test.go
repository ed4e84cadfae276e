package crd

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// FuzzSchema feeds arbitrary JSON objects through Prune, Default and
// Validate (create and update) of a schema using every feature: none may
// panic, and pruning twice drops nothing more.
func FuzzSchema(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"d"},"spec":{"name":"a","replicas":2,"minReplicas":1,"tags":["a"]}}`,
		`{"spec":{"ports":[{"name":"a","port":1},{"name":"a"}],"tags":[1,{"a":[]},null]}}`,
		`{"metadata":{"name":5,"labels":[1]},"spec":null,"status":{"ready":"yes"}}`,
		`{"spec":{"free":{"known":{"a":[[[[]]]]}},"template":{"metadata":{"name":"../x"}},"labels":{"a":null}}}`,
		`{"spec":{"replicas":1e308,"url":"https://x","host":"\u0000","mode":"Off","minReplicas":-1}}`,
	} {
		f.Add([]byte(seed))
	}
	s := testSchema(f, ruleSchema+`
      template:
        type: object
        x-kubernetes-embedded-resource: true
        x-kubernetes-preserve-unknown-fields: true
      free:
        type: object
        x-kubernetes-preserve-unknown-fields: true
        properties:
          known: {type: object, properties: {a: {type: array, items: {type: array, items: {type: string}}}}}
      labels:
        type: object
        additionalProperties: {type: string, default: x}
`)
	f.Fuzz(func(t *testing.T, data []byte) {
		var o map[string]any
		if err := utiljson.Unmarshal(data, &o); err != nil || o == nil {
			return
		}
		old := runtime.DeepCopyJSON(o)
		s.Prune(o)
		if again := s.Prune(o); len(again) != 0 {
			t.Fatalf("second prune dropped %q", again)
		}
		s.Default(o)
		s.Validate(o, nil)
		s.Validate(o, old)
	})
}

// BenchmarkValidate measures Validate of a typical custom object on update:
// metadata, the OpenAPI schema, list types and the CEL rules.
func BenchmarkValidate(b *testing.B) {
	s := testSchema(b, ruleSchema)
	o := obj(b, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"default","resourceVersion":"2","labels":{"app":"web"}},
		"spec":{"name":"web","replicas":3,"minReplicas":1,"mode":"On","mutable":true,"tags":["a","b","c"],
		"ports":[{"name":"http","port":80},{"name":"https","port":443}],"url":"https://example.com/x","host":"web1"}}`)
	old := runtime.DeepCopyJSON(o)
	old["spec"].(map[string]any)["replicas"] = int64(2)
	b.ReportAllocs()
	for b.Loop() {
		if errs := s.Validate(o, old); len(errs) != 0 {
			b.Fatal(errs)
		}
	}
}
