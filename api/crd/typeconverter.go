package crd

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// TypeConverter returns the converter server-side apply types crd's
// objects with: every served version's schema, as structured-merge-diff
// needs it (list types and map keys included, fields under
// x-kubernetes-preserve-unknown-fields deduced), with metadata typed as
// ObjectMeta so that labels, annotations, finalizers and ownerReferences
// merge as they do on built-in objects. A version without a schema is
// typed by deduction.
func TypeConverter(crd *apiextensionsv1.CustomResourceDefinition) (managedfields.TypeConverter, error) {
	models := map[string]*spec.Schema{}
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if !v.Served {
			continue
		}
		props := versionSchema(v)
		if props == nil {
			return managedfields.NewDeducedTypeConverter(), nil
		}
		if schemaDepth(props, 0) > maxSchemaDepth {
			return nil, fmt.Errorf("version %q of %s: schema %w", v.Name, crd.Name, errTooDeep)
		}
		s, err := toOpenAPI(props)
		if err != nil {
			return nil, fmt.Errorf("version %q of %s: %w", v.Name, crd.Name, err)
		}
		s = forTypes(s, true)
		s.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{
			"group": crd.Spec.Group, "version": v.Name, "kind": crd.Spec.Names.Kind,
		}})
		models[modelName(crd.Spec.Group, v.Name, crd.Spec.Names.Kind)] = s
	}
	if len(models) == 0 {
		return managedfields.NewDeducedTypeConverter(), nil
	}
	tc, err := managedfields.NewTypeConverter(models, crd.Spec.PreserveUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("type converter for %s: %w", crd.Name, err)
	}
	return tc, nil
}

// modelName names a version's type as kube-apiserver's OpenAPI does
// (group reversed: com.example.v1.Widget).
func modelName(group, version, kind string) string {
	parts := strings.Split(group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(append(parts, version, kind), ".")
}

// forTypes shapes a converted schema for structured-merge-diff: the value
// validations go (they say nothing about the shape), int-or-string is an
// untyped scalar, and every resource,
// the root and each embedded one, gets apiVersion, kind and ObjectMeta.
func forTypes(s *spec.Schema, resource bool) *spec.Schema {
	if s == nil {
		return nil
	}
	c := *s
	c.AllOf, c.AnyOf, c.OneOf, c.Not = nil, nil, nil, nil
	c.Enum, c.Default, c.Pattern = nil, nil, ""
	if v, _ := c.Extensions.GetBool("x-kubernetes-int-or-string"); v {
		c.Type = nil // an untyped scalar
	}
	if c.Properties != nil {
		props := make(map[string]spec.Schema, len(c.Properties))
		for k, p := range c.Properties {
			props[k] = *forTypes(&p, isEmbedded(&p))
		}
		c.Properties = props
	}
	if c.AdditionalProperties != nil && c.AdditionalProperties.Schema != nil {
		ap := *c.AdditionalProperties
		ap.Schema = forTypes(ap.Schema, isEmbedded(ap.Schema))
		c.AdditionalProperties = &ap
	}
	if c.Items != nil && c.Items.Schema != nil {
		items := *c.Items
		items.Schema = forTypes(items.Schema, isEmbedded(items.Schema))
		c.Items = &items
	}
	if resource {
		if c.Properties == nil {
			c.Properties = map[string]spec.Schema{}
		}
		c.Properties["apiVersion"] = *spec.StringProperty()
		c.Properties["kind"] = *spec.StringProperty()
		c.Properties["metadata"] = objectMetaSchema()
	}
	return &c
}

func isEmbedded(s *spec.Schema) bool {
	v, _ := s.Extensions.GetBool("x-kubernetes-embedded-resource")
	return v
}

// objectMetaSchema is ObjectMeta as structured-merge-diff needs it: which
// fields exist and how its maps and lists merge.
func objectMetaSchema() spec.Schema {
	str, integer := *spec.StringProperty(), *spec.Int64Property()
	stringMap := *spec.MapProperty(spec.StringProperty())
	finalizers := *spec.ArrayProperty(spec.StringProperty())
	finalizers.AddExtension("x-kubernetes-list-type", "set")
	owner := spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}, Properties: map[string]spec.Schema{
		"apiVersion": str, "kind": str, "name": str, "uid": str,
		"controller": *spec.BooleanProperty(), "blockOwnerDeletion": *spec.BooleanProperty(),
	}}}
	owners := *spec.ArrayProperty(&owner)
	owners.AddExtension("x-kubernetes-list-type", "map")
	owners.AddExtension("x-kubernetes-list-map-keys", []any{"uid"})
	entry := spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}}
	entry.AddExtension("x-kubernetes-preserve-unknown-fields", true)
	managed := *spec.ArrayProperty(&entry)
	managed.AddExtension("x-kubernetes-list-type", "atomic")
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}, Properties: map[string]spec.Schema{
		"name": str, "generateName": str, "namespace": str, "selfLink": str, "uid": str,
		"resourceVersion": str, "generation": integer, "creationTimestamp": str,
		"deletionTimestamp": str, "deletionGracePeriodSeconds": integer,
		"labels": stringMap, "annotations": stringMap,
		"ownerReferences": owners, "finalizers": finalizers, "managedFields": managed,
	}}}
}
