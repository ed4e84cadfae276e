package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/informer"
)

// ControllerUIDIndex is the name of the index ControllerUIDIndexFunc
// computes: objects by the uid of their controller, orphans by
// OrphanIndexValue of their namespace. With it a controller finds what it
// owns, and the orphans it may adopt, without scanning the namespace.
const ControllerUIDIndex = "controllerUID"

// ControllerUIDIndexFunc indexes an object under its controller's uid, or,
// when it has no controller, under OrphanIndexValue(namespace).
func ControllerUIDIndexFunc(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("controller uid index: %w", err)
	}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		return []string{string(ref.UID)}, nil
	}
	return []string{OrphanIndexValue(m.GetNamespace())}, nil
}

// OrphanIndexValue is the ControllerUIDIndex value of the orphans of
// namespace. It cannot be a uid, which has no slash.
func OrphanIndexValue(namespace string) string { return "orphan/" + namespace }

// IndexAdder is the part of an informer that takes indexes.
type IndexAdder interface {
	GetIndexer() informer.Indexer
	AddIndexers(informer.Indexers) error
}

// EnsureControllerUIDIndex adds ControllerUIDIndex to a shared informer
// unless another controller already has.
func EnsureControllerUIDIndex(inf IndexAdder) error {
	if _, err := inf.GetIndexer().IndexKeys(ControllerUIDIndex, ""); err == nil {
		return nil // already there
	}
	err := inf.AddIndexers(informer.Indexers{ControllerUIDIndex: ControllerUIDIndexFunc})
	if err != nil {
		// Lost a race with another controller adding it: fine if it is there now.
		if _, e := inf.GetIndexer().IndexKeys(ControllerUIDIndex, ""); e == nil {
			return nil
		}
		return fmt.Errorf("add %s index: %w", ControllerUIDIndex, err)
	}
	return nil
}

// OwnedAndOrphans returns, from an indexer with ControllerUIDIndex, the
// objects controlled by uid and the orphans of namespace: everything a
// controller in namespace may claim.
func OwnedAndOrphans[T any](indexer informer.Indexer, namespace string, uid types.UID) ([]T, error) {
	owned, err := indexer.ByIndex(ControllerUIDIndex, string(uid))
	if err != nil {
		return nil, err
	}
	orphans, err := indexer.ByIndex(ControllerUIDIndex, OrphanIndexValue(namespace))
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(owned)+len(orphans))
	for _, objs := range [][]any{owned, orphans} {
		for _, obj := range objs {
			t, ok := obj.(T)
			m, err := meta.Accessor(obj)
			if !ok || err != nil {
				return nil, fmt.Errorf("controller uid index: unexpected %T", obj)
			}
			if m.GetNamespace() == namespace { // an owner reference never crosses namespaces
				out = append(out, t)
			}
		}
	}
	return out, nil
}

// ObjectFromDelete returns the T of a delete notification: the object
// itself, or the last known state a tombstone carries.
func ObjectFromDelete[T api.Object](obj any) (T, bool) {
	switch o := obj.(type) {
	case T:
		return o, true
	case informer.DeletedFinalStateUnknown:
		t, ok := o.Obj.(T)
		return t, ok
	case *informer.DeletedFinalStateUnknown:
		t, ok := o.Obj.(T)
		return t, ok
	}
	var zero T
	return zero, false
}
