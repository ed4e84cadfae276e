package apiserver

import (
	"iter"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
)

// indexedFields names, by resource, the field whose watchers a watch cache
// keeps by value: the fields kube-apiserver's registries give their
// cacher as a TriggerFunc. Each is what a kubelet pins its own watches to,
// so that with thousands of nodes an event is matched against its node's
// watchers, not against every node's: the pods of a node, and the one
// node, secret or config map it watches by name.
var indexedFields = map[schema.GroupResource]string{
	{Resource: "pods"}:       "spec.nodeName",
	{Resource: "nodes"}:      "metadata.name",
	{Resource: "secrets"}:    "metadata.name",
	{Resource: "configmaps"}: "metadata.name",
}

// indexedWatcherBuffer bounds the buffer of a watcher kept by a value
// other than "". It sees only the events of its value (a node's pods), so
// a few events in flight are all it needs, and thousands of such watchers
// (one per node) would otherwise hold a full buffer each. kube-apiserver
// gives them 10; this cache, which closes a full watcher at once instead
// of waiting for it a little, keeps more. The watchers of "" (a
// scheduler's, of the pods no node has) see every new pod: they keep the
// full buffer.
const indexedWatcherBuffer = 100

// watcherSet holds a cache's watchers so that an event is matched only
// against those that can want it, as kube-apiserver's cacher keeps them:
//
//   - A watcher whose field selector pins the resource's indexed field
//     (indexedFields) to a value is kept under that value. An event goes to
//     the watchers under its object's value and under its previous
//     object's: a pod bound to node-1 is ADDED for node-1's watcher, and
//     one that leaves node-1 is DELETED for it.
//   - Every other watcher is kept under its scope: the namespace and the
//     name it is limited to, by its path or by its field selector ("" for
//     any). An event goes to the scopes its object falls in: its
//     namespace and name, its namespace, its name, and everything.
//
// The set only spares the cache the watchers that cannot want an event;
// each candidate's filter still decides what it sees (itemFor). An event
// of an object whose fields are not known (a conversion failed: the
// filter then ignores field selectors) goes to every watcher.
type watcherSet struct {
	field   string // the indexed field; "" when the cache keeps none
	all     map[*cacheWatcher]struct{}
	byValue map[string]watcherGroup
	byScope map[watcherScope]watcherGroup
}

type watcherGroup map[*cacheWatcher]struct{}

// watcherScope is the namespace and name a watcher is limited to; "" is
// any.
type watcherScope struct{ namespace, name string }

// newWatcherSet returns the empty set of the watchers of res's cache,
// which serves views versions of it. A cache that serves several versions
// keeps no watcher by value: each version has its own fields.
func newWatcherSet(res *api.Resource, views int) watcherSet {
	s := watcherSet{all: map[*cacheWatcher]struct{}{}, byValue: map[string]watcherGroup{}, byScope: map[watcherScope]watcherGroup{}}
	if views == 1 {
		s.field = indexedFields[res.GroupResource()]
	}
	return s
}

// place decides where w is kept: under the value its field selector pins
// the indexed field to, or else under its scope.
func (s *watcherSet) place(w *cacheWatcher) {
	f := &w.filter
	if f.field != nil && s.field != "" {
		w.value, w.indexed = f.field.RequiresExactMatch(s.field)
	}
	w.scope = watcherScope{namespace: f.namespace}
	if f.field == nil {
		return
	}
	if ns, ok := f.field.RequiresExactMatch("metadata.namespace"); ok && w.scope.namespace == "" {
		w.scope.namespace = ns
	}
	if name, ok := f.field.RequiresExactMatch("metadata.name"); ok {
		w.scope.name = name
	}
}

// bufferFor is how many events w, placed, may have waiting before it is
// closed as too slow, in a cache whose watchers buffer up to buffer.
func bufferFor(w *cacheWatcher, buffer int) int {
	if w.indexed && w.value != "" {
		return min(buffer, indexedWatcherBuffer)
	}
	return buffer
}

// add keeps w, placed, in the set.
func (s *watcherSet) add(w *cacheWatcher) {
	s.all[w] = struct{}{}
	if w.indexed {
		addTo(s.byValue, w.value, w)
	} else {
		addTo(s.byScope, w.scope, w)
	}
}

// remove drops w from the set.
func (s *watcherSet) remove(w *cacheWatcher) {
	delete(s.all, w)
	if w.indexed {
		removeFrom(s.byValue, w.value, w)
	} else {
		removeFrom(s.byScope, w.scope, w)
	}
}

func addTo[K comparable](m map[K]watcherGroup, k K, w *cacheWatcher) {
	g := m[k]
	if g == nil {
		g = watcherGroup{}
		m[k] = g
	}
	g[w] = struct{}{}
}

func removeFrom[K comparable](m map[K]watcherGroup, k K, w *cacheWatcher) {
	g := m[k]
	delete(g, w)
	if len(g) == 0 {
		delete(m, k)
	}
}

// candidates yields, once each, the watchers that may want e. A watcher
// removed meanwhile (stopped by the caller) is not yielded afterwards.
func (s *watcherSet) candidates(e *cachedEvent) iter.Seq[*cacheWatcher] {
	return func(yield func(*cacheWatcher) bool) {
		if !knownFields(e.obj) || !knownFields(e.prev) {
			for w := range s.all {
				if !yield(w) {
					return
				}
			}
			return
		}
		groups := make([]watcherGroup, 0, 6)
		ns, name := e.obj.namespace, e.obj.fields.Get("metadata.name")
		if ns != "" {
			groups = append(groups, s.byScope[watcherScope{ns, name}], s.byScope[watcherScope{ns, ""}])
		}
		groups = append(groups, s.byScope[watcherScope{"", name}], s.byScope[watcherScope{}])
		if s.field != "" && len(s.byValue) > 0 {
			v := e.obj.fields.Get(s.field)
			groups = append(groups, s.byValue[v])
			if e.prev != nil {
				if pv := e.prev.fields.Get(s.field); pv != v {
					groups = append(groups, s.byValue[pv])
				}
			}
		}
		for _, g := range groups {
			for w := range g {
				if !yield(w) {
					return
				}
			}
		}
	}
}

// knownFields reports whether o (nil: no object) has its fields, in every
// version the cache serves, for the set to find its watchers by.
func knownFields(o *cachedObject) bool {
	if o == nil {
		return true
	}
	if o.err != nil {
		return false
	}
	for i := range o.views {
		if v := o.views[i].Load(); v == nil || v.err != nil {
			return false
		}
	}
	return true
}
