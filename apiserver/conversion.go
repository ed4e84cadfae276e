package apiserver

import (
	"context"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/minictl/minictl/api"
)

// Conversion between the versions a custom resource is served at and the
// one it is stored in (api.Resource.Storage). Objects are stored once, in
// the storage version; every served version reads and writes the same
// keys, and one watch cache holds them for all versions (watchcache.go:
// each cached object carries its form at every other served version).
// These are the only places objects cross versions:
//
//   - a write through another version converts the object to the storage
//     version before it is encoded (resourceStore.encode);
//   - a read from etcd decodes the stored form (converted to the storage
//     version if it was stored in another, before the definition's storage
//     version changed), applies the storage version's defaults, then
//     converts (fromStored, then resourceStore.decode);
//   - the watch cache converts each object it takes in to every other
//     served version, once, so that watchers and lists of those versions
//     are served from memory like any other.
//
// As in kube-apiserver, a converted object is then pruned with the target
// version's schema, and a definition's strategy says who converts: None
// rewrites apiVersion (kube's nopConverter), Webhook asks the definition's
// conversion webhook.

// converter converts the objects of one custom resource between its
// versions. convert returns objs in apiVersion to (group/version), in
// order; objs are not changed.
type converter interface {
	convert(ctx context.Context, objs []*unstructured.Unstructured, to string) ([]*unstructured.Unstructured, error)
}

// noneConverter is the None strategy: only apiVersion changes.
type noneConverter struct{}

func (noneConverter) convert(_ context.Context, objs []*unstructured.Unstructured, to string) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, u := range objs {
		c := &unstructured.Unstructured{Object: maps.Clone(u.Object)}
		c.SetAPIVersion(to)
		out[i] = c
	}
	return out, nil
}

// converterByFunc is a converter that api.Resource.Convert is.
type converterByFunc func(ctx context.Context, objs []*unstructured.Unstructured, to string) ([]*unstructured.Unstructured, error)

func (f converterByFunc) convert(ctx context.Context, objs []*unstructured.Unstructured, to string) ([]*unstructured.Unstructured, error) {
	return f(ctx, objs, to)
}

// converterFor returns the converter of res's objects, res being the
// resource as stored: its Convert (a definition's webhook,
// conversion_webhook.go), else the None strategy; nil for a built-in
// kind served at one version.
func (s *Server) converterFor(res *api.Resource) converter {
	switch {
	case res.Convert != nil:
		return converterByFunc(res.Convert)
	case res.Schema != nil:
		return noneConverter{}
	}
	return nil
}

// fromStored returns obj, as decodeFromStorage read it, as res (the
// resource as it is stored) holds it: converted from the version it was
// stored in, if that is another, then with the defaults res applies on
// read. obj is the caller's to give: it may be changed and returned.
func fromStored(ctx context.Context, conv converter, res *api.Resource, obj api.Object) (api.Object, error) {
	if obj.GetObjectKind().GroupVersionKind().GroupVersion() != res.GroupVersion() {
		var err error
		if obj, err = convertTo(ctx, conv, res, obj); err != nil {
			return nil, err
		}
	}
	if res.ReadDefaults && res.Default != nil {
		res.Default(obj)
	}
	return obj, nil
}

// convertTo returns obj, an object of res's resource at any of its
// versions, as res: converted by conv, then pruned with res's schema. obj
// is not changed; the result is a new object that shares nothing with it.
func convertTo(ctx context.Context, conv converter, res *api.Resource, obj api.Object) (api.Object, error) {
	if conv == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("%s cannot be converted to %s", obj.GetObjectKind().GroupVersionKind(), res.APIVersion()))
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		// A built-in kind served at several versions (autoscaling's
		// HorizontalPodAutoscaler) converts through its JSON form too, and
		// comes back as res's Go type.
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		u = &unstructured.Unstructured{Object: m}
	}
	// As in kube-apiserver, which converts a stored object before it
	// stamps the revision on it, a converter never sees a resourceVersion.
	rv := u.GetResourceVersion()
	if rv != "" {
		u = withoutResourceVersion(u)
	}
	out, err := conv.convert(ctx, []*unstructured.Unstructured{u}, res.APIVersion())
	if err != nil {
		if _, ok := err.(apierrors.APIStatus); !ok {
			err = apierrors.NewInternalError(err)
		}
		return nil, err
	}
	c := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(out[0].Object)}
	if res.Schema != nil {
		res.Schema.Prune(c.Object)
	}
	if rv != "" {
		c.SetResourceVersion(rv)
	}
	if typed := res.New(); !isUnstructured(typed) {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(c.Object, typed); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		return typed, nil
	}
	return c, nil
}

func isUnstructured(obj api.Object) bool {
	_, ok := obj.(*unstructured.Unstructured)
	return ok
}

// withoutResourceVersion is u without metadata.resourceVersion: a copy of
// its top level and its metadata, sharing the rest.
func withoutResourceVersion(u *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: maps.Clone(u.Object)}
	if meta, ok := u.Object["metadata"].(map[string]any); ok {
		meta = maps.Clone(meta)
		delete(meta, "resourceVersion")
		out.Object["metadata"] = meta
	}
	return out
}

// converts reports whether res is served at a version other than the one
// its objects are stored in.
func converts(res *api.Resource) bool { return res.Storage != nil }
