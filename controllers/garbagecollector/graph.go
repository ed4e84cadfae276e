package garbagecollector

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
)

// objectRef is what the collector knows of an object's identity: its uid,
// and where a live GET or DELETE finds it.
type objectRef struct {
	res       *api.Resource // nil: an owner of a kind not served, as discovery last said
	kind      string        // as the object or the owner reference says it
	namespace string
	name      string
	uid       types.UID
}

// String names the object in log lines: "ReplicaSet default/web (uid ..)".
func (r objectRef) String() string {
	name := r.name
	if r.namespace != "" {
		name = r.namespace + "/" + name
	}
	return fmt.Sprintf("%s %s (uid %s)", r.kind, name, r.uid)
}

// key is the object's key in its informer's cache.
func (r objectRef) key() string {
	if r.namespace == "" {
		return r.name
	}
	return r.namespace + "/" + r.name
}

func refOf(res *api.Resource, obj api.Object) objectRef {
	return objectRef{res: res, kind: res.Kind, namespace: obj.GetNamespace(), name: obj.GetName(), uid: obj.GetUID()}
}

// node is one object in the graph: an object the informers have shown us,
// or a "virtual" owner that only its dependents' ownerReferences name.
type node struct {
	ref objectRef
	// virtual: known only from ownerReferences; not (yet) observed. Its
	// existence must be checked with a live GET.
	virtual bool
	// owners are the object's ownerReferences as last observed.
	owners []metav1.OwnerReference
	// dependents are the nodes whose owners name this node's uid.
	dependents map[types.UID]*node

	beingDeleted       bool // deletionTimestamp is set
	deletingDependents bool // ... and the foregroundDeletion finalizer is on
	orphaning          bool // ... and the orphan finalizer is on
}

// graph is the owner→dependents graph, keyed by uid, built from what the
// informers report. One goroutine (the graph builder) writes it; workers
// read it through info.
//
// Invariants: n is in nodes[o].dependents iff n.owners has a reference
// with uid o and o is in nodes; a virtual node has no owners and at least
// one dependent.
type graph struct {
	// mu guards resources, nodes and every node in it.
	mu sync.RWMutex
	// resources resolves owner references to resources: what discovery
	// last said is served.
	resources api.Catalogue
	nodes     map[types.UID]*node
}

func newGraph(resources api.Catalogue) *graph {
	return &graph{resources: resources, nodes: map[types.UID]*node{}}
}

// catalogue returns the resources owner references resolve to.
func (g *graph) catalogue() api.Catalogue {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.resources
}

// setResources makes owner references resolve to c from now on, and
// resolves again the owners known only from references: it returns those
// whose kind became known (they can now be looked up).
func (g *graph) setResources(c api.Catalogue) []types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.resources = c
	var work uidSet
	for uid, n := range g.nodes {
		if !n.virtual {
			continue
		}
		was := n.ref.res
		namespace := ""
		for _, d := range n.dependents {
			namespace = d.ref.namespace
			break
		}
		ref := metav1.OwnerReference{APIVersion: ownerAPIVersion(n, uid), Kind: n.ref.kind, Name: n.ref.name, UID: uid}
		n.ref = g.virtualRef(ref, namespace)
		if n.ref.res != nil && n.ref.res != was {
			work.add(uid)
		}
	}
	return work.list
}

// ownerAPIVersion is the apiVersion the dependents of virtual node n name
// it by.
func ownerAPIVersion(n *node, uid types.UID) string {
	for _, d := range n.dependents {
		for _, ref := range d.owners {
			if ref.UID == uid {
				return ref.APIVersion
			}
		}
	}
	return ""
}

// nodeInfo is a copy of what a worker needs to know about a node, taken
// under the graph's lock.
type nodeInfo struct {
	ref        objectRef
	virtual    bool
	dependents []dependentInfo
}

// dependentInfo is one dependent of a node.
type dependentInfo struct {
	ref                objectRef
	blocking           bool // its reference to the owner has blockOwnerDeletion
	beingDeleted       bool
	deletingDependents bool
	hasDependents      bool
}

