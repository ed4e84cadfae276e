package crd

import (
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// testCRD builds a definition of widgets.example.com whose v1 schema is the
// YAML openAPIV3Schema given.
func testCRD(t testing.TB, schemaYAML string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var props apiextensionsv1.JSONSchemaProps
	if err := yaml.UnmarshalStrict([]byte(schemaYAML), &props); err != nil {
		t.Fatalf("schema: %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = "widgets.example.com"
	crd.Spec = apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "example.com",
		Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
		Scope: apiextensionsv1.NamespaceScoped,
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: "v1", Served: true, Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &props},
		}},
	}
	return crd
}

func testSchema(t testing.TB, schemaYAML string) *Schema {
	t.Helper()
	s, err := NewSchema(testCRD(t, schemaYAML), "v1")
	if err != nil {
		t.Fatalf("NewSchema: %v", err)
	}
	return s
}

// obj decodes a JSON object the way the API server does.
func obj(t testing.TB, j string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := utiljson.Unmarshal([]byte(j), &m); err != nil {
		t.Fatalf("object %s: %v", j, err)
	}
	return m
}

const widgetSchema = `
type: object
properties:
  spec:
    type: object
    properties:
      replicas: {type: integer, default: 1, minimum: 0, maximum: 10}
      mode: {type: string, enum: [Fast, Slow], default: Fast}
      name: {type: string, maxLength: 5, pattern: '^[a-z]+$'}
      email: {type: string, format: email}
      anything: {type: string, format: no-such-format}
      port: {x-kubernetes-int-or-string: true}
      tags:
        type: array
        maxItems: 3
        x-kubernetes-list-type: set
        items: {type: string}
      ports:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          required: [name]
          properties:
            name: {type: string}
            port: {type: integer, default: 80}
            note: {type: string, nullable: true, default: hi}
      labels:
        type: object
        additionalProperties: {type: string, default: x}
      free:
        type: object
        x-kubernetes-preserve-unknown-fields: true
        properties:
          known:
            type: object
            properties:
              a: {type: string}
      template:
        type: object
        x-kubernetes-embedded-resource: true
        properties:
          spec: {type: object, properties: {x: {type: string}}}
      optional: {type: string}
    required: [name]
  status:
    type: object
    properties:
      ready: {type: boolean}
`

func TestPrune(t *testing.T) {
	tests := []struct {
		name, in, want string
		unknown        []string
	}{
		{"unknown top-level and nested fields",
			`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"name":"a","foo":1,"ports":[{"name":"p","bar":2}]},"extra":true}`,
			`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"name":"a","ports":[{"name":"p"}]}}`,
			[]string{"extra", "spec.foo", "spec.ports[0].bar"}},
		{"preserve-unknown-fields keeps unknown, prunes inside known",
			`{"spec":{"free":{"x":{"y":1},"known":{"a":"b","c":"d"}}}}`,
			`{"spec":{"free":{"x":{"y":1},"known":{"a":"b"}}}}`,
			[]string{"spec.free.known.c"}},
		{"metadata keeps only ObjectMeta fields",
			`{"metadata":{"name":"a","labels":{"k":"v"},"bogus":1}}`,
			`{"metadata":{"name":"a","labels":{"k":"v"}}}`,
			[]string{"metadata.bogus"}},
		{"embedded resource keeps apiVersion, kind and ObjectMeta",
			`{"spec":{"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","nope":1},"spec":{"x":"y","z":1},"other":1}}}`,
			`{"spec":{"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"x":"y"}}}}`,
			[]string{"spec.template.metadata.nope", "spec.template.other", "spec.template.spec.z"}},
		{"additionalProperties values are pruned by their schema",
			`{"spec":{"labels":{"a":"b"}}}`, `{"spec":{"labels":{"a":"b"}}}`, nil},
		{"nested apiVersion is an ordinary unknown field",
			`{"spec":{"apiVersion":"x"}}`, `{"spec":{}}`, []string{"spec.apiVersion"}},
	}
	s := testSchema(t, widgetSchema)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := obj(t, tt.in)
			unknown := s.Prune(o)
			if want := obj(t, tt.want); !reflect.DeepEqual(o, want) {
				t.Errorf("pruned to %v, want %v", o, want)
			}
			if !reflect.DeepEqual(unknown, tt.unknown) {
				t.Errorf("unknown = %q, want %q", unknown, tt.unknown)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"missing fields get defaults",
			`{"spec":{}}`, `{"spec":{"replicas":1,"mode":"Fast"}}`},
		{"set fields keep their values",
			`{"spec":{"replicas":3,"mode":"Slow"}}`, `{"spec":{"replicas":3,"mode":"Slow"}}`},
		{"null of a non-nullable field is defaulted",
			`{"spec":{"replicas":null}}`, `{"spec":{"replicas":1,"mode":"Fast"}}`},
		{"null of a non-nullable field without default is dropped",
			`{"spec":{"name":null}}`, `{"spec":{"replicas":1,"mode":"Fast"}}`},
		{"null of a nullable field is kept",
			`{"spec":{"ports":[{"name":"a","note":null}]}}`,
			`{"spec":{"replicas":1,"mode":"Fast","ports":[{"name":"a","port":80,"note":null}]}}`},
		{"defaults inside array items",
			`{"spec":{"ports":[{"name":"a"},{"name":"b","port":8080}]}}`,
			`{"spec":{"replicas":1,"mode":"Fast","ports":[{"name":"a","port":80,"note":"hi"},{"name":"b","port":8080,"note":"hi"}]}}`},
		{"null map values get the additionalProperties default",
			`{"spec":{"labels":{"a":null,"b":"c"}}}`,
			`{"spec":{"replicas":1,"mode":"Fast","labels":{"a":"x","b":"c"}}}`},
		{"absent object is not created", `{}`, `{}`},
	}
	s := testSchema(t, widgetSchema)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := obj(t, tt.in)
			s.Default(o)
			if want := obj(t, tt.want); !reflect.DeepEqual(o, want) {
				t.Errorf("defaulted to %v, want %v", o, want)
			}
		})
	}
}

