package crd

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

func TestDefaultDefinition(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Spec.Names.Kind = "CronTab"
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1"}, {Name: "v1", Storage: true}}
	Default(crd)
	if got := crd.Spec.Names.Singular; got != "crontab" {
		t.Errorf("singular = %q, want crontab", got)
	}
	if got := crd.Spec.Names.ListKind; got != "CronTabList" {
		t.Errorf("listKind = %q, want CronTabList", got)
	}
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("conversion = %+v, want strategy None", crd.Spec.Conversion)
	}
	if got := crd.Status.StoredVersions; len(got) != 1 || got[0] != "v1" {
		t.Errorf("storedVersions = %v, want [v1]", got)
	}

	hook := &apiextensionsv1.CustomResourceDefinition{}
	hook.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Name: "s", Namespace: "n"}}}}
	Default(hook)
	if p := hook.Spec.Conversion.Webhook.ClientConfig.Service.Port; p == nil || *p != 443 {
		t.Errorf("webhook service port = %v, want 443", p)
	}
}

// validCRD is a definition Validate accepts; each case below breaks one rule.
func validCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	crd := testCRD(t, widgetSchema)
	crd.Spec.Versions[0].Subresources = &apiextensionsv1.CustomResourceSubresources{
		Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
		Scale:  &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"},
	}
	crd.Spec.Versions[0].AdditionalPrinterColumns = []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Mode", Type: "string", JSONPath: ".spec.mode"}}
	crd.Spec.Versions[0].SelectableFields = []apiextensionsv1.SelectableField{{JSONPath: ".spec.mode"}}
	Default(crd)
	return crd
}

func setSchema(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition, schemaYAML string) {
	t.Helper()
	var props apiextensionsv1.JSONSchemaProps
	if err := yaml.UnmarshalStrict([]byte(schemaYAML), &props); err != nil {
		t.Fatalf("schema: %v", err)
	}
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema = &props
}

