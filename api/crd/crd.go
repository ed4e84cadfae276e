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
