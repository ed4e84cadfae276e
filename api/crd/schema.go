package crd

import (
	"encoding/json"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	openapierrors "k8s.io/kube-openapi/pkg/validation/errors"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// Schema is one served version's structural schema, compiled once. It is
// safe for concurrent use.
type Schema struct {
	group, version, kind string
	namespaced           bool
	scale                *apiextensionsv1.CustomResourceSubresourceScale

	root      *structural
	validator *validate.SchemaValidator
	quick     *quickNode // validator's answer for valid objects, quickly (quickvalidate.go)
	rules     *celRules
}

// NewSchema compiles version's schema of crd. A definition Validate
// accepted always compiles.
func NewSchema(crd *apiextensionsv1.CustomResourceDefinition, version string) (*Schema, error) {
	var v *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == version {
			v = &crd.Spec.Versions[i]
		}
	}
	if v == nil {
		return nil, fmt.Errorf("version %q of %s: not defined", version, crd.Name)
	}
	s := &Schema{
		group:      crd.Spec.Group,
		version:    version,
		kind:       crd.Spec.Names.Kind,
		namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
	}
	if v.Subresources != nil {
		s.scale = v.Subresources.Scale
	}
	props := versionSchema(v)
	if props == nil {
		// No schema: everything is kept and nothing but metadata checked.
		props = &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}
	}
	if schemaDepth(props, 0) > maxSchemaDepth {
		return nil, fmt.Errorf("version %q of %s: schema %w", version, crd.Name, errTooDeep)
	}
	root, err := newStructural(props)
	if err != nil {
		return nil, fmt.Errorf("version %q of %s: %w", version, crd.Name, err)
	}
	pruneDefaults(root)
	markSubtrees(root)
	s.root = root
	openapi, err := toOpenAPI(props)
	if err != nil {
		return nil, fmt.Errorf("version %q of %s: %w", version, crd.Name, err)
	}
	s.validator = validate.NewSchemaValidator(openapi, nil, "", strfmt.Default)
	s.quick = compileQuick(openapi)
	if s.rules, err = compileRules(root); err != nil {
		return nil, fmt.Errorf("version %q of %s: %w", version, crd.Name, err)
	}
	return s, nil
}

func ptrTo[T any](v T) *T { return &v }

