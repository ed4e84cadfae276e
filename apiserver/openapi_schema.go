package apiserver

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/minictl/minictl/api"
)

// schemaBuilder describes Go types as OpenAPI schemas, by reflection over
// k8s.io/api's structs, the way kube-openapi's generated definitions do:
//
//   - a named struct is a definition, named for its package and type the way
//     Kubernetes names them (k8s.io/api/core/v1.Pod is
//     io.k8s.api.core.v1.Pod), and fields refer to it by $ref;
//   - properties come from json tags: inline and embedded structs are
//     flattened, "-" is skipped, fields without omitempty are required;
//   - patchStrategy and patchMergeKey tags become
//     x-kubernetes-patch-strategy and x-kubernetes-patch-merge-key, which
//     kubectl apply and edit need for strategic merge patches;
//   - descriptions come from the types' SwaggerDoc methods;
//   - types that describe themselves (OpenAPISchemaType: Quantity,
//     IntOrString, Time, ...) are what they say; other types with their own
//     JSON encoding (RawExtension, FieldsV1) are objects of any shape.
//
// One builder writes one document: refs point at #/definitions/ (OpenAPI
// v2) or #/components/schemas/ (v3).
type schemaBuilder struct {
	v3   bool
	defs map[string]map[string]any
}

func newSchemaBuilder(v3 bool) *schemaBuilder {
	return &schemaBuilder{v3: v3, defs: map[string]map[string]any{}}
}

func (b *schemaBuilder) refPrefix() string {
	if b.v3 {
		return "#/components/schemas/"
	}
	return "#/definitions/"
}

// definitionName names t the way Kubernetes' OpenAPI does: the package path
// with its domain reversed, then the type.
func definitionName(t reflect.Type) string {
	parts := strings.Split(t.PkgPath(), "/")
	domain := strings.Split(parts[0], ".")
	slices.Reverse(domain)
	return strings.Join(append(append(domain, parts[1:]...), t.Name()), ".")
}

// ref returns a reference to t's definition, defining it first.
func (b *schemaBuilder) ref(t reflect.Type) map[string]any {
	return map[string]any{"$ref": b.refPrefix() + b.define(t)}
}

// define adds the definition of the named type t (a struct, or a type that
// describes itself) and returns its name.
func (b *schemaBuilder) define(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := definitionName(t)
	if _, ok := b.defs[name]; ok {
		return name
	}
	def := map[string]any{}
	b.defs[name] = def // before the fields, so that recursive types end
	if s, ok := selfDescribed(t); ok {
		for k, v := range s {
			def[k] = v
		}
	} else {
		b.structSchema(t, def)
	}
	if doc := swaggerDoc(t)[""]; doc != "" {
		def["description"] = doc
	}
	return name
}

// selfDescribed is the schema of a type whose JSON form is its own: what
// it says through OpenAPISchemaType, or an object of any shape.
func selfDescribed(t reflect.Type) (map[string]any, bool) {
	v := reflect.New(t).Interface()
	if st, ok := v.(interface{ OpenAPISchemaType() []string }); ok {
		types := st.OpenAPISchemaType()
		if len(types) == 0 {
			// Any JSON value (apiextensions' JSON, JSONSchemaPropsOrBool).
			return map[string]any{"x-kubernetes-preserve-unknown-fields": true}, true
		}
		s := map[string]any{"type": types[0]}
		if f, ok := v.(interface{ OpenAPISchemaFormat() string }); ok && f.OpenAPISchemaFormat() != "" {
			s["format"] = f.OpenAPISchemaFormat()
		}
		return s, true
	}
	if _, ok := v.(json.Marshaler); ok {
		return map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}, true
	}
	return nil, false
}

func swaggerDoc(t reflect.Type) map[string]string {
	if d, ok := reflect.New(t).Elem().Interface().(interface{ SwaggerDoc() map[string]string }); ok {
		return d.SwaggerDoc()
	}
	return nil
}

// structSchema fills def with the properties of struct t.
func (b *schemaBuilder) structSchema(t reflect.Type, def map[string]any) {
	props := map[string]any{}
	var required []string
	b.addFields(t, props, &required)
	def["type"] = "object"
	if len(props) > 0 {
		def["properties"] = props
	}
	if len(required) > 0 {
		slices.Sort(required)
		def["required"] = required
	}
}

