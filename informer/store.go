package informer

import (
	"fmt"
	"slices"
	"sync"
)

// threadSafeStore is the keyed map behind an Indexer, with its indexes. It
// knows keys, not how to compute them.
//
// Every index entry is computed once, when an object is stored, and
// remembered beside the object; removing or replacing the object removes
// exactly those entries. So an index stays right even if a caller mutates a
// cached object it should not have touched, or an IndexFunc is not
// deterministic.
type threadSafeStore struct {
	// lock guards every field below it.
	lock sync.RWMutex

	// items maps a key to its object and the index values computed for it.
	items map[string]storeEntry
	// indexers are the index functions, by index name.
	indexers Indexers
	// indices maps index name → indexed value → set of keys.
	// Invariant: key is in indices[name][value] iff {name, value} is in
	// items[key].indexed; empty sets and empty value maps are removed.
	indices map[string]map[string]map[string]struct{}
}

// storeEntry is one stored object and the values it was indexed under.
type storeEntry struct {
	obj any
	// indexed is a flat list, not a map by index name: most objects have
	// one value in each of one or two indexes, and a list of them holds a
	// fifth of what the smallest map does, for every object of every
	// informer.
	indexed []indexedValue
}

// indexedValue is one value an object is indexed under in one index.
type indexedValue struct {
	index, value string
}

func newThreadSafeStore(indexers Indexers) *threadSafeStore {
	s := &threadSafeStore{
		items:    map[string]storeEntry{},
		indexers: Indexers{},
		indices:  map[string]map[string]map[string]struct{}{},
	}
	for name, fn := range indexers {
		s.indexers[name] = fn
	}
	return s
}

// indexValuesLocked computes obj's values for every index. It changes
// nothing, so a failing IndexFunc leaves the store as it was.
func (s *threadSafeStore) indexValuesLocked(key string, obj any, indexers Indexers) ([]indexedValue, error) {
	if len(indexers) == 0 {
		return nil, nil
	}
	var indexed []indexedValue
	for name, fn := range indexers {
		vals, err := fn(obj)
		if err != nil {
			return nil, fmt.Errorf("index %q of %s: %w", name, key, err)
		}
		if indexed == nil {
			indexed = make([]indexedValue, 0, max(len(indexers), len(vals)))
		}
		for _, v := range vals {
			indexed = append(indexed, indexedValue{name, v})
		}
	}
	return slices.Clip(indexed), nil
}

// put stores obj under key, replacing what was there and moving its index
// entries.
func (s *threadSafeStore) put(key string, obj any) error {
	s.lock.Lock()
	defer s.lock.Unlock()
	values, err := s.indexValuesLocked(key, obj, s.indexers)
	if err != nil {
		return err
	}
	if old, ok := s.items[key]; ok {
		s.unindexLocked(key, old.indexed)
	}
	s.items[key] = storeEntry{obj: obj, indexed: values}
	s.indexLocked(key, values)
	return nil
}

// delete removes key and its index entries. A missing key is not an error.
func (s *threadSafeStore) delete(key string) {
	s.lock.Lock()
	defer s.lock.Unlock()
	if old, ok := s.items[key]; ok {
		s.unindexLocked(key, old.indexed)
		delete(s.items, key)
	}
}

// replace swaps the whole content for items, rebuilding every index. On an
// index error nothing changes.
func (s *threadSafeStore) replace(items map[string]any) error {
	s.lock.Lock()
	defer s.lock.Unlock()
	entries := make(map[string]storeEntry, len(items))
	for key, obj := range items {
		values, err := s.indexValuesLocked(key, obj, s.indexers)
		if err != nil {
			return err
		}
		entries[key] = storeEntry{obj: obj, indexed: values}
	}
	s.items = entries
	s.indices = map[string]map[string]map[string]struct{}{}
	for key, e := range entries {
		s.indexLocked(key, e.indexed)
	}
	return nil
}

func (s *threadSafeStore) indexLocked(key string, indexed []indexedValue) {
	for _, iv := range indexed {
		index := s.indices[iv.index]
		if index == nil {
			index = map[string]map[string]struct{}{}
			s.indices[iv.index] = index
		}
		set := index[iv.value]
		if set == nil {
			set = map[string]struct{}{}
			index[iv.value] = set
		}
		set[key] = struct{}{}
	}
}