func TestValidateDefinition(t *testing.T) {
	const sp = "spec.versions[0].schema.openAPIV3Schema"
	tests := []struct {
		name   string
		change func(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition)
		want   []string
	}{
		{"valid", func(*testing.T, *apiextensionsv1.CustomResourceDefinition) {}, nil},
		{"name must be plural.group", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Name = "widget.example.com" },
			[]string{`metadata.name: Invalid value: "widget.example.com": must be spec.names.plural+"."+spec.group`}},
		{"group needs a dot", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Group, c.Name = "example", "widgets.example"
		}, []string{`spec.group: Invalid value: "example": should be a domain with at least one dot`}},
		{"a protected group needs its approval", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Group, c.Name = "example.k8s.io", "widgets.example.k8s.io"
		}, []string{`metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111`}},
		{"an approval is a URL or says why not", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Group, c.Name = "example.kubernetes.io", "widgets.example.kubernetes.io"
			c.Annotations = map[string]string{"api-approved.kubernetes.io": "yes"}
		}, []string{`metadata.annotations[api-approved.kubernetes.io]: Invalid value: "yes": protected groups must have approval annotation "api-approved.kubernetes.io" with either a URL or a reason starting with "unapproved", see https://github.com/kubernetes/enhancements/pull/1111`}},
		{"an unapproved reason will do", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Group, c.Name = "example.k8s.io", "widgets.example.k8s.io"
			c.Annotations = map[string]string{"api-approved.kubernetes.io": "unapproved, an experiment"}
		}, nil},
		{"kind form", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.Kind = "Wid get" },
			[]string{`spec.names.kind: Invalid value: "Wid get": may have mixed case, but should otherwise match`}},
		{"kind and listKind differ", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.ListKind = "Widget" },
			[]string{`spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same`}},
		{"shortNames", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Names.ShortNames = []string{"w_1"}
		},
			[]string{`spec.names.shortNames[0]: Invalid value: "w_1"`}},
		{"scope", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Scope = "Global" },
			[]string{`spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"`}},
		{"one storage version", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			v2 := *c.Spec.Versions[0].DeepCopy()
			v2.Name = "v2"
			c.Spec.Versions = append(c.Spec.Versions, v2)
		}, []string{`spec.versions: Invalid value: ["v1","v2"]: must have exactly one version marked as storage version`, `status.storedVersions: Invalid value: ["v1"]: must have the storage version v2`}},
		{"version names", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			v2 := *c.Spec.Versions[0].DeepCopy()
			v2.Storage = false
			c.Spec.Versions = append(c.Spec.Versions, v2)
			c.Spec.Versions[0].Name, c.Status.StoredVersions = "V1", []string{"V1"}
		}, []string{`spec.versions[0].name: Invalid value: "V1"`}},
		{"schema required", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Schema = nil },
			[]string{`spec.versions[0].schema.openAPIV3Schema: Required value`, "selectableFields"}},
		{"scale paths", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Subresources.Scale.SpecReplicasPath = ".status.replicas"
		}, []string{`spec.versions[0].subresources.scale.specReplicasPath: Invalid value: ".status.replicas": should be a json path under .spec`}},
		{"printer column type", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].AdditionalPrinterColumns[0].Type = "text"
		}, []string{`spec.versions[0].additionalPrinterColumns[0].type: Invalid value: "text": must be one of boolean,date,integer,number,string`}},
		{"printer column path", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].AdditionalPrinterColumns[0].JSONPath = "spec.mode"
		}, []string{`spec.versions[0].additionalPrinterColumns[0].JSONPath: Invalid value: "spec.mode": must be a simple json path starting with .`}},
		{"selectable field type", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields[0].JSONPath = ".spec.tags"
		}, []string{`spec.versions[0].selectableFields[0].jsonPath: Invalid value: ".spec.tags": must point to a field of type string, boolean or integer`}},
		{"selectable field path", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields[0].JSONPath = ".spec.nope"
		}, []string{`spec.versions[0].selectableFields[0].jsonPath: Invalid value: ".spec.nope": is an invalid path`}},
		{"webhook conversion needs a client config and review versions", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{}}
		}, []string{`spec.conversion.webhook.clientConfig: Required value`, `spec.conversion.webhook.conversionReviewVersions: Required value`}},
		{"webhook url is https", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			u := "http://example.com/convert"
			c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &u}, ConversionReviewVersions: []string{"v1"}}}
		}, []string{`spec.conversion.webhook.clientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme`}},
		{"stored versions listed", func(_ *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Status.StoredVersions = []string{"v1", "v0"}
		},
			[]string{`status.storedVersions[1]: Invalid value: "v0": missing from spec.versions`}},
		{"root type object", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Subresources = nil
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: array, items: {type: string}}`)
		}, []string{sp + `.type: Invalid value: "array": must be object at the root`}},
		{"type everywhere", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: object, properties: {spec: {properties: {a: {type: string}}}}}`)
		}, []string{sp + `.properties[spec].type: Required value: must not be empty for specified object fields`}},
		{"items only with a type", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: object, properties: {list: {type: array}}}`)
		}, []string{sp + `.properties[list].items: Required value: must be specified`}},
		{"properties and additionalProperties exclusive", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: object, properties: {m: {type: object, properties: {a: {type: string}}, additionalProperties: {type: string}}}}`)
		}, []string{sp + `.properties[m].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive`}},
		{"metadata only name and generateName", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: object, properties: {metadata: {type: object, properties: {labels: {type: object}}}}}`)
		}, []string{sp + `.properties[metadata]: Forbidden: must not specify anything other than name and generateName`}},
		{"nested type in anyOf", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: object, properties: {a: {type: string, anyOf: [{type: string}, {maxLength: 3}]}}}`)
		}, []string{sp + `.properties[a].anyOf[0].type: Forbidden: must be empty to be structural`}},
		{"int-or-string anyOf pattern is structural", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: object, properties: {a: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}}}`)
		}, nil},
		{"value validation about an undeclared field", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: object, properties: {a: {type: object, allOf: [{properties: {b: {maxLength: 3}}}]}}}`)
		}, []string{sp + `.properties[a].properties[b]: Required value: because it is defined in ` + sp + `.properties[a].allOf[0].properties[b]`}},
		{"default must validate", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: object, properties: {a: {type: integer, default: "x"}}}`)
		}, []string{sp + `.properties[a].default: Invalid value: "string":  in body must be of type integer: "string"`}},
		{"default must be pruned", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: object, properties: {a: {type: object, default: {b: 1}, properties: {c: {type: integer}}}}}`)
		}, []string{sp + `.properties[a].default: Invalid value: {"b":1}: must not have unknown fields`}},
		{"no default in metadata", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: object, properties: {metadata: {type: object, properties: {name: {type: string, default: x}}}}}`)
		}, []string{sp + `.properties[metadata].properties[name].default: Forbidden: must not be set in top-level metadata`}},
		{"list-type map needs keys", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: object, properties: {l: {type: array, x-kubernetes-list-type: map, items: {type: object, properties: {k: {type: string}}}}}}`)
		}, []string{sp + `.properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map`}},
		{"list map keys required or defaulted", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: object, properties: {l: {type: array, x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [k], items: {type: object, properties: {k: {type: string}}}}}}`)
		}, []string{sp + `.properties[l].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property`}},
		{"uniqueItems forbidden", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: object, properties: {l: {type: array, uniqueItems: true, items: {type: string}}}}`)
		}, []string{sp + `.properties[l].uniqueItems: Forbidden: uniqueItems cannot be set to true`}},
		{"$ref unsupported", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: object, properties: {a: {type: string, $ref: "#/x"}}}`)
		}, []string{sp + `.properties[a].$ref: Forbidden: $ref is not supported`}},
		{"status root restricted", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			setSchema(t, c, `{type: object, anyOf: [{required: [spec]}], properties: {spec: {type: object}}}`)
		}, []string{sp + `: Invalid value: "AnyOf": only [`}},
		{"100 levels of nesting", func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = nil
			c.Spec.Versions[0].Schema.OpenAPIV3Schema = nestedSchema(100)
		}, []string{sp + `: Invalid value: "": must not be nested more than 64 levels deep`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := validCRD(t)
			tt.change(t, crd)
			assertErrors(t, Validate(crd), tt.want)
		})
	}
}

// nestedSchema is an object schema with depth levels of nested objects.
func nestedSchema(depth int) *apiextensionsv1.JSONSchemaProps {
	s := &apiextensionsv1.JSONSchemaProps{Type: "string"}
	for i := 0; i < depth; i++ {
		s = &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"a": *s}}
	}
	return s
}

// assertErrors checks that errs are exactly as many as want and that each
// wanted text is contained in one of them.
func assertErrors(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	got := make([]string, len(errs))
	for i, e := range errs {
		got[i] = e.Error()
	}
	if len(errs) != len(want) {
		t.Fatalf("%d errors, want %d:\n  got  %q\n  want %q", len(errs), len(want), got, want)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.Contains(g, w)
		}
		if !found {
			t.Errorf("no error contains %q; got %q", w, got)
		}
	}
}

func TestValidateDefinitionUpdate(t *testing.T) {
	old := validCRD(t)
	old.ResourceVersion = "1"
	old.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	tests := []struct {
		name   string
		change func(c *apiextensionsv1.CustomResourceDefinition)
		want   []string
	}{
		{"unchanged", func(*apiextensionsv1.CustomResourceDefinition) {}, nil},
		{"scope is immutable once established", func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Scope = apiextensionsv1.ClusterScoped },
			[]string{`spec.scope: Invalid value: "Cluster": field is immutable`}},
		{"group is immutable", func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Group = "example.org"
			c.Name = "widgets.example.org"
		}, []string{`spec.group: Invalid value: "example.org": field is immutable`, `metadata.name: Invalid value: "widgets.example.org": field is immutable`}},
		{"stored version removed", func(c *apiextensionsv1.CustomResourceDefinition) {
			v2 := *c.Spec.Versions[0].DeepCopy()
			v2.Name = "v2"
			c.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{v2}
		}, []string{`status.storedVersions: Invalid value: ["v1"]: must have the storage version v2`, `status.storedVersions[0]: Invalid value: "v1": missing from spec.versions`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := old.DeepCopy()
			tt.change(crd)
			assertErrors(t, ValidateUpdate(crd, old), tt.want)
		})
	}
}
