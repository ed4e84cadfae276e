package crd

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

var openAPITypes = sets.New("array", "boolean", "integer", "number", "object", "string")

// allowedAtRootWithStatus are the only schema fields the root of a schema
// may use when the status subresource is enabled.
var allowedAtRootWithStatus = sets.New("Description", "Type", "Format", "Title", "Maximum", "ExclusiveMaximum",
	"Minimum", "ExclusiveMinimum", "MaxLength", "MinLength", "Pattern", "MaxItems", "MinItems", "UniqueItems",
	"MultipleOf", "Required", "Items", "Properties", "ExternalDocs", "Example", "XPreserveUnknownFields", "XValidations")

// validateSchema checks one version's schema (pth is the version's
// "schema"): its depth, the root's restrictions, kube's structural rules,
// its defaults, the OpenAPI keywords a definition may use, list and map
// types, and its CEL rules, which must compile.
func validateSchema(p *apiextensionsv1.JSONSchemaProps, statusEnabled bool, pth *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	sp := pth.Child("openAPIV3Schema")
	if schemaDepth(p, 0) > maxSchemaDepth {
		return field.ErrorList{field.Invalid(sp, "", errTooDeep.Error())}
	}
	var errs field.ErrorList
	if statusEnabled {
		errs = append(errs, validateRootWithStatus(p, sp)...)
	}
	if p.Nullable {
		errs = append(errs, field.Forbidden(sp.Child("nullable"), "nullable cannot be true at the root"))
	}
	structuralErrs := validateStructural(p, sp)
	errs = append(errs, structuralErrs...)
	var root *structural
	if len(structuralErrs) == 0 {
		var err error
		if root, err = newStructural(p); err != nil {
			errs = append(errs, field.Invalid(sp, "", err.Error()))
		} else {
			errs = append(errs, validateDefaults(p, root, sp, true, false)...)
		}
	}
	sv := schemaValidator{allowDefaults: true}
	schemaErrs := sv.validate(p, sp, true)
	errs = append(errs, schemaErrs...)
	if len(errs) == 0 && root != nil {
		errs = append(errs, validateRulesCompile(p, root, sp)...)
	}
	return errs
}

func validateRootWithStatus(p *apiextensionsv1.JSONSchemaProps, pth *field.Path) field.ErrorList {
	v := reflect.ValueOf(p).Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).IsZero() {
			continue
		}
		name := v.Type().Field(i).Name
		if name == "Type" {
			if p.Type != "object" {
				return field.ErrorList{field.Invalid(pth.Child("type"), p.Type, `only "object" is allowed as the type at the root of the schema if the status subresource is enabled`)}
			}
			continue
		}
		if !allowedAtRootWithStatus.Has(name) {
			return field.ErrorList{field.Invalid(pth, name, fmt.Sprintf("only %v fields are allowed at the root of the schema if the status subresource is enabled", sets.List(allowedAtRootWithStatus)))}
		}
	}
	return nil
}

// schemaValidator walks a schema checking the OpenAPI keywords a
// definition may use; it carries what the walk learned above the current
// schema.
type schemaValidator struct {
	allowDefaults     bool
	noDefaultsReason  string
	insideMeta        bool
	uncorrelatableAt  *field.Path // where oldSelf stops being usable, if above
	uncorrelatableSet bool
}

func (v schemaValidator) forbidDefaults(reason string) schemaValidator {
	v.allowDefaults, v.noDefaultsReason = false, reason
	return v
}

func (v schemaValidator) uncorrelatable(pth *field.Path) schemaValidator {
	if !v.uncorrelatableSet {
		v.uncorrelatableAt, v.uncorrelatableSet = pth, true
	}
	return v
}

