package crd

import (
	"strings"
	"testing"
)

const ruleSchema = `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: self.minReplicas <= self.replicas
      message: replicas must be at least minReplicas
    - rule: "!has(self.mode) || self.mode != 'Off'"
      messageExpression: "'mode ' + self.mode + ' is not allowed'"
    - rule: self.tags.isSorted()
      fieldPath: .tags
      reason: FieldValueForbidden
    - rule: self.replicas == oldSelf.replicas || self.mutable
      message: replicas is immutable
    - rule: "!oldSelf.hasValue() || self.name == oldSelf.value().name"
      optionalOldSelf: true
      message: name is immutable
    properties:
      name: {type: string}
      replicas: {type: integer}
      minReplicas: {type: integer}
      mode: {type: string}
      mutable: {type: boolean}
      tags:
        type: array
        items:
          type: string
          x-kubernetes-validations:
          - rule: self.size() > 0
      ports:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          required: [name]
          properties:
            name: {type: string}
            port:
              type: integer
              x-kubernetes-validations:
              - rule: self >= oldSelf
                message: ports only grow
      url:
        type: string
        x-kubernetes-validations:
        - rule: isURL(self) && url(self).getScheme() == 'https'
          message: must be an https URL
      host:
        type: string
        x-kubernetes-validations:
        - rule: self.find('[0-9]+') != ''
          message: must hold a number
`

