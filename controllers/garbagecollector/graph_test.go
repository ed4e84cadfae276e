package garbagecollector

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
)

func cm(name string, uid types.UID, owners ...metav1.OwnerReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "default", UID: uid, OwnerReferences: owners,
	}}
}

func refTo(name string, uid types.UID, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: uid, BlockOwnerDeletion: &block}
}

func deleting(obj *corev1.ConfigMap, finalizer string) *corev1.ConfigMap {
	out := obj.DeepCopy()
	now := metav1.Now()
	out.DeletionTimestamp = &now
	out.Finalizers = []string{finalizer}
	return out
}

func TestGraphVirtualOwner(t *testing.T) {
	g := newGraph(api.Resources())
	// A dependent seen before its owner makes a virtual owner, which a
	// worker must check.
	work := g.observe(api.ConfigMaps, cm("dep", "d", refTo("owner", "o", false)))
	if !slices.Equal(work, []types.UID{"o"}) {
		t.Fatalf("work = %v, want [o]", work)
	}
	info, ok := g.info("o")
	if !ok || !info.virtual || info.ref.namespace != "default" || info.ref.res != api.ConfigMaps {
		t.Fatalf("virtual owner = %+v, %v", info, ok)
	}
	// The owner shows up: no longer virtual, and nothing to do.
	if work := g.observe(api.ConfigMaps, cm("owner", "o")); len(work) != 0 {
		t.Fatalf("work after the owner is observed = %v, want none", work)
	}
	if info, _ := g.info("o"); info.virtual || len(info.dependents) != 1 {
		t.Fatalf("owner = %+v, want observed with 1 dependent", info)
	}
	// forgetVirtual keeps an observed node.
	if work := g.forgetVirtual("o"); work != nil {
		t.Fatalf("forgetVirtual of an observed node = %v, want nothing", work)
	}
}

func TestGraphVirtualOwnerGone(t *testing.T) {
	g := newGraph(api.Resources())
	g.observe(api.ConfigMaps, cm("dep-1", "d1", refTo("owner", "o", false)))
	g.observe(api.ConfigMaps, cm("dep-2", "d2", refTo("owner", "o", false)))
	work := g.forgetVirtual("o")
	slices.Sort(work)
	if !slices.Equal(work, []types.UID{"d1", "d2"}) {
		t.Fatalf("work = %v, want [d1 d2]", work)
	}
	if _, ok := g.info("o"); ok {
		t.Fatal("the virtual owner is still in the graph")
	}
}

func TestGraphOwnerDeleted(t *testing.T) {
	g := newGraph(api.Resources())
	g.observe(api.ConfigMaps, cm("owner", "o"))
	g.observe(api.ConfigMaps, cm("dep", "d", refTo("owner", "o", true)))
	work := g.forget(cm("owner", "o"))
	if !slices.Equal(work, []types.UID{"d"}) {
		t.Fatalf("work = %v, want [d]", work)
	}
	if g.len() != 1 {
		t.Fatalf("graph has %d nodes, want 1", g.len())
	}
	// The dependent goes too: nothing is left, not even a virtual owner.
	if work := g.forget(cm("dep", "d", refTo("owner", "o", true))); len(work) != 0 {
		t.Fatalf("work = %v, want none", work)
	}
	if g.len() != 0 {
		t.Fatalf("graph has %d nodes, want 0", g.len())
	}
}

func TestGraphReferenceRemovedDropsVirtualOwner(t *testing.T) {
	g := newGraph(api.Resources())
	g.observe(api.ConfigMaps, cm("dep", "d", refTo("owner", "o", false)))
	g.observe(api.ConfigMaps, cm("dep", "d"))
	if _, ok := g.info("o"); ok {
		t.Fatal("a virtual owner nobody refers to is still in the graph")
	}
}

func TestGraphForegroundDeletion(t *testing.T) {
	g := newGraph(api.Resources())
	owner := cm("owner", "o")
	g.observe(api.ConfigMaps, owner)
	g.observe(api.ConfigMaps, cm("blocking", "b", refTo("owner", "o", true)))
	g.observe(api.ConfigMaps, cm("free", "f", refTo("owner", "o", false)))

	// Entering foreground deletion: the owner and every dependent.
	work := g.observe(api.ConfigMaps, deleting(owner, metav1.FinalizerDeleteDependents))
	slices.Sort(work)
	if !slices.Equal(work, []types.UID{"b", "f", "o"}) {
		t.Fatalf("work = %v, want [b f o]", work)
	}
	info, _ := g.info("o")
	var blocking []string
	for _, d := range info.dependents {
		if d.blocking {
			blocking = append(blocking, d.ref.name)
		}
	}
	if !slices.Equal(blocking, []string{"blocking"}) {
		t.Fatalf("blocking dependents = %v, want [blocking]", blocking)
	}
	// A blocking dependent that lets go wakes the owner.
	if work := g.observe(api.ConfigMaps, cm("blocking", "b")); !slices.Contains(work, "o") {
		t.Fatalf("work after the blocking reference went = %v, want it to include o", work)
	}
	// So does one that is deleted, and unblocking a reference.
	if work := g.observe(api.ConfigMaps, cm("free", "f", refTo("owner", "o", true))); !slices.Contains(work, "o") {
		t.Fatalf("work after blockOwnerDeletion changed = %v, want it to include o", work)
	}
	if work := g.forget(cm("free", "f", refTo("owner", "o", true))); !slices.Equal(work, []types.UID{"o"}) {
		t.Fatalf("work after the last dependent went = %v, want [o]", work)
	}
}

