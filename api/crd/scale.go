package crd

import (
	"fmt"
	"math"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateScale checks the fields the scale subresource reads, as
// kube-apiserver does for every write of an object that has one: the
// replicas are integers from 0 to MaxInt32 and the label selector a string.
func validateScale(obj map[string]any, scale *apiextensionsv1.CustomResourceSubresourceScale) field.ErrorList {
	if scale == nil {
		return nil
	}
	errs := validateReplicas(obj, scale.SpecReplicasPath)
	errs = append(errs, validateReplicas(obj, scale.StatusReplicasPath)...)
	if p := scale.LabelSelectorPath; p != nil {
		selector, _, err := unstructured.NestedString(obj, strings.Split(strings.TrimPrefix(*p, "."), ".")...)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(*p), selector, err.Error()))
		}
	}
	return errs
}

func validateReplicas(obj map[string]any, path string) field.ErrorList {
	replicas, _, err := unstructured.NestedInt64(obj, strings.Split(strings.TrimPrefix(path, "."), ".")...)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(field.NewPath(path), replicas, err.Error())}
	case replicas < 0:
		return field.ErrorList{field.Invalid(field.NewPath(path), replicas, "should be a non-negative integer")}
	case replicas > math.MaxInt32:
		return field.ErrorList{field.Invalid(field.NewPath(path), replicas, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32))}
	}
	return nil
}
