package api

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Catalogue is a set of resources, in the order discovery lists them: what
// one API server serves. Resources() is the catalogue minictl serves; a
// server given another one (the built-in catalogue With a kind nobody
// compiled in) serves exactly that, with no other change. The controllers
// that work on every kind (the garbage collector, the quota and namespace
// controllers) read it back from the server's discovery
// (client.ServerPreferredResources), so they handle whatever it serves.
//
// A catalogue is a value: build it before handing it out, and never modify
// it or its entries afterwards.
type Catalogue []*Resource

// With returns a new catalogue: c followed by extra. c is unchanged.
func (c Catalogue) With(extra ...*Resource) Catalogue {
	return append(slices.Clip(c), extra...)
}

// Lookup finds a resource by group, version and plural.
func (c Catalogue) Lookup(group, version, plural string) (*Resource, bool) {
	for _, r := range c {
		if r.Group == group && r.Version == version && r.Plural == plural {
			return r, true
		}
	}
	return nil, false
}

// ForKind finds the resource whose objects have kind gvk, as an
// ownerReference's apiVersion and kind name it.
func (c Catalogue) ForKind(gvk schema.GroupVersionKind) (*Resource, bool) {
	for _, r := range c {
		if r.Group == gvk.Group && r.Version == gvk.Version && r.Kind == gvk.Kind {
			return r, true
		}
	}
	return nil, false
}

// NewUnstructured is the New of a resource that has no Go type, such as a
// kind served from a definition rather than compiled in: its objects are
// unstructured.Unstructured, the JSON object held as maps. Such objects
// have metadata like every other kind, no protobuf encoding, and only the
// rules every kind has (no Default, Validate or Table of their own).
func NewUnstructured() Object { return &unstructured.Unstructured{} }

// Unstructured reports whether r's objects are unstructured (its New is
// NewUnstructured, or makes the same type).
func (r *Resource) Unstructured() bool {
	_, ok := r.New().(*unstructured.Unstructured)
	return ok
}