func TestGraphWaitCycle(t *testing.T) {
	fg := metav1.FinalizerDeleteDependents
	names := func(refs []objectRef) []string {
		var out []string
		for _, r := range refs {
			out = append(out, r.name)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		objects []*corev1.ConfigMap
		want    []string // waitCycle("a")
	}{
		{"three that own each other, all waiting", []*corev1.ConfigMap{
			deleting(cm("a", "a", refTo("c", "c", true)), fg),
			deleting(cm("b", "b", refTo("a", "a", true)), fg),
			deleting(cm("c", "c", refTo("b", "b", true)), fg),
		}, []string{"b"}},
		{"one that owns itself", []*corev1.ConfigMap{
			deleting(cm("a", "a", refTo("a", "a", true)), fg),
		}, []string{"a"}},
		{"a chain that ends: c waits on nothing", []*corev1.ConfigMap{
			deleting(cm("a", "a"), fg),
			deleting(cm("b", "b", refTo("a", "a", true)), fg),
			deleting(cm("c", "c", refTo("b", "b", true)), fg),
		}, nil},
		{"a reference that does not block", []*corev1.ConfigMap{
			deleting(cm("a", "a", refTo("c", "c", false)), fg),
			deleting(cm("b", "b", refTo("a", "a", true)), fg),
			deleting(cm("c", "c", refTo("b", "b", true)), fg),
		}, nil},
		{"one of them not deleted yet: it will be, and go", []*corev1.ConfigMap{
			deleting(cm("a", "a", refTo("c", "c", true)), fg),
			deleting(cm("b", "b", refTo("a", "a", true)), fg),
			cm("c", "c", refTo("b", "b", true)),
		}, nil},
		{"one deleted in the background: it waits on nothing", []*corev1.ConfigMap{
			deleting(cm("a", "a", refTo("c", "c", true)), fg),
			deleting(cm("b", "b", refTo("a", "a", true)), "example.com/hold"),
			deleting(cm("c", "c", refTo("b", "b", true)), fg),
		}, nil},
	} {
		g := newGraph(api.Resources())
		for _, obj := range tc.objects {
			g.observe(api.ConfigMaps, obj)
		}
		if got := names(g.waitCycle("a")); !slices.Equal(got, tc.want) {
			t.Errorf("%s: waitCycle(a) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestGraphOrphaningOwnerIsWorkedOn(t *testing.T) {
	g := newGraph(api.Resources())
	owner := cm("owner", "o")
	g.observe(api.ConfigMaps, owner)
	g.observe(api.ConfigMaps, cm("dep", "d", refTo("owner", "o", false)))
	if work := g.observe(api.ConfigMaps, deleting(owner, metav1.FinalizerOrphanDependents)); !slices.Equal(work, []types.UID{"o"}) {
		t.Fatalf("work = %v, want [o]", work)
	}
	// A dependent that shows up meanwhile sends us back to the owner.
	if work := g.observe(api.ConfigMaps, cm("late", "l", refTo("owner", "o", false))); !slices.Equal(work, []types.UID{"o"}) {
		t.Fatalf("work = %v, want [o]", work)
	}
}

func TestDiffOwners(t *testing.T) {
	old := []metav1.OwnerReference{refTo("a", "a", false), refTo("b", "b", false), refTo("c", "c", false)}
	new := []metav1.OwnerReference{refTo("b", "b", true), refTo("c", "c", false), refTo("d", "d", false)}
	added, removed, changed := diffOwners(old, new)
	names := func(refs []metav1.OwnerReference) []string {
		var out []string
		for _, r := range refs {
			out = append(out, r.Name)
		}
		return out
	}
	if got := names(added); !slices.Equal(got, []string{"d"}) {
		t.Errorf("added = %v, want [d]", got)
	}
	if got := names(removed); !slices.Equal(got, []string{"a"}) {
		t.Errorf("removed = %v, want [a]", got)
	}
	if got := names(changed); !slices.Equal(got, []string{"b"}) {
		t.Errorf("changed = %v, want [b]", got)
	}
}

func TestResourceFor(t *testing.T) {
	for _, tc := range []struct {
		apiVersion, kind string
		want             *api.Resource
	}{
		{"v1", "ConfigMap", api.ConfigMaps},
		{"apps/v1", "ReplicaSet", api.ReplicaSets},
		{"apps/v1", "ConfigMap", nil},
		{"batch/v1", "Job", api.Jobs},
		{"widgets.example.com/v1", "Widget", nil},
		{"not/a/version", "Pod", nil},
		{"apps/v1beta2", "ReplicaSet", api.ReplicaSets}, // another version of a served kind
		{"v1beta1", "ReplicaSet", nil},
	} {
		if got := resourceFor(api.Resources(), tc.apiVersion, tc.kind); got != tc.want {
			t.Errorf("resourceFor(%q, %q) = %v, want %v", tc.apiVersion, tc.kind, got, tc.want)
		}
	}
}

func TestUnresolvableOwnersAreSolid(t *testing.T) {
	gc := &Controller{graph: newGraph(api.Resources())} // ownerState returns before it needs the API
	for _, tc := range []struct {
		name      string
		dependent objectRef
		ref       metav1.OwnerReference
	}{
		{"unserved kind", objectRef{namespace: "default"},
			metav1.OwnerReference{APIVersion: "widgets.example.com/v1", Kind: "Widget", Name: "w", UID: "w"}},
		{"namespaced owner of a cluster-scoped object", objectRef{},
			metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "c"}},
	} {
		state, err := gc.ownerState(t.Context(), tc.dependent, tc.ref)
		if err != nil || state != ownerSolid {
			t.Errorf("%s: ownerState = %v, %v; want solid", tc.name, state, err)
		}
	}
}
