package crd

import (
	"slices"
	"unicode/utf8"

	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// A quick check of the OpenAPI schema, for the common case: an object
// that is valid. kube-openapi's validator builds a validator for every
// property and every list item it visits, on every call (about half of a
// custom object create's allocations went there), and its errors are what
// the client reads, so it stays the judge of any object with something
// wrong. The quick check only answers "certainly valid": it walks the
// object along a tree compiled once from the same schema and checks, with
// kube-openapi's own rules, the keywords almost every schema is made of
// (type and nullable, properties, required, additionalProperties, items,
// the lengths and counts); a schema node with any other keyword (enum,
// format, pattern, bounds, allOf, ...) is checked by kube-openapi's
// validator of that node alone. Anything it finds wrong, or a value of a
// Go type JSON decoding does not make, sends the whole object to
// kube-openapi's validator, so errors read exactly as before.
//
// Delegating a node is exact because kube-openapi's result for an object
// is the union of its checks at each node: a subtree is valid alone if and
// only if it is valid in place (the path only names the errors).
// quickvalidate_test.go holds the two to the same answer on random
// objects and schemas.

// quickNode is one schema node compiled for the quick check.
type quickNode struct {
	// delegate, when set, checks values at this node instead: the node
	// has a keyword the quick check does not decide.
	delegate *validate.SchemaValidator

	types    []string // the node's type list; empty: any type
	nullable bool

	properties map[string]*quickNode
	required   []string
	// additional checks the values of keys not in properties; nil when
	// additionalProperties is absent or true, which accept any.
	additional                   *quickNode
	minProperties, maxProperties *int64

	items              *quickNode // nil: items unchecked
	minItems, maxItems *int64

	minLength, maxLength *int64
}

// compileQuick compiles s, a schema kube-openapi's validator accepts.
func compileQuick(s *spec.Schema) *quickNode {
	if s == nil {
		return nil
	}
	if !quickDecides(s) {
		return &quickNode{delegate: validate.NewSchemaValidator(s, nil, "", strfmt.Default)}
	}
	n := &quickNode{
		types: s.Type, nullable: s.Nullable, required: s.Required,
		minProperties: s.MinProperties, maxProperties: s.MaxProperties,
		minItems: s.MinItems, maxItems: s.MaxItems,
		minLength: s.MinLength, maxLength: s.MaxLength,
	}
	if len(s.Properties) > 0 {
		n.properties = make(map[string]*quickNode, len(s.Properties))
		for name, p := range s.Properties {
			n.properties[name] = compileQuick(&p)
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		n.additional = compileQuick(s.AdditionalProperties.Schema)
	}
	if s.Items != nil && s.Items.Schema != nil {
		n.items = compileQuick(s.Items.Schema)
	}
	return n
}

// quickDecides reports whether the quick check decides a node of schema
// s on its own: s uses no keyword but those it checks. (Extensions, the
// description and defaults are not read by kube-openapi's validator.)
func quickDecides(s *spec.Schema) bool {
	return s.Ref.String() == "" && s.Format == "" && len(s.Enum) == 0 && s.Pattern == "" &&
		s.Maximum == nil && s.Minimum == nil && s.MultipleOf == nil && !s.UniqueItems &&
		len(s.AllOf) == 0 && len(s.AnyOf) == 0 && len(s.OneOf) == 0 && s.Not == nil &&
		len(s.Dependencies) == 0 && len(s.PatternProperties) == 0 &&
		(s.AdditionalProperties == nil || s.AdditionalProperties.Allows) &&
		(s.Items == nil || len(s.Items.Schemas) == 0) && s.AdditionalItems == nil
}

// valid reports whether kube-openapi's validator finds nothing wrong with
// v at this node; false means "perhaps not": ask it.
func (n *quickNode) valid(v any) bool {
	if n == nil {
		return true
	}
	if n.delegate != nil {
		return n.delegate.Validate(v).IsValid()
	}
	switch v := v.(type) {
	case nil:
		// Only the type (and enum) validators look at a null.
		return len(n.types) == 0 || n.nullable || slices.Contains(n.types, "null")
	case map[string]any:
		return n.hasType("object") && n.validObject(v)
	case []any:
		if !n.hasType("array") || !within(int64(len(v)), n.minItems, n.maxItems) {
			return false
		}
		if n.items != nil {
			for _, it := range v {
				if !n.items.valid(it) {
					return false
				}
			}
		}
		return true
	case string:
		if !n.hasType("string") {
			return false
		}
		if n.minLength == nil && n.maxLength == nil {
			return true
		}
		return within(int64(utf8.RuneCountInString(v)), n.minLength, n.maxLength)
	case bool:
		return n.hasType("boolean")
	case int64:
		// A whole number is an integer, and also a number; its range
		// (int64, as kube-openapi checks an integer without a format)
		// holds by its Go type.
		return n.hasType("integer") || n.hasType("number")
	case float64:
		// A float that is a whole number may pass as an integer, within
		// limits kube-openapi decides: ask it, unless the type is number
		// (without a format, kube-openapi checks no range of a number).
		return len(n.types) == 0 || slices.Contains(n.types, "number")
	}
	// JSON decoding makes no other type; kube-openapi decides what one
	// means.
	return false
}

// hasType reports whether the node's type list admits a value of JSON
// type t (an empty list admits every type).
func (n *quickNode) hasType(t string) bool {
	return len(n.types) == 0 || slices.Contains(n.types, t)
}

func (n *quickNode) validObject(m map[string]any) bool {
	if !within(int64(len(m)), n.minProperties, n.maxProperties) {
		return false
	}
	for _, name := range n.required {
		if _, ok := m[name]; !ok {
			return false
		}
	}
	for k, v := range m {
		p, known := n.properties[k]
		switch {
		case known:
			if !p.valid(v) {
				return false
			}
		case n.additional != nil:
			if !n.additional.valid(v) {
				return false
			}
		}
	}
	return true
}

// within reports whether x is within the bounds that are set.
func within(x int64, lo, hi *int64) bool {
	return (lo == nil || x >= *lo) && (hi == nil || x <= *hi)
}
