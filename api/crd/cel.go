package crd

import "k8s.io/apimachinery/pkg/util/validation/field"

type celRules struct{}

func compileRules(root *structural) (*celRules, error) { return nil, nil }

func (r *celRules) validate(obj, old map[string]any) field.ErrorList { return nil }
