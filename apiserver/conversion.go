package apiserver

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
)

// Conversion between the version a custom resource is served at and the
// one it is stored in (api.Resource.StorageVersion). Objects are stored
// once, in the storage version; every served version reads and writes the
// same keys. This is the one place objects cross versions, both ways.
//
// A resource with no api.Resource.Convert converts with the None
// strategy: only apiVersion changes, as kube-apiserver's nopConverter
// does. One whose definition asks for the Webhook strategy has Convert
// set to its webhook's converter (conversion_webhook.go), which may fail:
// on a write nothing is stored, on a read the client gets a 500, and the
// watch cache tries the object again (see conversionError).

// toStorage returns obj as it is stored: obj itself when res stores its
// own version, else obj in the storage version (obj is not changed).
func toStorage(ctx context.Context, res *api.Resource, obj api.Object) (api.Object, error) {
	if !converts(res) {
		return obj, nil
	}
	return convert(ctx, res, obj.(*unstructured.Unstructured), res.StorageVersion)
}

// fromStorage returns obj, as read from storage, in res's served version,
// with the defaults res applies on read. obj is the caller's to give: it
// may be changed and returned.
func fromStorage(ctx context.Context, res *api.Resource, obj api.Object) (api.Object, error) {
	// An object is converted from the version it was stored in, which is
	// not always today's storage version.
	if res.Convert != nil {
		u, err := convert(ctx, res, obj.(*unstructured.Unstructured), res.Version)
		if err != nil {
			return nil, err
		}
		obj = u
	}
	setTypeMeta(res, obj) // the None strategy: the served apiVersion
	if res.ReadDefaults && res.Default != nil {
		res.Default(obj)
	}
	return obj, nil
}

// convert returns u in version of res's group, u itself if it is there:
// by res.Convert, or by rewriting apiVersion in a shallow copy.
func convert(ctx context.Context, res *api.Resource, u *unstructured.Unstructured, version string) (*unstructured.Unstructured, error) {
	to := schema.GroupVersion{Group: res.Group, Version: version}.String()
	if u.GetAPIVersion() == to {
		return u, nil
	}
	if res.Convert == nil {
		out := &unstructured.Unstructured{Object: make(map[string]any, len(u.Object))}
		for k, v := range u.Object {
			out.Object[k] = v
		}
		out.SetAPIVersion(to)
		return out, nil
	}
	out, err := res.Convert(ctx, []*unstructured.Unstructured{u}, to)
	if err != nil {
		return nil, &conversionError{err}
	}
	if len(out) != 1 {
		return nil, &conversionError{fmt.Errorf("converting %s to %s gave %d objects", u.GetName(), to, len(out))}
	}
	return out[0], nil
}

// conversionError is an object res.Convert did not convert: its webhook
// failed, or answered nonsense. The client gets it as a 500, as kube's
// does. Unlike a stored value that does not decode, it may succeed when
// tried again: the watch cache does not skip such an object, it waits
// for the webhook.
type conversionError struct{ err error }

func (e *conversionError) Error() string { return e.err.Error() }
func (e *conversionError) Unwrap() error { return e.err }

// converts reports whether res is served at a version other than the one
// its objects are stored in.
func converts(res *api.Resource) bool {
	return res.StorageVersion != "" && res.StorageVersion != res.Version
}
