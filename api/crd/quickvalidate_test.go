package crd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// The quick check never calls valid what kube-openapi's validator does
// not, and calls valid everything it does unless a float stands where an
// integer may be (which it leaves to kube-openapi): random schemas, some
// with keywords the quick check delegates, against random objects shaped
// like them, some broken.
func TestQuickValidateAgreesWithKubeOpenAPI(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var valid, invalid, delegated int
	for i := range 3000 {
		g := &schemaGen{r: r}
		s := g.schema(0)
		quick := compileQuick(s)
		full := validate.NewSchemaValidator(s, nil, "", strfmt.Default)
		for j := range 20 {
			v := g.value(s, 0)
			res := full.Validate(v)
			got, want := quick.valid(v), res.IsValid()
			if got && !want || !got && want && !hasFloat(v) {
				t.Fatalf("schema %d, object %d: quick %t, kube-openapi %t %v\nschema: %s\nobject: %#v",
					i, j, got, want, res.Errors, mustMarshal(t, s), v)
			}
			switch {
			case !want:
				invalid++
			case g.delegates:
				delegated++
			default:
				valid++
			}
		}
	}
	t.Logf("%d valid, %d valid through a delegated node, %d invalid", valid, delegated, invalid)
	if valid < 1000 || invalid < 1000 || delegated < 1000 {
		t.Errorf("too few cases of a kind: %d valid, %d delegated, %d invalid", valid, delegated, invalid)
	}
}

func mustMarshal(t *testing.T, s *spec.Schema) string {
	b, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func hasFloat(v any) bool {
	switch v := v.(type) {
	case float64:
		return true
	case map[string]any:
		for _, x := range v {
			if hasFloat(x) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if hasFloat(x) {
				return true
			}
		}
	}
	return false
}

// schemaGen makes random schemas of the shapes custom resources have, and
// values for them.
type schemaGen struct {
	r *rand.Rand
	// delegates is set once a schema uses a keyword the quick check
	// delegates.
	delegates bool
}

var genTypes = [][]string{nil, {"object"}, {"object"}, {"array"}, {"string"}, {"string"}, {"integer"}, {"number"}, {"boolean"}, {"integer", "string"}}

func (g *schemaGen) maybe(p float64) bool { return g.r.Float64() < p }

func (g *schemaGen) bound() *int64 {
	if !g.maybe(0.2) {
		return nil
	}
	n := int64(g.r.IntN(4))
	return &n
}

func (g *schemaGen) schema(depth int) *spec.Schema {
	s := &spec.Schema{}
	s.Type = genTypes[g.r.IntN(len(genTypes))]
	if depth >= 3 && s.Type != nil && (s.Type[0] == "object" || s.Type[0] == "array") {
		s.Type = spec.StringOrArray{"string"}
	}
	s.Nullable = g.maybe(0.2)
	typ := ""
	if len(s.Type) > 0 {
		typ = s.Type[0]
	}
	switch typ {
	case "object", "":
		if typ == "" && depth >= 3 {
			break
		}
		s.Properties = map[string]spec.Schema{}
		for _, name := range []string{"a", "b", "c", "d"}[:g.r.IntN(5)] {
			s.Properties[name] = *g.schema(depth + 1)
			if g.maybe(0.3) {
				s.Required = append(s.Required, name)
			}
		}
		switch {
		case g.maybe(0.2):
			s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: g.schema(depth + 1)}
		case g.maybe(0.1):
			s.AdditionalProperties = &spec.SchemaOrBool{Allows: true}
		case g.maybe(0.05):
			s.AdditionalProperties = &spec.SchemaOrBool{Allows: false}
			g.delegates = true
		}
		s.MinProperties, s.MaxProperties = g.bound(), g.bound()
	case "array":
		s.Items = &spec.SchemaOrArray{Schema: g.schema(depth + 1)}
		s.MinItems, s.MaxItems = g.bound(), g.bound()
		if g.maybe(0.1) {
			s.UniqueItems = true
			g.delegates = true
		}
	case "string":
		s.MinLength, s.MaxLength = g.bound(), g.bound()
		switch {
		case g.maybe(0.1):
			s.Pattern = "^[a-z]*$"
			g.delegates = true
		case g.maybe(0.1):
			s.Enum = []any{"a", "bb", "é"}
			g.delegates = true
		case g.maybe(0.1):
			s.Format = "email"
			g.delegates = true
		}
	case "integer", "number":
		switch {
		case g.maybe(0.1):
			s.Format = "int32"
			g.delegates = true
		case g.maybe(0.1):
			m := float64(g.r.IntN(5))
			s.Maximum = &m
			g.delegates = true
		}
	}
	if g.maybe(0.03) {
		s.AnyOf = []spec.Schema{{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}}}, {SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"integer"}}}}
		g.delegates = true
	}
	return s
}