// info returns a copy of the node with uid, or false if there is none.
func (g *graph) info(uid types.UID) (nodeInfo, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n, ok := g.nodes[uid]
	if !ok {
		return nodeInfo{}, false
	}
	out := nodeInfo{ref: n.ref, virtual: n.virtual}
	for _, d := range n.dependents {
		out.dependents = append(out.dependents, dependentInfo{
			ref:                d.ref,
			blocking:           blocks(d.owners, uid),
			beingDeleted:       d.beingDeleted,
			deletingDependents: d.deletingDependents,
			hasDependents:      len(d.dependents) > 0,
		})
	}
	return out, true
}

// hasDependents reports whether the node with uid has any dependent.
func (g *graph) hasDependents(uid types.UID) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n, ok := g.nodes[uid]
	return ok && len(n.dependents) > 0
}

// len returns the number of nodes.
func (g *graph) len() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return len(g.nodes)
}

// waitCycle returns the dependents through which the foreground deletion
// of the node with uid waits on itself: each is being deleted in the
// foreground too, its reference blocks uid's deletion, and following such
// waits from it (an owner waits on a dependent whose reference blocks it
// and which itself waits on its dependents) leads back to uid. Nothing on
// such a cycle can ever go, as each waits for the next; nil when uid is on
// none.
func (g *graph) waitCycle(uid types.UID) []objectRef {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n, ok := g.nodes[uid]
	if !ok {
		return nil
	}
	var out []objectRef
	for _, d := range n.dependents {
		if waitsOn(n, d) && g.reachesLocked(d, uid, map[types.UID]bool{}) {
			out = append(out, d.ref)
		}
	}
	slices.SortFunc(out, func(a, b objectRef) int { return strings.Compare(string(a.uid), string(b.uid)) })
	return out
}

// reachesLocked reports whether following waits from n leads to target.
// seen holds the nodes already followed.
func (g *graph) reachesLocked(n *node, target types.UID, seen map[types.UID]bool) bool {
	if n.ref.uid == target {
		return true
	}
	seen[n.ref.uid] = true
	for _, d := range n.dependents {
		if !seen[d.ref.uid] && waitsOn(n, d) && g.reachesLocked(d, target, seen) {
			return true
		}
	}
	return false
}

// waitsOn reports whether owner's foreground deletion waits on d, and d's
// on its own dependents: both are deleting their dependents first, and d's
// reference to owner blocks owner's deletion.
func waitsOn(owner, d *node) bool {
	return owner.deletingDependents && d.deletingDependents && blocks(d.owners, owner.ref.uid)
}

// blocks reports whether owners has a reference to uid with
// blockOwnerDeletion set.
func blocks(owners []metav1.OwnerReference, uid types.UID) bool {
	for _, o := range owners {
		if o.UID == uid {
			return o.BlockOwnerDeletion != nil && *o.BlockOwnerDeletion
		}
	}
	return false
}

// observe records obj (of resource res) as it now is, and returns the uids
// whose nodes need a worker's attention because of the change.
func (g *graph) observe(res *api.Resource, obj api.Object) []types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	var work uidSet
	uid := obj.GetUID()
	n, known := g.nodes[uid]
	if !known {
		n = &node{dependents: map[types.UID]*node{}}
		g.nodes[uid] = n
	}
	wasDeletingDependents := n.deletingDependents
	oldOwners := n.owners

	n.ref = refOf(res, obj)
	n.virtual = false
	n.owners = obj.GetOwnerReferences()
	n.beingDeleted = obj.GetDeletionTimestamp() != nil
	n.deletingDependents = n.beingDeleted && hasFinalizer(obj, metav1.FinalizerDeleteDependents)
	n.orphaning = n.beingDeleted && hasFinalizer(obj, metav1.FinalizerOrphanDependents)

	// The dependent's side: move n between its owners' dependents.
	added, removed, changed := diffOwners(oldOwners, n.owners)
	for _, ref := range added {
		owner, ok := g.nodes[ref.UID]
		if !ok {
			// An owner we have not seen: it may not exist at all. A
			// worker checks.
			owner = &node{ref: g.virtualRef(ref, n.ref.namespace), virtual: true, dependents: map[types.UID]*node{}}
			g.nodes[ref.UID] = owner
			work.add(ref.UID)
		}
		owner.dependents[uid] = n
	}
	for _, ref := range removed {
		if owner, ok := g.nodes[ref.UID]; ok {
			delete(owner.dependents, uid)
			g.dropIfUnneededLocked(owner)
		}
	}
	for _, ref := range append(removed, changed...) {
		if owner, ok := g.nodes[ref.UID]; ok && owner.deletingDependents {
			work.add(ref.UID) // one fewer dependent may block it
		}
	}
	for _, ref := range n.owners {
		owner, ok := g.nodes[ref.UID]
		switch {
		case !ok:
		case owner.deletingDependents:
			work.add(uid) // its owner waits for it to be deleted
		case owner.orphaning:
			work.add(ref.UID) // its owner must let go of it first
		}
	}

	// The owner's side: on the way into foreground deletion, every
	// dependent must go; while the owner waits (foreground) or must let go
	// (orphan), any change is a reason to look again.
	if n.deletingDependents && !wasDeletingDependents {
		for depUID := range n.dependents {
			work.add(depUID)
		}
	}
	if n.deletingDependents || n.orphaning {
		work.add(uid)
	}
	return work.list
}

