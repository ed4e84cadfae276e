package crd

import (
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// supportedStringFormats are the string formats kube-apiserver validates
// custom objects with (named as go-openapi normalises them, without
// dashes); any other format is ignored, as kube ignores it.
var supportedStringFormats = sets.New(
	"bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac",
	"uuid", "uuid3", "uuid4", "uuid5", "isbn", "isbn10", "isbn13", "creditcard",
	"ssn", "hexcolor", "rgbcolor", "byte", "password", "date", "duration",
	"datetime", "k8sshortname", "k8slongname",
)

// supportedFormat reports whether kube-apiserver validates format for a
// value of type typ.
func supportedFormat(typ, format string) bool {
	switch typ {
	case "", "string":
		return supportedStringFormats.Has(strings.ReplaceAll(format, "-", ""))
	case "integer":
		return format == "int32" || format == "int64"
	case "number":
		return format == "float" || format == "double"
	}
	return false
}

// toOpenAPI converts a definition's schema into the form kube-openapi's
// validator takes, dropping formats kube does not validate. The depth is
// bounded by the caller having built the structural skeleton first.
func toOpenAPI(in *apiextensionsv1.JSONSchemaProps) (*spec.Schema, error) {
	out := &spec.Schema{}
	if in == nil {
		return out, nil
	}
	if err := convertProps(in, out); err != nil {
		return nil, err
	}
	return out, nil
}

func convertProps(in *apiextensionsv1.JSONSchemaProps, out *spec.Schema) error {
	out.ID = in.ID
	out.Schema = spec.SchemaURL(in.Schema)
	out.Description = in.Description
	if in.Type != "" {
		out.Type = spec.StringOrArray{in.Type}
	}
	if in.XIntOrString {
		out.AddExtension("x-kubernetes-int-or-string", true)
		out.Type = spec.StringOrArray{"integer", "string"}
	}
	out.Nullable = in.Nullable
	if supportedFormat(in.Type, in.Format) {
		out.Format = in.Format
	}
	out.Title = in.Title
	out.Maximum, out.ExclusiveMaximum = in.Maximum, in.ExclusiveMaximum
	out.Minimum, out.ExclusiveMinimum = in.Minimum, in.ExclusiveMinimum
	out.MaxLength, out.MinLength = in.MaxLength, in.MinLength
	out.Pattern = in.Pattern
	out.MaxItems, out.MinItems = in.MaxItems, in.MinItems
	out.UniqueItems = in.UniqueItems
	out.MultipleOf = in.MultipleOf
	out.MaxProperties, out.MinProperties = in.MaxProperties, in.MinProperties
	out.Required = in.Required

	var err error
	if in.Default != nil {
		if out.Default, err = decodeJSON(in.Default); err != nil {
			return err
		}
	}
	for i := range in.Enum {
		v, err := decodeJSON(&in.Enum[i])
		if err != nil {
			return err
		}
		out.Enum = append(out.Enum, v)
	}
	if out.AllOf, err = convertSlice(in.AllOf); err != nil {
		return err
	}
	if out.OneOf, err = convertSlice(in.OneOf); err != nil {
		return err
	}
	if out.AnyOf, err = convertSlice(in.AnyOf); err != nil {
		return err
	}
	if in.Not != nil {
		out.Not = &spec.Schema{}
		if err := convertProps(in.Not, out.Not); err != nil {
			return err
		}
	}
	if out.Properties, err = convertMap(in.Properties); err != nil {
		return err
	}
	if out.PatternProperties, err = convertMap(in.PatternProperties); err != nil {
		return err
	}
	if in.AdditionalProperties != nil {
		out.AdditionalProperties = &spec.SchemaOrBool{Allows: in.AdditionalProperties.Allows}
		if in.AdditionalProperties.Schema != nil {
			out.AdditionalProperties.Schema = &spec.Schema{}
			if err := convertProps(in.AdditionalProperties.Schema, out.AdditionalProperties.Schema); err != nil {
				return err
			}
		}
	}
	if in.Items != nil {
		out.Items = &spec.SchemaOrArray{}
		if in.Items.Schema != nil {
			out.Items.Schema = &spec.Schema{}
			if err := convertProps(in.Items.Schema, out.Items.Schema); err != nil {
				return err
			}
		}
		if out.Items.Schemas, err = convertSlice(in.Items.JSONSchemas); err != nil {
			return err
		}
	}
	if in.XPreserveUnknownFields != nil {
		out.AddExtension("x-kubernetes-preserve-unknown-fields", *in.XPreserveUnknownFields)
	}
	if in.XEmbeddedResource {
		out.AddExtension("x-kubernetes-embedded-resource", true)
	}
	if len(in.XListMapKeys) != 0 {
		keys := make([]any, len(in.XListMapKeys))
		for i, k := range in.XListMapKeys {
			keys[i] = k
		}
		out.AddExtension("x-kubernetes-list-map-keys", keys)
	}
	if in.XListType != nil {
		out.AddExtension("x-kubernetes-list-type", *in.XListType)
	}
	if in.XMapType != nil {
		out.AddExtension("x-kubernetes-map-type", *in.XMapType)
	}
	return nil
}

func convertSlice(in []apiextensionsv1.JSONSchemaProps) ([]spec.Schema, error) {
	if in == nil {
		return nil, nil
	}
	out := make([]spec.Schema, len(in))
	for i := range in {
		if err := convertProps(&in[i], &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func convertMap(in map[string]apiextensionsv1.JSONSchemaProps) (map[string]spec.Schema, error) {
	if in == nil {
		return nil, nil
	}
	out := make(map[string]spec.Schema, len(in))
	for k, v := range in {
		var s spec.Schema
		if err := convertProps(&v, &s); err != nil {
			return nil, err
		}
		out[k] = s
	}
	return out, nil
}
