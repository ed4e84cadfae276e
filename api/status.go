package api

import (
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// PrepareStatusUpdate makes a write to the status subresource change what
// kube-apiserver's status strategies let it change: the status and the
// metadata (labels, annotations, finalizers; the API server carries over
// the metadata it sets itself). Everything else, the spec and any other
// field of the kind, is kept from old; then the kind's own
// PrepareForStatusUpdate resets what it guards besides.
func (r *Resource) PrepareStatusUpdate(obj, old Object) {
	keepAllButMetadataAndStatus(obj, old)
	if r.PrepareForStatusUpdate != nil {
		r.PrepareForStatusUpdate(obj, old)
	}
}

// keepAllButMetadataAndStatus copies from old into obj every top-level
// field but the type, the metadata and the status.
func keepAllButMetadataAndStatus(obj, old Object) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		o := old.(*unstructured.Unstructured)
		for k := range u.Object {
			if !statusWriteMay(k) {
				delete(u.Object, k)
			}
		}
		for k, v := range o.Object {
			if !statusWriteMay(k) {
				u.Object[k] = runtime.DeepCopyJSONValue(v)
			}
		}
		return
	}
	dst, src := reflect.ValueOf(obj).Elem(), reflect.ValueOf(old.DeepCopyObject()).Elem()
	for i := range dst.NumField() {
		switch dst.Type().Field(i).Name {
		case "TypeMeta", "ObjectMeta", "Status":
		default:
			dst.Field(i).Set(src.Field(i))
		}
	}
}

// statusWriteMay reports whether a status write may change the top-level
// field key of an unstructured object.
func statusWriteMay(key string) bool {
	switch key {
	case "apiVersion", "kind", "metadata", "status":
		return true
	}
	return false
}
