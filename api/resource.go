// Package api is minictl's resource catalogue: for every kind the API server
// serves, one Resource entry says where it lives on the wire (group, version,
// plural, scope), which subresources it has, and how its objects are
// defaulted, validated, selected and printed (table.go: the columns of
// `kubectl get`). The wire types themselves are
// k8s.io/api's; this package adds only what kube-apiserver's registry adds.
//
// Adding a resource to minictl is adding one entry to the table in
// registry.go. The API server serves a Catalogue (catalogue.go),
// Resources() unless it is given another, and needs nothing else; the
// controllers that handle every kind (the garbage collector, the quota and
// namespace controllers) learn it from the server's discovery. A kind
// without a Go type (NewUnstructured) is served and handled as well.
package api

import (
	"context"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/minictl/minictl/api/crd"
)

// Object is what every served kind is: a k8s.io/api struct pointer, which has
// ObjectMeta (metav1.Object) and TypeMeta (runtime.Object).
type Object interface {
	metav1.Object
	runtime.Object
}

// Resource describes one served resource. The functions are optional; a nil
// function means "nothing to do" for that kind.
type Resource struct {
	Group      string // "" for the core group
	Version    string
	Kind       string
	ListKind   string // "" means Kind + "List"
	Plural     string // the path segment: "pods"
	Singular   string // "pod"
	Namespaced bool
	ShortNames []string
	Categories []string
	// Subresources lists the served subresources: "status", "scale",
	// "binding", "finalize", and a pod's connections ("attach", "exec",
	// "portforward", "proxy", which the API server refuses: its containers
	// are simulated).
	Subresources []string

	// New returns a new, empty object of the Go type that is stored.
	New func() Object

	// CreateOnly marks a kind that is created and answered, never stored:
	// a review (TokenReview, SubjectAccessReview), whose create returns
	// the object sent with its status filled in, as kube-apiserver's
	// Creater-only storages do. It has no etcd key, no watch cache and no
	// verb but create, and discovery says so: the controllers that handle
	// every kind (garbage collector, quota, namespace) pass it by, as they
	// ask for verbs it lacks.
	CreateOnly bool

	// ReadOnly marks a kind the API server reads from elsewhere and never
	// stores: the resource metrics (metrics.k8s.io), which it answers from
	// its metrics server. It has no etcd key, no watch cache and no verb
	// but get and list, and discovery says so.
	ReadOnly bool

	// Default fills in the fields Kubernetes defaults for this kind.
	Default func(obj Object)
	// Validate checks an object about to be created or updated, apart from
	// its ObjectMeta, which the API server validates for every kind.
	Validate func(obj Object) field.ErrorList
	// ValidateUpdate checks what may not change between old and obj
	// (immutable fields), beyond what Validate checks.
	ValidateUpdate func(obj, old Object) field.ErrorList
	// PrepareForCreate resets what a client may not set on create
	// (usually status). PrepareForUpdate carries over, from old, what a
	// main-resource update may not change (usually status).
	PrepareForCreate func(obj Object)
	PrepareForUpdate func(obj, old Object)
	// PrepareForStatusUpdate resets what a write to the status
	// subresource may not change beyond what every kind keeps (see
	// PrepareStatusUpdate): the pod's owner references, the Deployment's
	// labels, all the metadata of a custom object or an admission policy.
	// nil: nothing more.
	PrepareForStatusUpdate func(obj, old Object)
	// SelectableFields returns the field set a fieldSelector is matched
	// against, beyond metadata.name and metadata.namespace, which every
	// kind has.
	SelectableFields func(obj Object) fields.Set
	// FieldLabels lists the keys SelectableFields produces: the field
	// labels a fieldSelector may name beyond metadata.name and
	// metadata.namespace. See FieldLabelSupported.
	FieldLabels []string

	// ValidateObject, for a kind whose rules see an update's old object
	// as a whole (a custom resource's schema and its transition rules),
	// checks obj on create (old nil) and update, instead of a Validate and
	// ValidateUpdate pair.
	ValidateObject func(obj, old Object) field.ErrorList

	// Scale reads and writes the replicas behind the scale subresource;
	// nil for kinds without one.
	Scale *Scale

	// Storage is the resource as its objects are stored, when that is not
	// this one: a custom resource served at several versions stores every
	// object once, in its storage version, under one key prefix; the entry
	// of every other version points at the storage version's (which need
	// not be served itself). The API server converts between the two
	// (conversion.go), and keeps one watch cache for all of them. nil
	// means the resource is stored as it is served.
	Storage *Resource
	// Convert, when set, converts objects between the versions of the
	// resource's group: it returns objs in the apiVersion to
	// ("group/version"), in order, and may fail. nil is the None
	// strategy, where only apiVersion changes. The API server sets it, on
	// every version of a custom resource whose definition converts by
	// webhook, which this package does not call.
	Convert func(ctx context.Context, objs []*unstructured.Unstructured, to string) ([]*unstructured.Unstructured, error)
	// Schema, for a custom resource, prunes the fields its objects may not
	// have as they are decoded (package crd); Default then fills in its
	// defaults. ReadDefaults applies the storage version's Default to
	// objects read from storage too, before they are converted, as
	// kube-apiserver does for custom resources.
	Schema       *crd.Schema
	ReadDefaults bool
	// OpenAPISchema, for a custom resource, is its version's OpenAPI v3
	// schema as JSON: what OpenAPI documents publish for its kind.
	OpenAPISchema map[string]any

	// ValidateName checks metadata.name (prefix false) and
	// metadata.generateName (prefix true). nil means a DNS-1123 subdomain,
	// which is what most kinds require.
	ValidateName apivalidation.ValidateNameFunc

	// OrphansByDefault: a delete that names no propagation policy orphans
	// the object's dependents (the "orphan" finalizer), unless the object
	// already carries "foregroundDeletion". kube-apiserver keeps this
	// default for v1 ReplicationControllers and batch/v1 Jobs, for
	// backwards compatibility; every other kind's dependents are deleted
	// in the background. kubectl delete names a policy (Background) and so
	// cascades either way.
	OrphansByDefault bool
	// OrphanWarning, if set, is the warning a delete or deletecollection
	// that names no propagation policy is answered with (kube-apiserver's
	// for Jobs, whose pods such a delete leaves behind).
	OrphanWarning string
	// DeleteFinalizers are added to an object when it is first deleted, so
	// that the server's own controllers finish with it before it goes: a
	// CustomResourceDefinition's cleanup finalizer, as kube-apiserver's
	// definition storage adds it, holds the definition until its objects
	// are deleted.
	DeleteFinalizers []string

	// Table is how the kind prints in `kubectl get` (see table.go); nil
	// means NAME and CREATED AT, kube-apiserver's default.
	Table *Table

	// TypeConverter types the kind's objects for server-side apply and
	// managedFields (list types, map keys, atomic structs). nil means the
	// API server's own: from the Go type's schema for a kind that has
	// one, deduced from each object (everything atomic) for an
	// unstructured kind. A custom resource's is crd.TypeConverter's.
	TypeConverter managedfields.TypeConverter
}