func (s *threadSafeStore) unindexLocked(key string, indexed []indexedValue) {
	for _, iv := range indexed {
		index := s.indices[iv.index]
		set := index[iv.value]
		delete(set, key)
		if len(set) == 0 {
			delete(index, iv.value)
		}
		if len(index) == 0 {
			delete(s.indices, iv.index)
		}
	}
}

func (s *threadSafeStore) get(key string) (any, bool) {
	s.lock.RLock()
	defer s.lock.RUnlock()
	e, ok := s.items[key]
	return e.obj, ok
}

func (s *threadSafeStore) list() []any {
	s.lock.RLock()
	defer s.lock.RUnlock()
	list := make([]any, 0, len(s.items))
	for _, e := range s.items {
		list = append(list, e.obj)
	}
	return list
}

func (s *threadSafeStore) listKeys() []string {
	s.lock.RLock()
	defer s.lock.RUnlock()
	keys := make([]string, 0, len(s.items))
	for key := range s.items {
		keys = append(keys, key)
	}
	return keys
}

// index returns the objects sharing any of obj's values of index name.
func (s *threadSafeStore) index(name string, obj any) ([]any, error) {
	s.lock.RLock()
	defer s.lock.RUnlock()
	fn, ok := s.indexers[name]
	if !ok {
		return nil, fmt.Errorf("index %q does not exist", name)
	}
	vals, err := fn(obj)
	if err != nil {
		return nil, fmt.Errorf("index %q: %w", name, err)
	}
	index := s.indices[name]
	var keys map[string]struct{}
	switch len(vals) {
	case 0:
		return nil, nil
	case 1:
		keys = index[vals[0]] // the common case needs no union
	default:
		keys = map[string]struct{}{}
		for _, v := range vals {
			for key := range index[v] {
				keys[key] = struct{}{}
			}
		}
	}
	list := make([]any, 0, len(keys))
	for key := range keys {
		list = append(list, s.items[key].obj)
	}
	return list, nil
}

func (s *threadSafeStore) byIndex(name, value string) ([]any, error) {
	s.lock.RLock()
	defer s.lock.RUnlock()
	if _, ok := s.indexers[name]; !ok {
		return nil, fmt.Errorf("index %q does not exist", name)
	}
	set := s.indices[name][value]
	list := make([]any, 0, len(set))
	for key := range set {
		list = append(list, s.items[key].obj)
	}
	return list, nil
}

func (s *threadSafeStore) indexKeys(name, value string) ([]string, error) {
	s.lock.RLock()
	defer s.lock.RUnlock()
	if _, ok := s.indexers[name]; !ok {
		return nil, fmt.Errorf("index %q does not exist", name)
	}
	set := s.indices[name][value]
	keys := make([]string, 0, len(set))
	for key := range set {
		keys = append(keys, key)
	}
	return keys, nil
}

func (s *threadSafeStore) listIndexFuncValues(name string) []string {
	s.lock.RLock()
	defer s.lock.RUnlock()
	index := s.indices[name]
	values := make([]string, 0, len(index))
	for v := range index {
		values = append(values, v)
	}
	return values
}

// addIndexers adds new indexes and indexes every stored object under them.
// Names already in use are an error; on any error nothing changes.
func (s *threadSafeStore) addIndexers(newIndexers Indexers) error {
	s.lock.Lock()
	defer s.lock.Unlock()
	for name := range newIndexers {
		if _, ok := s.indexers[name]; ok {
			return fmt.Errorf("index %q already exists", name)
		}
	}
	computed := make(map[string][]indexedValue, len(s.items))
	for key, e := range s.items {
		values, err := s.indexValuesLocked(key, e.obj, newIndexers)
		if err != nil {
			return err
		}
		computed[key] = values
	}
	for name, fn := range newIndexers {
		s.indexers[name] = fn
	}
	for key, values := range computed {
		e := s.items[key]
		e.indexed = slices.Concat(e.indexed, values)
		s.items[key] = e
		s.indexLocked(key, values)
	}
	return nil
}
