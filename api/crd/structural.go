package crd

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// maxSchemaDepth bounds how deeply a schema may nest (properties, items,
// additionalProperties and the value validations inside them). Every walk
// over a schema is recursive, so the bound is what keeps a hostile
// definition from exhausting the stack; real schemas stay far below it.
const maxSchemaDepth = 64

// structural is the part of a schema that says what an object looks like,
// the skeleton that pruning, defaulting, CEL and server-side apply walk.
// The value validations (pattern, enum, minimum, ...) stay in the OpenAPI
// schema that kube-openapi's validator checks.
type structural struct {
	Type                 string
	Properties           map[string]*structural
	AdditionalProperties *structural // nil: no additional properties declared
	AdditionalAny        bool        // additionalProperties: true without a schema
	Items                *structural

	Default  any // decoded JSON; nil when there is none
	Nullable bool
	Format   string
	Enum     []any
	Required []string

	MaxLength, MaxItems, MaxProperties *int64

	PreserveUnknownFields bool
	EmbeddedResource      bool
	IntOrString           bool
	ListType              string
	ListMapKeys           []string
	MapType               string
	Validations           apiextensionsv1.ValidationRules

	// noEmbeddedBelow and noListsBelow, set by markSubtrees, say that
	// neither this node nor any below it is an embedded resource, or a
	// list of type set or map: validateEmbedded and validateLists, which
	// look for nothing else, need not walk the values here. Unset (a
	// skeleton not marked), the walks go everywhere.
	noEmbeddedBelow, noListsBelow bool
}

// markSubtrees sets noEmbeddedBelow and noListsBelow in s and every node
// below it, and reports whether s's subtree has an embedded resource and
// whether it has a set or map list.
func markSubtrees(s *structural) (embedded, lists bool) {
	if s == nil {
		return false, false
	}
	embedded = s.EmbeddedResource
	lists = s.ListType == "set" || s.ListType == "map"
	children := []*structural{s.AdditionalProperties, s.Items}
	for _, p := range s.Properties {
		children = append(children, p)
	}
	for _, c := range children {
		e, l := markSubtrees(c)
		embedded, lists = embedded || e, lists || l
	}
	s.noEmbeddedBelow, s.noListsBelow = !embedded, !lists
	return embedded, lists
}

// errTooDeep is returned by newStructural for a schema nested deeper than
// maxSchemaDepth.
var errTooDeep = fmt.Errorf("must not be nested more than %d levels deep", maxSchemaDepth)

// newStructural reads the skeleton of p. Value validations under allOf,
// anyOf, oneOf and not add nothing to it (the structural rules forbid them
// to declare types).
func newStructural(p *apiextensionsv1.JSONSchemaProps) (*structural, error) {
	return buildStructural(p, 0)
}

func buildStructural(p *apiextensionsv1.JSONSchemaProps, depth int) (*structural, error) {
	if p == nil {
		return nil, nil
	}
	if depth > maxSchemaDepth {
		return nil, errTooDeep
	}
	s := &structural{
		Type:             p.Type,
		Nullable:         p.Nullable,
		Format:           p.Format,
		Required:         p.Required,
		MaxLength:        p.MaxLength,
		MaxItems:         p.MaxItems,
		MaxProperties:    p.MaxProperties,
		EmbeddedResource: p.XEmbeddedResource,
		IntOrString:      p.XIntOrString,
		ListMapKeys:      p.XListMapKeys,
		Validations:      p.XValidations,
	}
	if p.XPreserveUnknownFields != nil {
		s.PreserveUnknownFields = *p.XPreserveUnknownFields
	}
	if p.XListType != nil {
		s.ListType = *p.XListType
	}
	if p.XMapType != nil {
		s.MapType = *p.XMapType
	}
	var err error
	if p.Default != nil {
		if s.Default, err = decodeJSON(p.Default); err != nil {
			return nil, fmt.Errorf("default: %w", err)
		}
	}
	for _, e := range p.Enum {
		v, err := decodeJSON(&e)
		if err != nil {
			return nil, fmt.Errorf("enum: %w", err)
		}
		s.Enum = append(s.Enum, v)
	}
	if len(p.Properties) > 0 {
		s.Properties = make(map[string]*structural, len(p.Properties))
		for k, v := range p.Properties {
			if s.Properties[k], err = buildStructural(&v, depth+1); err != nil {
				return nil, err
			}
		}
	}
	if ap := p.AdditionalProperties; ap != nil {
		if ap.Schema != nil {
			if s.AdditionalProperties, err = buildStructural(ap.Schema, depth+1); err != nil {
				return nil, err
			}
		} else if ap.Allows {
			s.AdditionalAny = true
		}
	}
	if p.Items != nil && p.Items.Schema != nil {
		if s.Items, err = buildStructural(p.Items.Schema, depth+1); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// decodeJSON decodes a schema's literal (default, enum value) the way
// custom objects are decoded: integers as int64, other numbers as float64.
func decodeJSON(j *apiextensionsv1.JSON) (any, error) {
	if j == nil || len(j.Raw) == 0 {
		return nil, nil
	}
	return decodeValue(j.Raw)
}

// decodeValue decodes raw JSON into the unstructured form the API server
// hands to this package (apimachinery's: integers as int64).
func decodeValue(raw []byte) (any, error) {
	var v any
	if err := utiljson.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// withEmbedded returns s marked as an embedded resource, which is how the
// root of a custom object is treated: apiVersion, kind and metadata belong
// to it whatever the schema says.
func (s *structural) withEmbedded() *structural {
	if s == nil {
		return &structural{EmbeddedResource: true}
	}
	if s.EmbeddedResource {
		return s
	}
	c := *s
	c.EmbeddedResource = true
	return &c
}
