package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"

	"github.com/minictl/minictl/api/crd"
)

// CustomResources returns the catalogue entries of a definition: one per
// served version, highest priority first (v2, v1, v1beta1: the first is
// the group's preferred version), named with its accepted names
// (status.acceptedNames), as kube-apiserver's customresource handler
// builds its storage. Every entry
// stores its objects in the storage version under the same key prefix;
// they differ only in the version they are served at, and every entry but
// the storage version's names it as its Storage (built even when the
// storage version is not served).
//
// Each entry's objects are unstructured. They are pruned, defaulted and
// validated with the version's schema (package crd) as they are written,
// and defaulted with the storage version's as they are read; with a status subresource the main resource cannot write status and
// the generation moves only on changes outside metadata; printer columns,
// selectable fields and the scale subresource's paths come from the
// definition.
func CustomResources(c *apiextensionsv1.CustomResourceDefinition) ([]*Resource, error) {
	// Server-side apply types every version's objects by its schema.
	tc, err := crd.TypeConverter(c)
	if err != nil {
		return nil, fmt.Errorf("customresourcedefinition %s: %w", c.Name, err)
	}
	var out []*Resource
	var storage *Resource
	for i := range c.Spec.Versions {
		v := &c.Spec.Versions[i]
		if !v.Served && !v.Storage {
			continue
		}
		res, err := customResource(c, v, tc)
		if err != nil {
			return nil, fmt.Errorf("customresourcedefinition %s: version %s: %w", c.Name, v.Name, err)
		}
		if v.Storage {
			storage = res
		}
		if v.Served {
			out = append(out, res)
		}
	}
	for _, res := range out {
		if res != storage {
			res.Storage = storage
		}
	}
	slices.SortStableFunc(out, func(a, b *Resource) int {
		return -version.CompareKubeAwareVersionStrings(a.Version, b.Version)
	})
	return out, nil
}

// customResource is the catalogue entry of one version of a definition.
func customResource(c *apiextensionsv1.CustomResourceDefinition, v *apiextensionsv1.CustomResourceDefinitionVersion, tc managedfields.TypeConverter) (*Resource, error) {
	names := c.Status.AcceptedNames
	schema, err := crd.NewSchema(c, v.Name)
	if err != nil {
		return nil, err
	}
	res := &Resource{
		Group: c.Spec.Group, Version: v.Name, Kind: names.Kind, ListKind: names.ListKind,
		Plural: names.Plural, Singular: names.Singular,
		Namespaced: c.Spec.Scope == apiextensionsv1.NamespaceScoped,
		ShortNames: names.ShortNames, Categories: names.Categories,
		New:           NewUnstructured,
		Schema:        schema,
		ReadDefaults:  true,
		Table:         customTable(c, v),
		OpenAPISchema: openAPISchema(v),
		TypeConverter: tc,
	}
	sub := v.Subresources
	status := sub != nil && sub.Status != nil
	if status {
		res.Subresources = append(res.Subresources, "status")
	}
	if sub != nil && sub.Scale != nil {
		res.Subresources = append(res.Subresources, "scale")
		res.Scale = customScale(*sub.Scale)
	}
	res.Default = func(obj Object) { schema.Default(obj.(*unstructured.Unstructured).Object) }
	res.ValidateObject = func(obj, old Object) field.ErrorList {
		var o map[string]any
		if old != nil {
			o = old.(*unstructured.Unstructured).Object
		}
		return schema.Validate(obj.(*unstructured.Unstructured).Object, o)
	}
	res.PrepareForCreate = func(obj Object) {
		if status {
			delete(obj.(*unstructured.Unstructured).Object, "status")
		}
		obj.SetGeneration(1)
	}
	res.PrepareForUpdate = func(obj, old Object) { prepareCustomObjectForUpdate(obj, old, status) }
	if status {
		res.PrepareForStatusUpdate = prepareCustomObjectForStatusUpdate
	}
	if len(v.SelectableFields) > 0 {
		paths := make([]string, len(v.SelectableFields))
		for i, f := range v.SelectableFields {
			paths[i] = f.JSONPath
			res.FieldLabels = append(res.FieldLabels, strings.TrimPrefix(f.JSONPath, "."))
		}
		res.SelectableFields = func(obj Object) fields.Set { return customFields(obj, paths) }
	}
	return res, nil
}

// prepareCustomObjectForUpdate is kube's custom resource strategy: with a
// status subresource the main resource keeps the old status, and any change
// but to metadata moves the generation.
func prepareCustomObjectForUpdate(obj, old Object, status bool) {
	n, o := obj.(*unstructured.Unstructured).Object, old.(*unstructured.Unstructured).Object
	if status {
		if s, ok := o["status"]; ok {
			n["status"] = s
		} else {
			delete(n, "status")
		}
	}
	if !apiequality.Semantic.DeepEqual(withoutMetadata(n), withoutMetadata(o)) {
		obj.SetGeneration(old.GetGeneration() + 1)
	}
}

// prepareCustomObjectForStatusUpdate is kube's status strategy for custom
// resources, stricter than the built-ins': a status write changes the
// status and no metadata, not even labels or annotations. Only the
// managedFields are the write's own, since they record it.
func prepareCustomObjectForStatusUpdate(obj, old Object) {
	n := obj.(*unstructured.Unstructured)
	managed := n.GetManagedFields()
	n.Object["metadata"] = old.DeepCopyObject().(*unstructured.Unstructured).Object["metadata"]
	n.SetManagedFields(managed)
}

