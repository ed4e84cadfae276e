package informer

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
)

// IndexFunc returns the values an object is indexed under in one index. An
// object may have none, one or several.
type IndexFunc func(obj any) ([]string, error)

// Indexers maps an index name to its IndexFunc.
type Indexers map[string]IndexFunc

// NamespaceIndex is the name of the index by namespace that
// MetaNamespaceIndexFunc computes; Listers use it when it is present.
const NamespaceIndex = "namespace"

// MetaNamespaceIndexFunc indexes an object under its namespace ("" for
// cluster-scoped objects).
func MetaNamespaceIndexFunc(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("namespace index: %w", err)
	}
	return []string{m.GetNamespace()}, nil
}

// Indexer is the informer's local cache: a thread-safe map from key to object
// with secondary indexes. Writers are the informer (and tests); readers are
// controllers, through Listers.
//
// Properties:
//
//   - Every method is safe for concurrent use; reads share a read lock.
//   - Indexes are always consistent with the stored objects: each write
//     removes the object's old index entries and adds the new ones, so an
//     object whose indexed value changes moves between values.
//   - A write whose IndexFunc fails changes nothing and returns the error.
//   - Objects are stored and returned as given, not copied: they are shared
//     and must not be mutated (DeepCopyObject first).
//   - List, ListKeys and the index queries return results in no particular
//     order.
type Indexer interface {
	// Add, Update and Delete store or remove obj under its key. Add and
	// Update are the same operation; Delete of a missing key is not an
	// error. Delete accepts a DeletedFinalStateUnknown.
	Add(obj any) error
	Update(obj any) error
	Delete(obj any) error
	// List returns every stored object; ListKeys every key.
	List() []any
	ListKeys() []string
	// Get returns the object stored under obj's key.
	Get(obj any) (item any, exists bool, err error)
	// GetByKey returns the object stored under key.
	GetByKey(key string) (item any, exists bool, err error)
	// Replace makes list the whole content. resourceVersion is the list's
	// version; the cache does not need it.
	Replace(list []any, resourceVersion string) error

	// Index returns the objects that share a value of index indexName with
	// obj.
	Index(indexName string, obj any) ([]any, error)
	// ByIndex returns the objects indexed under indexedValue.
	ByIndex(indexName, indexedValue string) ([]any, error)
	// IndexKeys returns the keys of the objects indexed under indexedValue.
	IndexKeys(indexName, indexedValue string) ([]string, error)
	// AddIndexers adds indexes, before or after objects are stored; stored
	// objects are indexed at once. Adding an existing name is an error.
	AddIndexers(newIndexers Indexers) error
	// ListIndexFuncValues returns every value index name currently has
	// objects under.
	ListIndexFuncValues(name string) []string
}

// The Indexer is what a DeltaFIFO consults to find deletions.
var _ KeyListerGetter = Indexer(nil)

// indexer is the Indexer: a key function in front of a threadSafeStore.
type indexer struct {
	keyFunc KeyFunc
	store   *threadSafeStore
}

// NewIndexer returns an empty Indexer keying objects with keyFunc (nil means
// MetaNamespaceKeyFunc) and maintaining indexers.
func NewIndexer(keyFunc KeyFunc, indexers Indexers) Indexer {
	if keyFunc == nil {
		keyFunc = MetaNamespaceKeyFunc
	}
	return &indexer{keyFunc: keyFunc, store: newThreadSafeStore(indexers)}
}

func (c *indexer) key(obj any) (string, error) {
	key, err := c.keyFunc(obj)
	if err != nil {
		return "", fmt.Errorf("indexer: key of %T: %w", obj, err)
	}
	return key, nil
}

func (c *indexer) Add(obj any) error { return c.Update(obj) }

func (c *indexer) Update(obj any) error {
	key, err := c.key(obj)
	if err != nil {
		return err
	}
	if err := c.store.put(key, obj); err != nil {
		return fmt.Errorf("indexer: %w", err)
	}
	return nil
}

func (c *indexer) Delete(obj any) error {
	key, err := c.key(obj)
	if err != nil {
		return err
	}
	c.store.delete(key)
	return nil
}

func (c *indexer) List() []any        { return c.store.list() }
func (c *indexer) ListKeys() []string { return c.store.listKeys() }

func (c *indexer) Get(obj any) (any, bool, error) {
	key, err := c.key(obj)
	if err != nil {
		return nil, false, err
	}
	return c.GetByKey(key)
}

func (c *indexer) GetByKey(key string) (any, bool, error) {
	obj, ok := c.store.get(key)
	return obj, ok, nil
}

func (c *indexer) Replace(list []any, _ string) error {
	items := make(map[string]any, len(list))
	for _, obj := range list {
		key, err := c.key(obj)
		if err != nil {
			return err
		}
		items[key] = obj
	}
	if err := c.store.replace(items); err != nil {
		return fmt.Errorf("indexer: %w", err)
	}
	return nil
}

func (c *indexer) Index(indexName string, obj any) ([]any, error) {
	list, err := c.store.index(indexName, obj)
	if err != nil {
		return nil, fmt.Errorf("indexer: %w", err)
	}
	return list, nil
}

func (c *indexer) ByIndex(indexName, indexedValue string) ([]any, error) {
	list, err := c.store.byIndex(indexName, indexedValue)
	if err != nil {
		return nil, fmt.Errorf("indexer: %w", err)
	}
	return list, nil
}

func (c *indexer) IndexKeys(indexName, indexedValue string) ([]string, error) {
	keys, err := c.store.indexKeys(indexName, indexedValue)
	if err != nil {
		return nil, fmt.Errorf("indexer: %w", err)
	}
	return keys, nil
}

func (c *indexer) AddIndexers(newIndexers Indexers) error {
	if err := c.store.addIndexers(newIndexers); err != nil {
		return fmt.Errorf("indexer: %w", err)
	}
	return nil
}

func (c *indexer) ListIndexFuncValues(name string) []string {
	return c.store.listIndexFuncValues(name)
}
