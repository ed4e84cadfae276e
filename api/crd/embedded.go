package crd

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateEmbedded checks every x-kubernetes-embedded-resource below the
// root: apiVersion and kind are set and well formed, and the metadata is
// valid object metadata (names as path segments, as kube checks them).
func validateEmbedded(pth *field.Path, x any, s *structural) field.ErrorList {
	if s == nil || s.noEmbeddedBelow {
		return nil
	}
	var errs field.ErrorList
	switch x := x.(type) {
	case map[string]any:
		if s.EmbeddedResource {
			errs = append(errs, validateEmbeddedResource(pth, x)...)
		}
		for k, v := range x {
			if prop, ok := s.Properties[k]; ok {
				errs = append(errs, validateEmbedded(pth.Child(k), v, prop)...)
			} else if s.AdditionalProperties != nil {
				errs = append(errs, validateEmbedded(pth.Key(k), v, s.AdditionalProperties)...)
			}
		}
	case []any:
		for i, v := range x {
			errs = append(errs, validateEmbedded(pth.Index(i), v, s.Items)...)
		}
	}
	return errs
}

func validateEmbeddedResource(pth *field.Path, x map[string]any) field.ErrorList {
	var errs field.ErrorList
	if _, found := x["apiVersion"]; !found {
		errs = append(errs, field.Required(pth.Child("apiVersion"), ""))
	}
	if _, found := x["kind"]; !found {
		errs = append(errs, field.Required(pth.Child("kind"), ""))
	}
	if v, found := x["apiVersion"]; found {
		if apiVersion, ok := v.(string); !ok {
			errs = append(errs, field.Invalid(pth.Child("apiVersion"), v, "must be a string"))
		} else if apiVersion == "" {
			errs = append(errs, field.Invalid(pth.Child("apiVersion"), apiVersion, "must not be empty"))
		} else if _, err := schema.ParseGroupVersion(apiVersion); err != nil {
			errs = append(errs, field.Invalid(pth.Child("apiVersion"), apiVersion, err.Error()))
		}
	}
	if v, found := x["kind"]; found {
		if kind, ok := v.(string); !ok {
			errs = append(errs, field.Invalid(pth.Child("kind"), v, "must be a string"))
		} else if kind == "" {
			errs = append(errs, field.Invalid(pth.Child("kind"), kind, "must not be empty"))
		} else if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(kind)); len(msgs) > 0 {
			errs = append(errs, field.Invalid(pth.Child("kind"), kind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
		}
	}
	if v, found := x["metadata"]; found {
		meta, err := objectMeta(v)
		if err != nil {
			return append(errs, field.Invalid(pth.Child("metadata"), v, err.Error()))
		}
		if meta.Name == "" {
			meta.Name = "fakename" // an embedded object need not be named
		}
		errs = append(errs, metavalidation.ValidateObjectMeta(meta, meta.Namespace != "", pathSegmentName, pth.Child("metadata"))...)
	}
	return errs
}

func pathSegmentName(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}

// objectMeta decodes unstructured metadata into ObjectMeta.
func objectMeta(v any) (*metav1.ObjectMeta, error) {
	raw, err := utiljson.Marshal(v)
	if err != nil {
		return nil, err
	}
	meta := &metav1.ObjectMeta{}
	if err := utiljson.Unmarshal(raw, meta); err != nil {
		return nil, err
	}
	return meta, nil
}