func withoutMetadata(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// customFields is the field set of a custom object's selectable fields: a
// missing field is the empty string, as kube's.
func customFields(obj Object, paths []string) fields.Set {
	set := fields.Set{}
	content := obj.(*unstructured.Unstructured).Object
	for _, p := range paths {
		v, ok := SimpleJSONPath(content, p)
		s := ""
		if ok {
			switch v := v.(type) {
			case string:
				s = v
			case bool:
				s = strconv.FormatBool(v)
			case int64:
				s = strconv.FormatInt(v, 10)
			case float64:
				s = strconv.FormatFloat(v, 'f', -1, 64)
			default:
				s = fmt.Sprint(v)
			}
		}
		set[strings.TrimPrefix(p, ".")] = s
	}
	return set
}

// customTable is kube's table convertor for a custom resource: NAME, then
// each additionalPrinterColumn (AGE when the version has none).
func customTable(c *apiextensionsv1.CustomResourceDefinition, v *apiextensionsv1.CustomResourceDefinitionVersion) *Table {
	cols := v.AdditionalPrinterColumns
	if len(cols) == 0 {
		cols = []apiextensionsv1.CustomResourceColumnDefinition{{
			Name: "Age", Type: "date", Description: objectMetaDoc["creationTimestamp"], JSONPath: ".metadata.creationTimestamp",
		}}
	}
	t := &Table{Columns: []metav1.TableColumnDefinition{nameColumn}}
	for _, col := range cols {
		desc := col.Description
		if desc == "" {
			desc = "Custom resource definition column (in JSONPath format): " + col.JSONPath
		}
		t.Columns = append(t.Columns, metav1.TableColumnDefinition{
			Name: col.Name, Type: col.Type, Format: col.Format, Description: desc, Priority: col.Priority,
		})
	}
	t.Row = func(obj Object, now time.Time) ([]any, []metav1.TableRowCondition) {
		content := obj.(*unstructured.Unstructured).Object
		cells := []any{obj.GetName()}
		for _, col := range cols {
			v, ok := SimpleJSONPath(content, col.JSONPath)
			if !ok || v == nil {
				cells = append(cells, nil)
				continue
			}
			cells = append(cells, customCell(col.Type, v, now))
		}
		return cells, nil
	}
	return t
}

// customCell is one printer column's cell, typed as the column says; a
// value of another type is empty (nil), as kube's.
func customCell(typ string, v any, now time.Time) any {
	switch typ {
	case "string":
		switch v := v.(type) {
		case string:
			return v
		case map[string]any, []any:
			b, _ := json.Marshal(v)
			return string(b)
		}
		return fmt.Sprint(v)
	case "integer":
		switch v := v.(type) {
		case int64:
			return v
		case float64:
			return int64(v)
		}
	case "number":
		switch v := v.(type) {
		case int64:
			return float64(v)
		case float64:
			return v
		}
	case "boolean":
		if b, ok := v.(bool); ok {
			return b
		}
	case "date":
		if s, ok := v.(string); ok {
			var t metav1.Time
			if err := t.UnmarshalQueryParameter(s); err != nil {
				return "<invalid>"
			}
			return age(t, now)
		}
	}
	return nil
}

// SimpleJSONPath evaluates the simple JSON paths a definition may name in
// printer columns, selectable fields and scale paths: dot-separated field
// names (".spec.replicas"), each optionally indexed ("conditions[0]"), or
// bracketed names (".metadata.labels['app.kubernetes.io/name']"). It reports
// false when a step is missing or the path is not of that shape.
func SimpleJSONPath(obj map[string]any, path string) (any, bool) {
	steps, ok := parseSimplePath(path)
	if !ok {
		return nil, false
	}
	var cur any = obj
	for _, s := range steps {
		switch c := cur.(type) {
		case map[string]any:
			if s.index >= 0 {
				return nil, false
			}
			v, ok := c[s.name]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			if s.index < 0 || s.index >= len(c) {
				return nil, false
			}
			cur = c[s.index]
		default:
			return nil, false
		}
	}
	return cur, true
}

type pathStep struct {
	name  string
	index int // -1: a field name
}

func parseSimplePath(path string) ([]pathStep, bool) {
	path = strings.TrimSpace(path)
	path = strings.TrimSuffix(strings.TrimPrefix(path, "{"), "}")
	path = strings.TrimPrefix(path, "$")
	var steps []pathStep
	for path != "" {
		switch {
		case strings.HasPrefix(path, "['"), strings.HasPrefix(path, `["`):
			q := path[1]
			end := strings.IndexByte(path[2:], q)
			if end < 0 || len(path) < end+4 || path[end+3] != ']' {
				return nil, false
			}
			steps = append(steps, pathStep{name: path[2 : end+2], index: -1})
			path = path[end+4:]
		case path[0] == '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return nil, false
			}
			i, err := strconv.Atoi(path[1:end])
			if err != nil || i < 0 {
				return nil, false
			}
			steps = append(steps, pathStep{index: i})
			path = path[end+1:]
		case path[0] == '.':
			path = path[1:]
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			if end == 0 {
				return nil, false
			}
			steps = append(steps, pathStep{name: path[:end], index: -1})
			path = path[end:]
		default:
			return nil, false
		}
	}
	return steps, true
}

// openAPISchema is the version's schema as JSON, or nil.
func openAPISchema(v *apiextensionsv1.CustomResourceDefinitionVersion) map[string]any {
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil
	}
	b, err := json.Marshal(v.Schema.OpenAPIV3Schema)
	if err != nil {
		return nil
	}
	var out map[string]any
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}