func (v schemaValidator) validate(s *apiextensionsv1.JSONSchemaProps, pth *field.Path, isRoot bool) field.ErrorList {
	if s == nil {
		return nil
	}
	errs := v.keywords(s, pth)
	if s.UniqueItems {
		errs = append(errs, field.Forbidden(pth.Child("uniqueItems"), "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
	}
	if ap := s.AdditionalProperties; ap != nil {
		if len(s.Properties) != 0 && (!ap.Allows || ap.Schema != nil) {
			errs = append(errs, field.Forbidden(pth.Child("additionalProperties"), "additionalProperties and properties are mutual exclusive"))
		}
		sub := v
		if v.insideMeta {
			sub = sub.forbidDefaults("inside additionalProperties applying to object metadata")
		}
		errs = append(errs, sub.validate(ap.Schema, pth.Child("additionalProperties"), false)...)
	}
	for _, k := range sortedKeys(s.Properties) {
		sub := v
		if s.XMapType != nil && *s.XMapType == "atomic" {
			sub = sub.uncorrelatable(pth)
		}
		if (isRoot || s.XEmbeddedResource) && metaFields[k] {
			sub.insideMeta = true
			if isRoot {
				sub = sub.forbidDefaults("in top-level " + k)
			}
		}
		p := s.Properties[k]
		errs = append(errs, sub.validate(&p, pth.Child("properties").Key(k), false)...)
	}
	errs = append(errs, v.validate(s.Not, pth.Child("not"), false)...)
	for name, list := range map[string][]apiextensionsv1.JSONSchemaProps{"allOf": s.AllOf, "oneOf": s.OneOf, "anyOf": s.AnyOf} {
		for i := range list {
			errs = append(errs, v.validate(&list[i], pth.Child(name).Index(i), false)...)
		}
	}
	if s.Items != nil {
		sub := v
		if s.XListType == nil || *s.XListType != "map" {
			sub = sub.uncorrelatable(pth)
		}
		errs = append(errs, sub.validate(s.Items.Schema, pth.Child("items"), false)...)
	}
	if s.XPreserveUnknownFields != nil && !*s.XPreserveUnknownFields {
		errs = append(errs, field.Invalid(pth.Child("x-kubernetes-preserve-unknown-fields"), false, "must be true or undefined"))
	}
	errs = append(errs, validateListAndMapTypes(s, pth)...)
	errs = append(errs, validateRuleFields(s, pth)...)
	return errs
}

// keywords checks the OpenAPI keywords kube does not support in a
// definition, and the defaults where they are not allowed.
func (v schemaValidator) keywords(s *apiextensionsv1.JSONSchemaProps, pth *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Type != "" && !openAPITypes.Has(s.Type) {
		errs = append(errs, field.NotSupported(pth.Child("type"), s.Type, sets.List(openAPITypes)))
	}
	if s.Default != nil && !v.allowDefaults {
		detail := "must not be set"
		if v.noDefaultsReason != "" {
			detail += " " + v.noDefaultsReason
		}
		errs = append(errs, field.Forbidden(pth.Child("default"), detail))
	}
	forbid := func(cond bool, child, msg string) {
		if cond {
			errs = append(errs, field.Forbidden(pth.Child(child), msg))
		}
	}
	forbid(s.ID != "", "id", "id is not supported")
	forbid(s.AdditionalItems != nil, "additionalItems", "additionalItems is not supported")
	forbid(len(s.PatternProperties) != 0, "patternProperties", "patternProperties is not supported")
	forbid(len(s.Definitions) != 0, "definitions", "definitions is not supported")
	forbid(s.Dependencies != nil, "dependencies", "dependencies is not supported")
	forbid(s.Ref != nil, "$ref", "$ref is not supported")
	forbid(s.Type == "null", "type", "type cannot be set to null, use nullable as an alternative")
	forbid(s.Items != nil && len(s.Items.JSONSchemas) != 0, "items", "items must be a schema object and not an array")
	forbid(v.insideMeta && s.XEmbeddedResource, "x-kubernetes-embedded-resource", "must not be used inside of resource meta")
	return errs
}

func validateListAndMapTypes(s *apiextensionsv1.JSONSchemaProps, pth *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.XMapType != nil {
		if s.Type == "" {
			errs = append(errs, field.Required(pth.Child("type"), "must be object if x-kubernetes-map-type is specified"))
		} else if s.Type != "object" {
			errs = append(errs, field.Invalid(pth.Child("type"), s.Type, "must be object if x-kubernetes-map-type is specified"))
		}
		if *s.XMapType != "atomic" && *s.XMapType != "granular" {
			errs = append(errs, field.NotSupported(pth.Child("x-kubernetes-map-type"), *s.XMapType, []string{"atomic", "granular"}))
		}
	}
	lt := ""
	if s.XListType != nil {
		lt = *s.XListType
	}
	var items *apiextensionsv1.JSONSchemaProps
	if s.Items != nil {
		items = s.Items.Schema
	}
	if s.XListType != nil && s.Type != "array" {
		if s.Type == "" {
			errs = append(errs, field.Required(pth.Child("type"), "must be array if x-kubernetes-list-type is specified"))
		} else {
			errs = append(errs, field.Invalid(pth.Child("type"), s.Type, "must be array if x-kubernetes-list-type is specified"))
		}
	} else if lt == "set" && items != nil {
		switch items.Type {
		case "array":
			if items.XListType != nil && *items.XListType != "atomic" {
				errs = append(errs, field.Invalid(pth.Child("items", "x-kubernetes-list-type"), *items.XListType, "must be atomic as item of a list with x-kubernetes-list-type=set"))
			}
		case "object":
			if items.XMapType == nil || *items.XMapType != "atomic" {
				errs = append(errs, field.Invalid(pth.Child("items", "x-kubernetes-map-type"), items.XMapType, "must be atomic as item of a list with x-kubernetes-list-type=set"))
			}
		}
	}
	if s.XListType != nil && lt != "atomic" && lt != "set" && lt != "map" {
		errs = append(errs, field.NotSupported(pth.Child("x-kubernetes-list-type"), lt, []string{"atomic", "set", "map"}))
	}
	if len(s.XListMapKeys) > 0 {
		if s.XListType == nil {
			errs = append(errs, field.Required(pth.Child("x-kubernetes-list-type"), "must be map if x-kubernetes-list-map-keys is non-empty"))
		} else if lt != "map" {
			errs = append(errs, field.Invalid(pth.Child("x-kubernetes-list-type"), lt, "must be map if x-kubernetes-list-map-keys is non-empty"))
		}
	}
	if lt == "map" {
		if len(s.XListMapKeys) == 0 {
			errs = append(errs, field.Required(pth.Child("x-kubernetes-list-map-keys"), "must not be empty if x-kubernetes-list-type is map"))
		}
		if s.Items == nil {
			errs = append(errs, field.Required(pth.Child("items"), "must have a schema if x-kubernetes-list-type is map"))
		} else if items == nil {
			errs = append(errs, field.Invalid(pth.Child("items"), "", "must only have a single schema if x-kubernetes-list-type is map"))
		} else if items.Type != "object" {
			errs = append(errs, field.Invalid(pth.Child("items", "type"), items.Type, "must be object if parent array's x-kubernetes-list-type is map"))
		} else {
			seen := sets.New[string]()
			for _, k := range s.XListMapKeys {
				if p, ok := items.Properties[k]; !ok {
					errs = append(errs, field.Invalid(pth.Child("x-kubernetes-list-map-keys"), s.XListMapKeys, "entries must all be names of item properties"))
				} else if p.Type == "array" || p.Type == "object" {
					errs = append(errs, field.Invalid(pth.Child("items", "properties").Key(k).Child("type"), items.Type, "must be a scalar type if parent array's x-kubernetes-list-type is map"))
				}
				if seen.Has(k) {
					errs = append(errs, field.Invalid(pth.Child("x-kubernetes-list-map-keys"), s.XListMapKeys, "must not contain duplicate entries"))
				}
				seen.Insert(k)
			}
		}
	}
	if items != nil && (lt == "set" || lt == "map") {
		if items.Nullable {
			errs = append(errs, field.Forbidden(pth.Child("items", "nullable"), "cannot be nullable when x-kubernetes-list-type is "+lt))
		}
		if lt == "map" {
			required := sets.New(items.Required...)
			for _, k := range s.XListMapKeys {
				p, ok := items.Properties[k]
				if !ok {
					continue
				}
				if !required.Has(k) && p.Default == nil {
					errs = append(errs, field.Required(pth.Child("items", "properties").Key(k).Child("default"), "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"))
				}
				if p.Nullable {
					errs = append(errs, field.Forbidden(pth.Child("items", "properties").Key(k).Child("nullable"), "this property is in x-kubernetes-list-map-keys, so it cannot be nullable"))
				}
			}
		}
	}
	return errs
}

// validateDefaults checks every default in the schema: it has no fields
// its schema would prune, and it is valid against its schema (OpenAPI,
// embedded metadata, CEL rules). Defaults inside metadata are forbidden
// elsewhere and skipped here.
func validateDefaults(p *apiextensionsv1.JSONSchemaProps, s *structural, pth *field.Path, isRoot, insideMeta bool) field.ErrorList {
	if p == nil || s == nil {
		return nil
	}
	if s.EmbeddedResource {
		insideMeta = false
	}
	var errs field.ErrorList
	if s.Default != nil && !insideMeta {
		dp := pth.Child("default")
		pruned := runtime.DeepCopyJSONValue(s.Default)
		(&pruner{}).prune("", pruned, embeddedIf(s, s.EmbeddedResource))
		if !reflect.DeepEqual(pruned, s.Default) {
			errs = append(errs, field.Invalid(dp, s.Default, "must not have unknown fields"))
		} else if e := validateEmbedded(dp, s.Default, s); len(e) > 0 {
			errs = append(errs, e...)
		} else if e := validateValue(p, s.Default, dp); len(e) > 0 {
			errs = append(errs, e...)
		} else if rules, err := compileRules(s); err == nil && rules != nil {
			errs = append(errs, rules.validateAt(dp, s.Default, nil)...)
		}
	}
	if p.Items != nil && p.Items.Schema != nil {
		errs = append(errs, validateDefaults(p.Items.Schema, s.Items, pth.Child("items"), false, insideMeta)...)
	}
	for _, k := range sortedKeys(p.Properties) {
		sub := p.Properties[k]
		meta := insideMeta || ((isRoot || s.EmbeddedResource) && metaFields[k])
		errs = append(errs, validateDefaults(&sub, s.Properties[k], pth.Child("properties").Key(k), false, meta)...)
	}
	if p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil {
		errs = append(errs, validateDefaults(p.AdditionalProperties.Schema, s.AdditionalProperties, pth.Child("additionalProperties"), false, insideMeta)...)
	}
	return errs
}

func embeddedIf(s *structural, embedded bool) *structural {
	if embedded {
		return s.withEmbedded()
	}
	return s
}

// validateValue validates one value against a (sub)schema with
// kube-openapi's validator, errors rooted at pth.
func validateValue(p *apiextensionsv1.JSONSchemaProps, value any, pth *field.Path) field.ErrorList {
	openapi, err := toOpenAPI(p)
	if err != nil {
		return field.ErrorList{field.Invalid(pth, "", err.Error())}
	}
	res := validate.NewSchemaValidator(openapi, nil, "", strfmt.Default).Validate(value)
	var errs field.ErrorList
	for _, e := range res.Errors {
		errs = append(errs, openAPIError(pth, e))
	}
	return errs
}

// validateRuleFields checks each x-kubernetes-validations entry's own
// fields (rule, message, reason, fieldPath) before any is compiled.
func validateRuleFields(s *apiextensionsv1.JSONSchemaProps, pth *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range s.XValidations {
		rp := pth.Child("x-kubernetes-validations").Index(i)
		trimmedRule := strings.TrimSpace(rule.Rule)
		trimmedMsg := strings.TrimSpace(rule.Message)
		switch {
		case trimmedRule == "":
			errs = append(errs, field.Required(rp.Child("rule"), "rule is not specified"))
		case rule.Message != "" && trimmedMsg == "":
			errs = append(errs, field.Invalid(rp.Child("message"), rule.Message, "must be non-empty if specified"))
		case strings.ContainsAny(trimmedMsg, "\n\r"):
			errs = append(errs, field.Invalid(rp.Child("message"), rule.Message, "must not contain line breaks"))
		case strings.ContainsAny(trimmedRule, "\n\r") && trimmedMsg == "":
			errs = append(errs, field.Required(rp.Child("message"), "message must be specified if rule contains line breaks"))
		}
		if rule.MessageExpression != "" && strings.TrimSpace(rule.MessageExpression) == "" {
			errs = append(errs, field.Required(rp.Child("messageExpression"), "messageExpression must be non-empty if specified"))
		}
		if rule.Reason != nil && !validationReasons.Has(string(*rule.Reason)) {
			errs = append(errs, field.NotSupported(rp.Child("reason"), *rule.Reason, sets.List(validationReasons)))
		}
		if rule.FieldPath != "" {
			if strings.TrimSpace(rule.FieldPath) == "" {
				errs = append(errs, field.Invalid(rp.Child("fieldPath"), rule.FieldPath, "must be non-empty if specified"))
			}
			if strings.ContainsAny(rule.FieldPath, "\n\r") {
				errs = append(errs, field.Invalid(rp.Child("fieldPath"), rule.FieldPath, "must not contain line breaks"))
			}
			if s2, err := newStructural(s); err == nil {
				if _, _, err := resolveFieldPath(rule.FieldPath, s2, true); err != nil {
					errs = append(errs, field.Invalid(rp.Child("fieldPath"), rule.FieldPath, "must be a valid path"))
				}
			}
		}
	}
	return errs
}

var validationReasons = sets.New(
	string(apiextensionsv1.FieldValueRequired), string(apiextensionsv1.FieldValueForbidden),
	string(apiextensionsv1.FieldValueInvalid), string(apiextensionsv1.FieldValueDuplicate),
)

// resolveFieldPath follows a rule's fieldPath (".spec.replicas",
// ".labels['a.b']", with allowIndex also ".list[0]") through the schema and
// returns its steps and the schema it lands on.
func resolveFieldPath(path string, s *structural, allowIndex bool) ([]string, *structural, error) {
	var steps []string
	rest := path
	for rest != "" {
		if s == nil {
			return nil, nil, fmt.Errorf("does not refer to a valid field")
		}
		switch rest[0] {
		case '.':
			rest = rest[1:]
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			name := rest[:end]
			rest = rest[end:]
			if name == "" {
				return nil, nil, fmt.Errorf("expected a field name after '.'")
			}
			next, err := childSchema(s, name)
			if err != nil {
				return nil, nil, err
			}
			steps, s = append(steps, name), next
		case '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, nil, fmt.Errorf("unterminated '['")
			}
			inner := rest[1:end]
			rest = rest[end+1:]
			if len(inner) >= 2 && (inner[0] == '\'' || inner[0] == '"') && inner[len(inner)-1] == inner[0] {
				name := inner[1 : len(inner)-1]
				next, err := childSchema(s, name)
				if err != nil {
					return nil, nil, err
				}
				steps, s = append(steps, name), next
				continue
			}
			if _, err := strconv.Atoi(inner); err != nil || !allowIndex || s.Items == nil {
				return nil, nil, fmt.Errorf("invalid index %q", inner)
			}
			steps, s = append(steps, "["+inner+"]"), s.Items
		default:
			return nil, nil, fmt.Errorf("expected [ or . but got: %c", rest[0])
		}
	}
	return steps, s, nil
}

func childSchema(s *structural, name string) (*structural, error) {
	if p, ok := s.Properties[name]; ok {
		return p, nil
	}
	if s.AdditionalProperties != nil {
		return s.AdditionalProperties, nil
	}
	if s.PreserveUnknownFields || s.AdditionalAny {
		return &structural{PreserveUnknownFields: true}, nil
	}
	if s.EmbeddedResource && metaFields[name] {
		return &structural{Type: "object", PreserveUnknownFields: true}, nil
	}
	return nil, fmt.Errorf("does not refer to a valid field")
}