func TestDefaultsAreCopied(t *testing.T) {
	s := testSchema(t, `
type: object
properties:
  spec:
    type: object
    properties:
      list: {type: array, items: {type: string}, default: [a]}
`)
	a, b := obj(t, `{"spec":{}}`), obj(t, `{"spec":{}}`)
	s.Default(a)
	s.Default(b)
	a["spec"].(map[string]any)["list"].([]any)[0] = "changed"
	if got := b["spec"].(map[string]any)["list"].([]any)[0]; got != "a" {
		t.Fatalf("second object's default = %v, want a: defaults must be deep-copied", got)
	}
}

func TestDefaultIsPrunedBySchema(t *testing.T) {
	s := testSchema(t, `
type: object
properties:
  spec:
    type: object
    default: {a: x, unknown: y}
    properties:
      a: {type: string}
`)
	o := obj(t, `{}`)
	s.Default(o)
	if want := obj(t, `{"spec":{"a":"x"}}`); !reflect.DeepEqual(o, want) {
		t.Fatalf("defaulted to %v, want %v", o, want)
	}
}

const validBase = `"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"default"}`

func TestValidate(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // each error's text must contain one of these, in order
	}{
		{"valid", `{` + validBase + `,"spec":{"name":"abc","port":"http","email":"a@b.c","anything":"?","tags":["a","b"],"ports":[{"name":"a"},{"name":"b"}]}}`, nil},
		{"int-or-string takes an integer", `{` + validBase + `,"spec":{"name":"abc","port":8080}}`, nil},
		{"required", `{` + validBase + `,"spec":{}}`, []string{`spec.name: Required value`}},
		{"wrong type", `{` + validBase + `,"spec":{"name":"abc","replicas":"three"}}`,
			[]string{`spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`}},
		{"enum", `{` + validBase + `,"spec":{"name":"abc","mode":"Medium"}}`,
			[]string{`spec.mode: Unsupported value: "Medium": supported values: "Fast", "Slow"`}},
		{"maximum", `{` + validBase + `,"spec":{"name":"abc","replicas":11}}`,
			[]string{`spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10`}},
		{"maxLength", `{` + validBase + `,"spec":{"name":"abcdef"}}`,
			[]string{`spec.name: Too long: may not be more than 5 bytes`}},
		{"pattern", `{` + validBase + `,"spec":{"name":"ABC"}}`,
			[]string{`spec.name: Invalid value: "ABC": spec.name in body should match '^[a-z]+$'`}},
		{"format", `{` + validBase + `,"spec":{"name":"abc","email":"not an email"}}`,
			[]string{`spec.email: Invalid value: "not an email": spec.email in body must be of type email: "not an email"`}},
		{"maxItems", `{` + validBase + `,"spec":{"name":"abc","tags":["a","b","c","d"]}}`,
			[]string{`spec.tags: Too many: 4: must have at most 3 items`}},
		{"list-type set", `{` + validBase + `,"spec":{"name":"abc","tags":["a","a"]}}`,
			[]string{`spec.tags[1]: Duplicate value: "a"`}},
		{"list-type map", `{` + validBase + `,"spec":{"name":"abc","ports":[{"name":"a"},{"name":"a","port":1}]}}`,
			[]string{`spec.ports[1]: Duplicate value: {"name":"a"}`}},
		{"metadata name", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"Not_Valid","namespace":"default"},"spec":{"name":"abc"}}`,
			[]string{`metadata.name: Invalid value: "Not_Valid"`}},
		{"namespace required", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"name":"abc"}}`,
			[]string{`metadata.namespace: Required value`}},
		{"kind", `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"w","namespace":"default"}}`,
			[]string{`kind: Invalid value: "Gadget": must be Widget`}},
		{"embedded resource", `{` + validBase + `,"spec":{"name":"abc","template":{"metadata":{"name":"a/b"}}}}`,
			[]string{`spec.template.apiVersion: Required value`, `spec.template.kind: Required value`, `spec.template.metadata.name: Invalid value: "a/b"`}},
	}
	s := testSchema(t, widgetSchema)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := s.Validate(obj(t, tt.in), nil)
			if len(errs) != len(tt.want) {
				t.Fatalf("errors = %v, want %d: %q", errs, len(tt.want), tt.want)
			}
			got := make([]string, len(errs))
			for i, e := range errs {
				got[i] = e.Error()
			}
			for _, w := range tt.want {
				found := false
				for _, g := range got {
					found = found || strings.Contains(g, w)
				}
				if !found {
					t.Errorf("no error contains %q; got %q", w, got)
				}
			}
		})
	}
}