// forget removes the deleted object obj, and returns the uids whose nodes
// need a worker's attention: its dependents, now perhaps ownerless, and
// owners that waited for it.
func (g *graph) forget(obj api.Object) []types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	var work uidSet
	uid := obj.GetUID()
	n, ok := g.nodes[uid]
	if !ok || n.virtual {
		return nil
	}
	for _, ref := range n.owners {
		if owner, ok := g.nodes[ref.UID]; ok {
			delete(owner.dependents, uid)
			if owner.deletingDependents {
				work.add(ref.UID)
			}
			g.dropIfUnneededLocked(owner)
		}
	}
	delete(g.nodes, uid)
	for depUID := range n.dependents {
		work.add(depUID)
	}
	return work.list
}

// forgetVirtual removes the virtual node uid, an owner a worker found does
// not exist, and returns its dependents. A node observed meanwhile is
// kept: it exists after all.
func (g *graph) forgetVirtual(uid types.UID) []types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, ok := g.nodes[uid]
	if !ok || !n.virtual {
		return nil
	}
	delete(g.nodes, uid)
	var work uidSet
	for depUID := range n.dependents {
		work.add(depUID)
	}
	return work.list
}

// dropIfUnneededLocked removes a virtual node nobody refers to any more.
func (g *graph) dropIfUnneededLocked(n *node) {
	if n.virtual && len(n.dependents) == 0 {
		delete(g.nodes, n.ref.uid)
	}
}

// virtualRef is the identity an owner reference gives a not yet observed
// owner: a namespaced owner lives in its dependent's namespace.
func (g *graph) virtualRef(ref metav1.OwnerReference, dependentNamespace string) objectRef {
	res := resourceFor(g.resources, ref.APIVersion, ref.Kind)
	r := objectRef{res: res, kind: ref.Kind, name: ref.Name, uid: ref.UID}
	if res != nil && res.Namespaced {
		r.namespace = dependentNamespace
	}
	return r
}

// diffOwners compares two ownerReference lists by uid: references only in
// new, only in old, and in both with a different blockOwnerDeletion.
func diffOwners(old, new []metav1.OwnerReference) (added, removed, changed []metav1.OwnerReference) {
	oldByUID := make(map[types.UID]metav1.OwnerReference, len(old))
	for _, ref := range old {
		oldByUID[ref.UID] = ref
	}
	newUIDs := make(map[types.UID]bool, len(new))
	for _, ref := range new {
		newUIDs[ref.UID] = true
		prev, ok := oldByUID[ref.UID]
		switch {
		case !ok:
			added = append(added, ref)
		case isTrue(prev.BlockOwnerDeletion) != isTrue(ref.BlockOwnerDeletion):
			changed = append(changed, ref)
		}
	}
	for _, ref := range old {
		if !newUIDs[ref.UID] {
			removed = append(removed, ref)
		}
	}
	return added, removed, changed
}

func isTrue(b *bool) bool { return b != nil && *b }

// uidSet collects uids once each, in the order first added.
type uidSet struct {
	seen map[types.UID]bool
	list []types.UID
}

func (s *uidSet) add(uid types.UID) {
	if s.seen[uid] {
		return
	}
	if s.seen == nil {
		s.seen = map[types.UID]bool{}
	}
	s.seen[uid] = true
	s.list = append(s.list, uid)
}