func TestValidateRules(t *testing.T) {
	s := testSchema(t, ruleSchema)
	tests := []struct {
		name     string
		obj, old string
		want     []string
	}{
		{"all rules hold", `{"spec":{"name":"a","replicas":2,"minReplicas":1,"tags":["a","b"],"url":"https://x","host":"h1"}}`, "", nil},
		{"message", `{"spec":{"name":"a","replicas":1,"minReplicas":2,"tags":["a"]}}`, "",
			[]string{`spec: Invalid value: replicas must be at least minReplicas`}},
		{"messageExpression", `{"spec":{"name":"a","replicas":1,"minReplicas":1,"mode":"Off","tags":["a"]}}`, "",
			[]string{`spec: Invalid value: mode Off is not allowed`}},
		{"fieldPath and reason", `{"spec":{"name":"a","replicas":1,"minReplicas":1,"tags":["b","a"]}}`, "",
			[]string{`spec.tags: Forbidden: failed rule: self.tags.isSorted()`}},
		{"rule on an array item", `{"spec":{"name":"a","replicas":1,"minReplicas":1,"tags":["a",""]}}`, "",
			[]string{`spec.tags: Forbidden: failed rule: self.tags.isSorted()`, `spec.tags[1]: Invalid value: "": failed rule: self.size() > 0`}},
		{"scalar value in the error", `{"spec":{"name":"a","replicas":1,"minReplicas":1,"tags":["a"],"url":"http://x"}}`, "",
			[]string{`spec.url: Invalid value: "http://x": must be an https URL`}},
		{"regex library", `{"spec":{"name":"a","replicas":1,"minReplicas":1,"tags":["a"],"host":"h"}}`, "",
			[]string{`spec.host: Invalid value: "h": must hold a number`}},
		{"missing field is an evaluation error", `{"spec":{"name":"a","replicas":1,"tags":["a"]}}`, "",
			[]string{`spec: Invalid value: "object": no such key: minReplicas evaluating rule: replicas must be at least minReplicas`}},
		{"transition rule holds", `{"spec":{"name":"a","replicas":2,"minReplicas":1,"tags":["a"]}}`,
			`{"spec":{"name":"a","replicas":2,"minReplicas":1,"tags":["a"]}}`, nil},
		{"transition rule fails", `{"spec":{"name":"a","replicas":3,"minReplicas":1,"mutable":false,"tags":["a"]}}`,
			`{"spec":{"name":"a","replicas":2,"minReplicas":1,"mutable":false,"tags":["a"]}}`,
			[]string{`spec: Invalid value: replicas is immutable`}},
		{"optionalOldSelf rule runs on create and update", `{"spec":{"name":"b","replicas":2,"minReplicas":1,"mutable":true,"tags":["a"]}}`,
			`{"spec":{"name":"a","replicas":2,"minReplicas":1,"mutable":true,"tags":["a"]}}`,
			[]string{`spec: Invalid value: name is immutable`}},
		{"map list items correlate by key", `{"spec":{"name":"a","replicas":2,"minReplicas":1,"tags":["a"],"ports":[{"name":"y","port":1},{"name":"x","port":5}]}}`,
			`{"spec":{"name":"a","replicas":2,"minReplicas":1,"tags":["a"],"ports":[{"name":"x","port":8}]}}`,
			[]string{`spec.ports[1].port: Invalid value: 5: ports only grow`}},
		{"unchanged invalid values ratchet", `{"spec":{"name":"a","replicas":1,"minReplicas":2,"tags":["a"]}}`,
			`{"spec":{"name":"a","replicas":1,"minReplicas":2,"tags":["a"]}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var old map[string]any
			if tt.old != "" {
				old = obj(t, tt.old)
			}
			assertErrors(t, s.rules.validate(obj(t, tt.obj), old), tt.want)
		})
	}
}

func TestValidateSkipsRulesOnWrongTypes(t *testing.T) {
	s := testSchema(t, ruleSchema)
	o := obj(t, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"d"},"spec":{"name":"a","replicas":"x","minReplicas":1,"tags":["a"]}}`)
	assertErrors(t, s.Validate(o, nil), []string{
		`spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer`,
		`<nil>: Invalid value: null: some validation rules were not checked because the object was invalid`,
	})
}

func TestRuntimeCostLimit(t *testing.T) {
	s := testSchema(t, `
type: object
properties:
  spec:
    type: object
    properties:
      list:
        type: array
        items: {type: integer}
        x-kubernetes-validations:
        - rule: self.all(a, self.all(b, self.all(c, a + b + c >= 0)))
`)
	list := make([]any, 200)
	for i := range list {
		list[i] = int64(i)
	}
	errs := s.rules.validate(map[string]any{"spec": map[string]any{"list": list}}, nil)
	assertErrors(t, errs, []string{`spec.list: Invalid value: "array": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule`})
}

func TestValidateDefinitionRules(t *testing.T) {
	const sp = "spec.versions[0].schema.openAPIV3Schema"
	tests := []struct {
		name, schema string
		want         []string
	}{
		{"compiles", `{type: object, properties: {spec: {type: object, x-kubernetes-validations: [{rule: "self.a > 1"}], properties: {a: {type: integer}}}}}`, nil},
		{"syntax error names the rule", `{type: object, properties: {spec: {type: object, x-kubernetes-validations: [{rule: "self.a >"}], properties: {a: {type: integer}}}}}`,
			[]string{sp + `.properties[spec].x-kubernetes-validations[0].rule: Invalid value: `, `compilation failed: ERROR: <input>:1:9: Syntax error`}},
		{"undeclared reference", `{type: object, properties: {spec: {type: object, x-kubernetes-validations: [{rule: "foo > 1"}], properties: {a: {type: integer}}}}}`,
			[]string{sp + `.properties[spec].x-kubernetes-validations[0].rule: Invalid value: `, `undeclared reference to 'foo'`}},
		{"must be bool", `{type: object, properties: {spec: {type: object, x-kubernetes-validations: [{rule: "'x'"}], properties: {a: {type: integer}}}}}`,
			[]string{`cel expression must evaluate to a bool`}},
		{"oldSelf under list items", `{type: object, properties: {l: {type: array, items: {type: string, x-kubernetes-validations: [{rule: "self == oldSelf"}]}}}}`,
			[]string{sp + `.properties[l].items.x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within ` + sp + `.properties[l]`}},
		{"optionalOldSelf without oldSelf", `{type: object, properties: {spec: {type: object, x-kubernetes-validations: [{rule: "true", optionalOldSelf: true}]}}}`,
			[]string{sp + `.properties[spec].x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule`}},
		{"empty rule", `{type: object, properties: {spec: {type: object, x-kubernetes-validations: [{rule: " "}]}}}`,
			[]string{sp + `.properties[spec].x-kubernetes-validations[0].rule: Required value: rule is not specified`}},
		{"bad fieldPath", `{type: object, properties: {spec: {type: object, x-kubernetes-validations: [{rule: "true", fieldPath: ".nope"}], properties: {a: {type: integer}}}}}`,
			[]string{sp + `.properties[spec].x-kubernetes-validations[0].fieldPath: Invalid value: ".nope": must be a valid path`}},
		{"bad reason", `{type: object, properties: {spec: {type: object, x-kubernetes-validations: [{rule: "true", reason: Nope}]}}}`,
			[]string{sp + `.properties[spec].x-kubernetes-validations[0].reason: Unsupported value: "Nope"`}},
		{"default must satisfy the rules", `{type: object, properties: {spec: {type: object, default: {a: 0}, x-kubernetes-validations: [{rule: "self.a > 1", message: "a too small"}], properties: {a: {type: integer}}}}}`,
			[]string{sp + `.properties[spec].default: Invalid value: a too small`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := testCRD(t, tt.schema)
			Default(crd)
			errs := Validate(crd)
			if len(tt.want) == 0 {
				assertErrors(t, errs, nil)
				return
			}
			if len(errs) != 1 {
				t.Fatalf("errors = %v, want one containing %q", errs, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(errs[0].Error(), w) {
					t.Errorf("error %q does not contain %q", errs[0].Error(), w)
				}
			}
		})
	}
}
