package crd

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// level is where a schema sits: the root, array items, or an object field.
type level int

const (
	rootLevel level = iota
	itemLevel
	fieldLevel
)

// validateStructural checks kube's structural rules: the skeleton
// (type, properties, items, additionalProperties and the x-kubernetes
// extensions) is fully specified outside allOf, anyOf, oneOf and not, and
// those only add value validations about fields the skeleton declares.
func validateStructural(p *apiextensionsv1.JSONSchemaProps, pth *field.Path) field.ErrorList {
	errs := structuralInvariants(p, rootLevel, pth)
	errs = append(errs, completeness(p, p, pth, pth)...)
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}

func structuralInvariants(s *apiextensionsv1.JSONSchemaProps, lvl level, pth *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	if s.Type == "array" && (s.Items == nil || s.Items.Schema == nil) {
		errs = append(errs, field.Required(pth.Child("items"), "must be specified"))
	}
	if s.Items != nil {
		errs = append(errs, structuralInvariants(s.Items.Schema, itemLevel, pth.Child("items"))...)
	}
	for _, k := range sortedKeys(s.Properties) {
		v := s.Properties[k]
		errs = append(errs, structuralInvariants(&v, fieldLevel, pth.Child("properties").Key(k))...)
	}
	if s.AdditionalProperties != nil {
		if lvl == rootLevel {
			errs = append(errs, field.Forbidden(pth.Child("additionalProperties"), "must not be used at the root"))
		}
		errs = append(errs, structuralInvariants(s.AdditionalProperties.Schema, fieldLevel, pth.Child("additionalProperties"))...)
	}
	if s.XIntOrString && s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
		errs = append(errs, field.Invalid(pth.Child("x-kubernetes-preserve-unknown-fields"), true, "must be false if x-kubernetes-int-or-string is true"))
	}
	if s.XIntOrString && s.XEmbeddedResource {
		errs = append(errs, field.Invalid(pth.Child("x-kubernetes-embedded-resource"), true, "must be false if x-kubernetes-int-or-string is true"))
	}

	skipAnyOf := isIntOrStringAnyOf(s.AnyOf)
	skipFirstAllOfAnyOf := len(s.AllOf) > 0 && isIntOrStringAnyOf(s.AllOf[0].AnyOf)
	errs = append(errs, valueValidation(s, skipAnyOf, skipFirstAllOfAnyOf, pth)...)

	preserve := s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
	if s.XEmbeddedResource && s.Type != "object" {
		if s.Type == "" {
			errs = append(errs, field.Required(pth.Child("type"), "must be object if x-kubernetes-embedded-resource is true"))
		} else {
			errs = append(errs, field.Invalid(pth.Child("type"), s.Type, "must be object if x-kubernetes-embedded-resource is true"))
		}
	} else if s.Type == "" && !s.XIntOrString && !preserve {
		switch lvl {
		case rootLevel:
			errs = append(errs, field.Required(pth.Child("type"), "must not be empty at the root"))
		case itemLevel:
			errs = append(errs, field.Required(pth.Child("type"), "must not be empty for specified array items"))
		case fieldLevel:
			errs = append(errs, field.Required(pth.Child("type"), "must not be empty for specified object fields"))
		}
	}
	if s.XEmbeddedResource && s.AdditionalProperties != nil {
		errs = append(errs, field.Forbidden(pth.Child("additionalProperties"), "must not be used if x-kubernetes-embedded-resource is set"))
	}
	if lvl == rootLevel && s.Type != "" && s.Type != "object" {
		errs = append(errs, field.Invalid(pth.Child("type"), s.Type, "must be object at the root"))
	}
	checkMetadata := lvl == rootLevel || s.XEmbeddedResource
	if checkMetadata {
		for _, k := range []string{"kind", "apiVersion"} {
			if p, ok := s.Properties[k]; ok && p.Type != "string" {
				errs = append(errs, field.Invalid(pth.Child("properties").Key(k).Child("type"), p.Type, "must be string"))
			}
		}
	}
	if m, ok := s.Properties["metadata"]; ok {
		mp := pth.Child("properties").Key("metadata")
		if checkMetadata && m.Type != "object" {
			errs = append(errs, field.Invalid(mp.Child("type"), m.Type, "must be object"))
		}
		if lvl == rootLevel && !onlyNameAndGenerateName(m) {
			errs = append(errs, field.Forbidden(mp, "must not specify anything other than name and generateName, but metadata is implicitly specified"))
		}
	}
	if s.XEmbeddedResource && !preserve && len(s.Properties) == 0 {
		errs = append(errs, field.Required(pth.Child("properties"), "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"))
	}
	return errs
}

