package informer

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/minictl/minictl/api"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Lister is a typed, read-only view of an Indexer that holds objects of type
// T, such as *corev1.Pod. It is what controllers read desired and observed
// state from; it never calls the API.
//
// Objects a Lister returns are the cache's own: shared with the informer and
// every other reader. Callers must not mutate them; call DeepCopyObject and
// change the copy.
//
// A Lister is a small value; copy it freely.
type Lister[T api.Object] struct {
	indexer  Indexer
	resource schema.GroupResource // names T in NotFound errors
}

// NewLister returns a Lister over indexer, which must hold only T's (keyed
// by MetaNamespaceKeyFunc). Finding anything else is a wiring bug and panics.
func NewLister[T api.Object](indexer Indexer) Lister[T] {
	return Lister[T]{indexer: indexer, resource: resourceOf[T]()}
}

// resourceOf names T for errors as client-go's listers do: the lower-case
// kind ("pod"), so that messages read `pod "web" not found`.
func resourceOf[T api.Object]() schema.GroupResource {
	t := reflect.TypeFor[T]()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := strings.ToLower(t.Name())
	if name == "" {
		name = "object"
	}
	return schema.GroupResource{Resource: name}
}

// List returns every object matching selector, in all namespaces. A nil
// selector matches everything.
func (l Lister[T]) List(selector labels.Selector) []T {
	return l.filter(l.indexer.List(), selector)
}

// Get returns the object namespace/name (namespace "" for cluster-scoped
// objects). If it is not in the cache, the error satisfies
// apierrors.IsNotFound, as an API server's would.
func (l Lister[T]) Get(namespace, name string) (T, error) {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, exists, err := l.indexer.GetByKey(key)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("get %s %s: %w", l.resource.Resource, key, err)
	}
	if !exists {
		var zero T
		return zero, apierrors.NewNotFound(l.resource, name)
	}
	return l.cast(obj), nil
}

// ByNamespace returns a Lister limited to namespace. Namespace "" means all
// namespaces for List, and cluster-scoped objects for Get.
func (l Lister[T]) ByNamespace(namespace string) NamespaceLister[T] {
	return NamespaceLister[T]{lister: l, namespace: namespace}
}

// ByIndex returns the objects indexed under value in index indexName. An
// unknown index name is an error.
func (l Lister[T]) ByIndex(indexName, value string) ([]T, error) {
	objs, err := l.indexer.ByIndex(indexName, value)
	if err != nil {
		return nil, err
	}
	return l.filter(objs, nil), nil
}

// filter casts objs to T, keeping those selector matches.
func (l Lister[T]) filter(objs []any, selector labels.Selector) []T {
	out := make([]T, 0, len(objs))
	for _, obj := range objs {
		t := l.cast(obj)
		if selector != nil && !selector.Matches(labels.Set(t.GetLabels())) {
			continue
		}
		out = append(out, t)
	}
	return out
}

func (l Lister[T]) cast(obj any) T {
	t, ok := obj.(T)
	if !ok {
		var zero T
		panic(fmt.Sprintf("informer: Lister[%T] found a %T in its indexer", zero, obj))
	}
	return t
}

// NamespaceLister is a Lister limited to one namespace. The same sharing
// rule applies: do not mutate what it returns.
type NamespaceLister[T api.Object] struct {
	lister    Lister[T]
	namespace string
}

// List returns the namespace's objects matching selector (nil matches
// everything). It uses the NamespaceIndex when the Indexer has it.
func (n NamespaceLister[T]) List(selector labels.Selector) []T {
	if n.namespace == "" {
		return n.lister.List(selector)
	}
	objs, err := n.lister.indexer.ByIndex(NamespaceIndex, n.namespace)
	if err == nil {
		return n.lister.filter(objs, selector)
	}
	// No namespace index: scan everything.
	out := []T{}
	for _, t := range n.lister.List(selector) {
		if t.GetNamespace() == n.namespace {
			out = append(out, t)
		}
	}
	return out
}

// Get returns the object name in this namespace; see Lister.Get.
func (n NamespaceLister[T]) Get(name string) (T, error) {
	return n.lister.Get(n.namespace, name)
}
