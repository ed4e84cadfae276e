package crd

import "k8s.io/apimachinery/pkg/runtime"

// Default sets the schema's defaults in obj where a field is missing, or
// is null where the schema does not allow null, inside objects, maps
// (additionalProperties) and array items alike, top-down so that a
// defaulted object gets its own fields' defaults. Nulls the schema does not
// allow and has no default for are dropped first, as kube-apiserver does
// when it decodes a custom object. Defaults are deep-copied into obj.
func (s *Schema) Default(obj map[string]any) {
	pruneNulls(obj, s.root)
	applyDefaults(obj, s.root)
}

func isNonNullableNull(x any, s *structural) bool {
	return x == nil && s != nil && !s.Nullable
}

func fieldSchema(s *structural, k string) *structural {
	if s == nil {
		return nil
	}
	if p, ok := s.Properties[k]; ok {
		return p
	}
	return s.AdditionalProperties
}

// pruneNulls drops null fields whose schema neither allows null nor has a
// default to put in their place.
func pruneNulls(x any, s *structural) {
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			fs := fieldSchema(s, k)
			if isNonNullableNull(v, fs) && fs.Default == nil {
				delete(x, k)
				continue
			}
			pruneNulls(v, fs)
		}
	case []any:
		var items *structural
		if s != nil {
			items = s.Items
		}
		for _, v := range x {
			pruneNulls(v, items)
		}
	}
}

func applyDefaults(x any, s *structural) {
	if s == nil {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		for k, prop := range s.Properties {
			if prop.Default == nil {
				continue
			}
			if v, found := x[k]; !found || isNonNullableNull(v, prop) {
				x[k] = runtime.DeepCopyJSONValue(prop.Default)
			}
		}
		for k, v := range x {
			if prop, found := s.Properties[k]; found {
				applyDefaults(v, prop)
			} else if ap := s.AdditionalProperties; ap != nil {
				if isNonNullableNull(v, ap) && ap.Default != nil {
					x[k] = runtime.DeepCopyJSONValue(ap.Default)
				}
				applyDefaults(x[k], ap)
			}
		}
	case []any:
		for i := range x {
			if isNonNullableNull(x[i], s.Items) && s.Items.Default != nil {
				x[i] = runtime.DeepCopyJSONValue(s.Items.Default)
			}
			applyDefaults(x[i], s.Items)
		}
	}
}