// onlyNameAndGenerateName reports whether a root metadata schema says no
// more than its type and something about name and generateName.
func onlyNameAndGenerateName(m apiextensionsv1.JSONSchemaProps) bool {
	props := m.Properties
	m.Properties, m.Type, m.Default = nil, "", nil
	for k := range props {
		if k != "name" && k != "generateName" {
			return false
		}
	}
	return isZeroSchema(&m)
}

func isZeroSchema(p *apiextensionsv1.JSONSchemaProps) bool {
	return reflect.DeepEqual(*p, apiextensionsv1.JSONSchemaProps{})
}

func isIntOrStringAnyOf(anyOf []apiextensionsv1.JSONSchemaProps) bool {
	return len(anyOf) == 2 &&
		isOnlyType(&anyOf[0], "integer") && isOnlyType(&anyOf[1], "string")
}

func isOnlyType(p *apiextensionsv1.JSONSchemaProps, typ string) bool {
	c := *p
	c.Type = ""
	return p.Type == typ && isZeroSchema(&c)
}

func valueValidation(v *apiextensionsv1.JSONSchemaProps, skipAnyOf, skipFirstAllOfAnyOf bool, pth *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !skipAnyOf {
		for i := range v.AnyOf {
			errs = append(errs, nestedValueValidation(&v.AnyOf[i], false, false, pth.Child("anyOf").Index(i))...)
		}
	}
	for i := range v.AllOf {
		errs = append(errs, nestedValueValidation(&v.AllOf[i], skipFirstAllOfAnyOf && i == 0, false, pth.Child("allOf").Index(i))...)
	}
	for i := range v.OneOf {
		errs = append(errs, nestedValueValidation(&v.OneOf[i], false, false, pth.Child("oneOf").Index(i))...)
	}
	if v.Not != nil {
		errs = append(errs, nestedValueValidation(v.Not, false, false, pth.Child("not"))...)
	}
	if v.Pattern != "" {
		if _, err := regexp.Compile(v.Pattern); err != nil {
			errs = append(errs, field.Invalid(pth.Child("pattern"), v.Pattern, fmt.Sprintf("must be a valid regular expression, but isn't: %v", err)))
		}
	}
	return errs
}