var genStrings = []string{"", "a", "bb", "é", "ééé", "abcd", "x@example.com", "ABC"}

// value makes a value for s: mostly one of its type, sometimes of another,
// sometimes null; objects miss required fields and carry unknown ones now
// and then.
func (g *schemaGen) value(s *spec.Schema, depth int) any {
	if g.maybe(0.05) {
		return nil
	}
	typ := ""
	if len(s.Type) > 0 {
		typ = s.Type[g.r.IntN(len(s.Type))]
	}
	if g.maybe(0.05) || typ == "" {
		typ = []string{"object", "array", "string", "integer", "number", "boolean"}[g.r.IntN(6)]
		if depth >= 4 && (typ == "object" || typ == "array") {
			typ = "string"
		}
	}
	switch typ {
	case "object":
		m := map[string]any{}
		for name, p := range s.Properties {
			if g.maybe(0.8) {
				m[name] = g.value(&p, depth+1)
			}
		}
		for range g.r.IntN(3) {
			k := fmt.Sprintf("x%d", g.r.IntN(3))
			if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
				m[k] = g.value(s.AdditionalProperties.Schema, depth+1)
			} else {
				m[k] = g.value(&spec.Schema{}, depth+1)
			}
		}
		return m
	case "array":
		l := make([]any, g.r.IntN(4))
		items := &spec.Schema{}
		if s.Items != nil && s.Items.Schema != nil {
			items = s.Items.Schema
		}
		for i := range l {
			l[i] = g.value(items, depth+1)
		}
		return l
	case "string":
		return genStrings[g.r.IntN(len(genStrings))]
	case "integer":
		return []int64{0, 1, 3, 7, -1, math.MaxInt32 + 1, math.MaxInt64}[g.r.IntN(7)]
	case "number":
		return []float64{0.5, 2, -3.25, 1e20, 1e300}[g.r.IntN(5)]
	}
	return g.maybe(0.5)
}

// The quick check passes the custom objects of the harness's shape
// without asking kube-openapi; BenchmarkValidate's object too.
func TestQuickValidatePassesTypicalObjects(t *testing.T) {
	s := testSchema(t, widgetSchema)
	o := obj(t, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"default"},
		"spec":{"name":"abc","tags":["a"],"ports":[{"name":"http","port":80}],"labels":{"a":"b"},"free":{"known":{"a":"x"},"other":1},"optional":"x"},
		"status":{"ready":true}}`)
	if !s.quick.valid(o) {
		t.Errorf("quick check refuses a valid object")
	}
	if errs := s.Validate(o, nil); len(errs) != 0 {
		t.Errorf("Validate: %v", errs)
	}
	o["spec"].(map[string]any)["name"] = strings.Repeat("a", 6)
	if s.quick.valid(o) {
		t.Errorf("quick check passes a name longer than maxLength")
	}
	if errs := s.Validate(o, nil); len(errs) != 1 || errs[0].Field != "spec.name" {
		t.Errorf("Validate: %v, want one error on spec.name", errs)
	}
}
