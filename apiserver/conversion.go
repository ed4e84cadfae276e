package apiserver

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
)

// Conversion between the version a custom resource is served at and the
// one it is stored in (api.Resource.StorageVersion). Objects are stored
// once, in the storage version; every served version reads and writes the
// same keys. This is the one place objects cross versions, both ways.
//
// minictl converts with the None strategy: only apiVersion changes, as
// kube-apiserver's nopConverter does. A definition asking for the Webhook
// strategy is accepted and, until a webhook caller is wired in here,
// converted the same way.

// toStorage returns obj as it is stored: obj itself when res stores its
// own version, else a shallow copy in the storage version (obj is not
// changed).
func toStorage(res *api.Resource, obj api.Object) api.Object {
	if !converts(res) {
		return obj
	}
	u := obj.(*unstructured.Unstructured)
	out := &unstructured.Unstructured{Object: make(map[string]any, len(u.Object))}
	for k, v := range u.Object {
		out.Object[k] = v
	}
	out.SetAPIVersion(schema.GroupVersion{Group: res.Group, Version: res.StorageVersion}.String())
	return out
}

// fromStorage turns obj, as read from storage, into res's served version,
// and applies the defaults res applies on read.
func fromStorage(res *api.Resource, obj api.Object) {
	setTypeMeta(res, obj) // the None strategy: the served apiVersion
	if res.ReadDefaults && res.Default != nil {
		res.Default(obj)
	}
}

// converts reports whether res is served at a version other than the one
// its objects are stored in.
func converts(res *api.Resource) bool {
	return res.StorageVersion != "" && res.StorageVersion != res.Version
}
