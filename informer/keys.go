package informer

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
)

// KeyFunc returns the key an object is stored and queued under.
type KeyFunc func(obj any) (string, error)

// MetaNamespaceKeyFunc is the usual KeyFunc: "namespace/name" for namespaced
// objects, "name" for cluster-scoped ones. For a DeletedFinalStateUnknown it
// returns the tombstone's key, so deletions find their object.
func MetaNamespaceKeyFunc(obj any) (string, error) {
	switch d := obj.(type) {
	case DeletedFinalStateUnknown:
		return d.Key, nil
	case *DeletedFinalStateUnknown:
		return d.Key, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", fmt.Errorf("object key: %w", err)
	}
	if m.GetName() == "" {
		return "", fmt.Errorf("object key: %T has no name", obj)
	}
	if ns := m.GetNamespace(); ns != "" {
		return ns + "/" + m.GetName(), nil
	}
	return m.GetName(), nil
}

// SplitMetaNamespaceKey splits a key made by MetaNamespaceKeyFunc into its
// namespace ("" for cluster-scoped objects) and name.
func SplitMetaNamespaceKey(key string) (namespace, name string, err error) {
	parts := strings.Split(key, "/")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return "", parts[0], nil
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return parts[0], parts[1], nil
	}
	return "", "", fmt.Errorf("unexpected key format: %q", key)
}
