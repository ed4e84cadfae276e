package informer

import (
	"k8s.io/apimachinery/pkg/api/meta"
)

// TransformFunc rewrites an object before an informer keeps it: what it
// returns is what the DeltaFIFO queues, the cache stores and handlers are
// given. It is client-go's TransformFunc, for the same use: a component
// that never reads some fields (managedFields above all, often a third of
// an object's size) drops them, and every cached copy is that much
// smaller for as long as it is cached.
//
// A transform is called once per object version the informer receives,
// on an object decoded for this informer alone, so it may change the
// object in place; it may also return another object, equal to it, that
// will never change (SharePodParts returns the pod another informer
// holds). It is not called on the tombstones of a relist
// (DeletedFinalStateUnknown), nor on resyncs: those carry objects it has
// already seen. An error drops the event, as an undecodable one would be.
type TransformFunc func(obj any) (any, error)

// StripManagedFields is a TransformFunc that drops metadata.managedFields.
// Controllers, schedulers and kubelets read objects, not who set which
// field; a write from a stripped copy keeps the server's managedFields,
// since an update that sends none leaves them as they are.
func StripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Lean is the TransformFunc of the components' informers (the controller
// manager's, the scheduler's, each kubelet's): StripManagedFields, then
// SharePodParts, so that a cached pod keeps neither managedFields nor its
// own copy of what another cached pod, in any informer of the process,
// already holds. A Lean informer's objects, and their parts, are shared
// with other objects and other informers: they must not be changed, as
// no cached object may be.
func Lean(obj any) (any, error) {
	obj, err := StripManagedFields(obj)
	if err != nil {
		return nil, err
	}
	return SharePodParts(obj)
}