func versionSchema(v *apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.JSONSchemaProps {
	if v.Schema == nil {
		return nil
	}
	return v.Schema.OpenAPIV3Schema
}

// schemaDepth is how deeply p nests, counting every kind of subschema
// (properties, items, additionalProperties, allOf, anyOf, oneOf, not); it
// stops counting past maxSchemaDepth so that its own recursion is bounded.
func schemaDepth(p *apiextensionsv1.JSONSchemaProps, depth int) int {
	if p == nil || depth > maxSchemaDepth {
		return depth
	}
	deepest := depth
	visit := func(c *apiextensionsv1.JSONSchemaProps) {
		if d := schemaDepth(c, depth+1); d > deepest {
			deepest = d
		}
	}
	for _, c := range p.Properties {
		visit(&c)
	}
	for _, c := range p.PatternProperties {
		visit(&c)
	}
	if p.AdditionalProperties != nil {
		visit(p.AdditionalProperties.Schema)
	}
	if p.AdditionalItems != nil {
		visit(p.AdditionalItems.Schema)
	}
	if p.Items != nil {
		visit(p.Items.Schema)
		for i := range p.Items.JSONSchemas {
			visit(&p.Items.JSONSchemas[i])
		}
	}
	for _, list := range [][]apiextensionsv1.JSONSchemaProps{p.AllOf, p.AnyOf, p.OneOf} {
		for i := range list {
			visit(&list[i])
		}
	}
	visit(p.Not)
	return deepest
}

// pruneDefaults drops from every default what its own schema would prune,
// as kube-apiserver does before it serves a version.
func pruneDefaults(s *structural) {
	if s == nil {
		return
	}
	if s.Default != nil {
		(&pruner{}).prune("", s.Default, s)
	}
	for _, p := range s.Properties {
		pruneDefaults(p)
	}
	pruneDefaults(s.AdditionalProperties)
	pruneDefaults(s.Items)
}

// Validate checks a custom object against the schema and its CEL rules,
// metadata included (name, and the embedded resources'); old is the object
// an update replaces (nil on create), for transition rules that use oldSelf
// and for ratcheting. The steps are kube-apiserver's: type meta first (and
// alone), then metadata, the OpenAPI schema, the scale subresource's
// fields, embedded resources, list types, and the CEL rules last, only
// when nothing before them found a value of the wrong type.
func (s *Schema) Validate(obj, old map[string]any) field.ErrorList {
	u := &unstructured.Unstructured{Object: obj}
	if errs := s.validateTypeMeta(u); len(errs) > 0 {
		return errs
	}
	var errs field.ErrorList
	metaPath := field.NewPath("metadata")
	if old == nil {
		errs = append(errs, metavalidation.ValidateObjectMetaAccessor(u, s.namespaced, metavalidation.NameIsDNSSubdomain, metaPath)...)
	} else {
		errs = append(errs, metavalidation.ValidateObjectMetaAccessorUpdate(u, &unstructured.Unstructured{Object: old}, metaPath)...)
	}
	errs = append(errs, s.validateOpenAPI(obj, old)...)
	errs = append(errs, validateScale(obj, s.scale)...)
	errs = append(errs, validateEmbedded(nil, obj, s.root)...)
	if old == nil || len(validateLists(nil, s.root, old)) == 0 {
		errs = append(errs, validateLists(nil, s.root, obj)...)
	}
	if s.rules != nil {
		if blocking(errs) {
			errs = append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		} else {
			errs = append(errs, s.rules.validate(obj, old)...)
		}
	}
	return errs
}

// blocking reports whether errs hold a value of the wrong type, which the
// CEL rules cannot be evaluated against.
func blocking(errs field.ErrorList) bool {
	for _, e := range errs {
		if e.Type == field.ErrorTypeNotSupported || e.Type == field.ErrorTypeTypeInvalid {
			return true
		}
	}
	return false
}

func (s *Schema) validateTypeMeta(u *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	if k := u.GetKind(); k != s.kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), k, "must be "+s.kind))
	}
	if gv := s.group + "/" + s.version; u.GetAPIVersion() != gv {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), u.GetAPIVersion(), "must be "+gv))
	}
	return errs
}

// validateOpenAPI runs kube-openapi's validator and words its findings as
// kube-apiserver does.
func (s *Schema) validateOpenAPI(obj, old map[string]any) field.ErrorList {
	if s.quick.valid(obj) {
		return nil
	}
	res := s.validator.Validate(obj)
	if res.IsValid() {
		return nil
	}
	var errs field.ErrorList
	for _, err := range res.Errors {
		errs = append(errs, openAPIError(nil, err))
	}
	return ratchet(errs, obj, old)
}

// openAPIError words one finding of kube-openapi's validator as a field
// error below base (nil for a whole object).
func openAPIError(base *field.Path, err error) *field.Error {
	verr, ok := err.(*openapierrors.Validation)
	if !ok {
		return field.Invalid(base, "", err.Error())
	}
	pth := base
	if verr.Name != "" && verr.Name != "." {
		pth = pth.Child(strings.TrimPrefix(verr.Name, "."))
	}
	value := verr.Value
	if value == nil {
		value = ""
	}
	switch verr.Code() {
	case openapierrors.RequiredFailCode:
		return field.Required(pth, "")
	case openapierrors.EnumFailCode:
		values := []string{}
		for _, allowed := range verr.Values {
			if s, ok := allowed.(string); ok {
				values = append(values, s)
			} else {
				b, _ := json.Marshal(allowed)
				values = append(values, string(b))
			}
		}
		return field.NotSupported(pth, verr.Value, values)
	case openapierrors.TooLongFailCode:
		limit := int64(-1)
		if i, ok := verr.Valid.(int64); ok {
			limit = i
		}
		return field.TooLong(pth, "", int(limit))
	case openapierrors.MaxItemsFailCode, openapierrors.TooManyPropertiesCode:
		actual, limit := int64(-1), int64(-1)
		if i, ok := verr.Value.(int64); ok {
			actual = i
		}
		if i, ok := verr.Valid.(int64); ok {
			limit = i
		}
		return field.TooMany(pth, int(actual), int(limit))
	case openapierrors.InvalidTypeCode:
		return field.TypeInvalid(pth, value, verr.Error())
	}
	return field.Invalid(pth, value, verr.Error())
}