const updateBase = `"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"default","resourceVersion":"1"}`

func TestValidateRatchetsUnchangedValues(t *testing.T) {
	s := testSchema(t, widgetSchema)
	old := obj(t, `{`+updateBase+`,"spec":{"name":"TOOLONG","replicas":1}}`)
	unchanged := obj(t, `{`+updateBase+`,"spec":{"name":"TOOLONG","replicas":2}}`)
	if errs := s.Validate(unchanged, old); len(errs) != 0 {
		t.Errorf("update leaving an invalid value alone: %v, want no errors", errs)
	}
	changed := obj(t, `{`+updateBase+`,"spec":{"name":"STILLTOOLONG","replicas":2}}`)
	if errs := s.Validate(changed, old); len(errs) == 0 {
		t.Errorf("update changing an invalid value to another invalid one: no errors")
	}
}

func TestValidateScale(t *testing.T) {
	crd := testCRD(t, `
type: object
properties:
  spec: {type: object, properties: {replicas: {type: integer}}}
  status: {type: object, properties: {replicas: {type: integer}, selector: {type: string}}}
`)
	sel := ".status.selector"
	crd.Spec.Versions[0].Subresources = &apiextensionsv1.CustomResourceSubresources{Scale: &apiextensionsv1.CustomResourceSubresourceScale{
		SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: &sel}}
	s, err := NewSchema(crd, "v1")
	if err != nil {
		t.Fatal(err)
	}
	assertErrors(t, s.Validate(obj(t, `{`+validBase+`,"spec":{"replicas":3},"status":{"replicas":2,"selector":"a=b"}}`), nil), nil)
	assertErrors(t, s.Validate(obj(t, `{`+validBase+`,"spec":{"replicas":-1},"status":{"replicas":4294967296}}`), nil), []string{
		`.spec.replicas: Invalid value: -1: should be a non-negative integer`,
		`.status.replicas: Invalid value: 4294967296: should be less than or equal to 2147483647`,
	})
}