func (b *schemaBuilder) addFields(t reflect.Type, props map[string]any, required *[]string) {
	doc := swaggerDoc(t)
	for i := range t.NumField() {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		inline := strings.Contains(","+opts+",", ",inline,") || (f.Anonymous && !hasTag)
		if inline {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				b.addFields(ft, props, required)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := b.fieldSchema(f.Type)
		if d := doc[name]; d != "" {
			s["description"] = d
		}
		if v := f.Tag.Get("patchStrategy"); v != "" {
			s["x-kubernetes-patch-strategy"] = v
		}
		if v := f.Tag.Get("patchMergeKey"); v != "" {
			s["x-kubernetes-patch-merge-key"] = v
		}
		props[name] = s
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			*required = append(*required, name)
		}
	}
}

// fieldSchema is the schema of a field of type t: a reference for named
// structs (wrapped as kube-openapi does in v3, so that a description and
// extensions can sit beside it), or an inline schema.
func (b *schemaBuilder) fieldSchema(t reflect.Type) map[string]any {
	s := b.schemaFor(t)
	if ref, ok := s["$ref"]; ok && b.v3 {
		return map[string]any{"allOf": []any{map[string]any{"$ref": ref}}, "default": map[string]any{}}
	}
	return s
}

// schemaFor is the inline schema of t: a $ref for named structs and
// self-described types, or the shape of a basic type, slice or map.
func (b *schemaBuilder) schemaFor(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.PkgPath() != "" && t.Name() != "" {
		if _, ok := selfDescribed(t); ok || t.Kind() == reflect.Struct {
			return b.ref(t)
		}
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Int32, reflect.Uint16, reflect.Int16, reflect.Int8, reflect.Uint8:
		return map[string]any{"type": "integer", "format": "int32"}
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Float32:
		return map[string]any{"type": "number", "format": "float"}
	case reflect.Float64:
		return map[string]any{"type": "number", "format": "double"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte"}
		}
		return map[string]any{"type": "array", "items": b.fieldSchema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": b.fieldSchema(t.Elem())}
	case reflect.Struct:
		def := map[string]any{}
		b.structSchema(t, def)
		return def
	}
	// interface{} and anything else: any JSON value.
	return map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
}

// defineUnstructured adds the definitions of res's kind and list kind, for
// a resource without a Go type (api.NewUnstructured), and returns the
// kind's name. They are named as kube-apiserver names a custom resource's,
// the group reversed, then version and kind (com.example.v1.Widget). The
// kind is its OpenAPISchema (a custom resource's version schema) with
// apiVersion, kind and metadata (ObjectMeta's definition) as properties;
// without one it keeps any field (x-kubernetes-preserve-unknown-fields),
// since nothing here knows them.
var (
	apiVersionDoc = metav1.TypeMeta{}.SwaggerDoc()["apiVersion"]
	kindDoc       = metav1.TypeMeta{}.SwaggerDoc()["kind"]
)

func (b *schemaBuilder) defineUnstructured(res *api.Resource) string {
	domain := strings.Split(res.Group, ".")
	slices.Reverse(domain)
	name := strings.Join(append(domain, res.Version, res.Kind), ".")
	gvk := func(kind string) []any {
		return []any{map[string]any{"group": res.Group, "version": res.Version, "kind": kind}}
	}
	str := map[string]any{"type": "string"}
	def := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	if res.OpenAPISchema != nil {
		def = runtime.DeepCopyJSON(res.OpenAPISchema)
	}
	props, _ := def["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	props["apiVersion"] = map[string]any{"type": "string", "description": apiVersionDoc}
	props["kind"] = map[string]any{"type": "string", "description": kindDoc}
	props["metadata"] = b.ref(reflect.TypeFor[metav1.ObjectMeta]())
	def["properties"] = props
	def["x-kubernetes-group-version-kind"] = gvk(res.Kind)
	b.defs[name] = def
	b.defs[name+"List"] = map[string]any{
		"type":     "object",
		"required": []string{"items"},
		"properties": map[string]any{
			"apiVersion": str, "kind": str,
			"metadata": b.ref(reflect.TypeFor[metav1.ListMeta]()),
			"items":    map[string]any{"type": "array", "items": map[string]any{"$ref": b.refPrefix() + name}},
		},
		"x-kubernetes-group-version-kind": gvk(res.ListKindName()),
	}
	return name
}
