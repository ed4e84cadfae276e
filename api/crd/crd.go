// Package crd holds what kube-apiserver's apiextensions registry knows about
// a CustomResourceDefinition: how the definition itself is defaulted and
// validated, and, for each served version, the structural schema its custom
// objects are pruned, defaulted and validated with (OpenAPI v3 and the
// x-kubernetes-validations CEL rules). The API server serves custom objects
// as unstructured maps; this package never sees HTTP or etcd.
//
// The rules are apiextensions-apiserver's (structural schemas, pruning,
// defaulting, validation, CEL), written here on the libraries it uses
// itself: kube-openapi's validator and schemaconv, structured-merge-diff
// and cel-go (through internal/kubecel). Of apiextensions-apiserver the
// main module imports only the wire types, as it imports k8s.io/api.
//
// Properties:
//   - A definition Validate accepts always compiles: NewSchema and
//     TypeConverter succeed for each of its versions.
//   - Work is bounded by the definition and the object, never by what a
//     client can make recursive: schemas nested deeper than 64 levels
//     (counting allOf, anyOf, oneOf and not) are refused before any walk;
//     walks over an object follow its schema; every CEL evaluation stops at
//     kube's per-call cost limit, and the rules of one object share kube's
//     runtime budget.
//   - A *Schema is immutable and safe for concurrent use. Prune and Default
//     change the object they are given; Validate does not.
//   - Prune returns paths ("spec.foo"); the API server words each as
//     `unknown field "spec.foo"`, as kube-apiserver does.
//
// Files: definition.go (Default, Validate, ValidateUpdate of a definition),
// structural.go and structural_rules.go (the skeleton and kube's
// structural rules), schema_rules.go (the rest of a schema's rules),
// schema.go (Schema, NewSchema, Validate of objects), prune.go,
// default.go, openapi.go (to kube-openapi), listtype.go, embedded.go,
// ratchet.go, cel.go (x-kubernetes-validations), typeconverter.go.
package crd