// nestedValueValidation checks a schema under allOf, anyOf, oneOf or not:
// it may only constrain values, never shape them.
func nestedValueValidation(v *apiextensionsv1.JSONSchemaProps, skipAnyOf, skipAllOfAnyOf bool, pth *field.Path) field.ErrorList {
	errs := valueValidation(v, skipAnyOf, skipAllOfAnyOf, pth)
	if v.Items != nil && v.Items.Schema != nil {
		errs = append(errs, nestedValueValidation(v.Items.Schema, false, false, pth.Child("items"))...)
	}
	for _, k := range sortedKeys(v.Properties) {
		p := v.Properties[k]
		errs = append(errs, nestedValueValidation(&p, false, false, pth.Child("properties").Key(k))...)
	}
	forbid := func(cond bool, child, msg string) {
		if cond {
			errs = append(errs, field.Forbidden(pth.Child(child), msg))
		}
	}
	forbid(v.Type != "", "type", "must be empty to be structural")
	forbid(v.AdditionalProperties != nil, "additionalProperties", "must be undefined to be structural")
	forbid(v.Default != nil, "default", "must be undefined to be structural")
	forbid(v.Title != "", "title", "must be empty to be structural")
	forbid(v.Description != "", "description", "must be empty to be structural")
	forbid(v.Nullable, "nullable", "must be false to be structural")
	forbid(v.XPreserveUnknownFields != nil && *v.XPreserveUnknownFields, "x-kubernetes-preserve-unknown-fields", "must be false to be structural")
	forbid(v.XEmbeddedResource, "x-kubernetes-embedded-resource", "must be false to be structural")
	forbid(v.XIntOrString, "x-kubernetes-int-or-string", "must be false to be structural")
	forbid(len(v.XListMapKeys) > 0, "x-kubernetes-list-map-keys", "must be empty to be structural")
	forbid(v.XListType != nil, "x-kubernetes-list-type", "must be undefined to be structural")
	forbid(v.XMapType != nil, "x-kubernetes-map-type", "must be undefined to be structural")
	forbid(len(v.XValidations) > 0, "x-kubernetes-validations", "must be empty to be structural")
	if _, ok := v.Properties["metadata"]; ok {
		errs = append(errs, field.Forbidden(pth.Child("properties").Key("metadata"), "must not be specified in a nested context"))
	}
	return errs
}

// completeness checks that every field a value validation (under allOf,
// anyOf, oneOf, not) speaks of is declared in the skeleton s.
func completeness(v, s *apiextensionsv1.JSONSchemaProps, sPath, vPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	nested := func(n *apiextensionsv1.JSONSchemaProps, np *field.Path) {
		errs = append(errs, nestedCompleteness(n, s, sPath, np)...)
	}
	if v.Not != nil {
		nested(v.Not, vPath.Child("not"))
	}
	for i := range v.AllOf {
		nested(&v.AllOf[i], vPath.Child("allOf").Index(i))
	}
	for i := range v.AnyOf {
		nested(&v.AnyOf[i], vPath.Child("anyOf").Index(i))
	}
	for i := range v.OneOf {
		nested(&v.OneOf[i], vPath.Child("oneOf").Index(i))
	}
	// The skeleton's own children carry their own value validations.
	if v == s {
		for _, k := range sortedKeys(s.Properties) {
			p := s.Properties[k]
			errs = append(errs, completeness(&p, &p, sPath.Child("properties").Key(k), sPath.Child("properties").Key(k))...)
		}
		if s.Items != nil && s.Items.Schema != nil {
			errs = append(errs, completeness(s.Items.Schema, s.Items.Schema, sPath.Child("items"), sPath.Child("items"))...)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			ap := s.AdditionalProperties.Schema
			errs = append(errs, completeness(ap, ap, sPath.Child("additionalProperties"), sPath.Child("additionalProperties"))...)
		}
	}
	return errs
}

func nestedCompleteness(v, s *apiextensionsv1.JSONSchemaProps, sPath, vPath *field.Path) field.ErrorList {
	if s == nil {
		return field.ErrorList{field.Required(sPath, fmt.Sprintf("because it is defined in %s", vPath.String()))}
	}
	errs := completeness(v, s, sPath, vPath)
	if v.Items != nil && v.Items.Schema != nil {
		var si *apiextensionsv1.JSONSchemaProps
		if s.Items != nil {
			si = s.Items.Schema
		}
		errs = append(errs, nestedCompleteness(v.Items.Schema, si, sPath.Child("items"), vPath.Child("items"))...)
	}
	for _, k := range sortedKeys(v.Properties) {
		vf := v.Properties[k]
		sf, ok := s.Properties[k]
		if !ok {
			errs = append(errs, field.Required(sPath.Child("properties").Key(k), fmt.Sprintf("because it is defined in %s", vPath.Child("properties").Key(k))))
			continue
		}
		errs = append(errs, nestedCompleteness(&vf, &sf, sPath.Child("properties").Key(k), vPath.Child("properties").Key(k))...)
	}
	return errs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
