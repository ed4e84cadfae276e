package crd

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

type celRules struct{}

func compileRules(root *structural) (*celRules, error) { return nil, nil }

func (r *celRules) validate(obj, old map[string]any) field.ErrorList { return nil }

func validateRulesCompile(p *apiextensionsv1.JSONSchemaProps, root *structural, pth *field.Path) field.ErrorList {
	return nil
}

func (r *celRules) validateAt(pth *field.Path, obj, old any) field.ErrorList { return nil }