// ListKindName is the kind of r's lists: "PodList".
func (r *Resource) ListKindName() string {
	if r.ListKind != "" {
		return r.ListKind
	}
	return r.Kind + "List"
}

// StoredAs is the resource as its objects are stored: Storage, or r.
func (r *Resource) StoredAs() *Resource {
	if r.Storage != nil {
		return r.Storage
	}
	return r
}

// GroupVersion returns the resource's group and version.
func (r *Resource) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: r.Group, Version: r.Version}
}

// APIVersion returns the apiVersion objects of this resource carry: "v1" or
// "apps/v1".
func (r *Resource) APIVersion() string { return r.GroupVersion().String() }

// GroupResource returns the group and plural, as Kubernetes errors name a
// resource ("pods", "deployments.apps").
func (r *Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.Group, Resource: r.Plural}
}

// HasSubresource reports whether sub is served for this resource.
func (r *Resource) HasSubresource(sub string) bool {
	for _, s := range r.Subresources {
		if s == sub {
			return true
		}
	}
	return false
}

// NewObject returns a new object with its TypeMeta filled in.
func (r *Resource) NewObject() Object {
	obj := r.New()
	obj.GetObjectKind().SetGroupVersionKind(r.GroupVersion().WithKind(r.Kind))
	return obj
}

// Fields returns the full field set of obj for fieldSelector matching.
func (r *Resource) Fields(obj Object) fields.Set {
	var set fields.Set
	if r.SelectableFields != nil {
		set = r.SelectableFields(obj)
	}
	if set == nil {
		set = fields.Set{}
	}
	set["metadata.name"] = obj.GetName()
	if r.Namespaced {
		set["metadata.namespace"] = obj.GetNamespace()
	}
	return set
}
