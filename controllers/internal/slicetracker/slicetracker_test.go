package slicetracker

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func slice(uid string, gen int64) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: "web-" + uid, UID: types.UID(uid), Generation: gen,
		Labels: map[string]string{discoveryv1.LabelServiceName: "web"},
	}}
}

// A cache is stale while it lacks a slice written, holds an older
// generation of one, or still holds one deleted.
func TestStale(t *testing.T) {
	tr := New()
	if tr.Stale("default/web", nil) {
		t.Error("nothing written, yet stale")
	}
	tr.Update(slice("a", 1))
	if !tr.Stale("default/web", nil) {
		t.Error("a created slice missing from the cache is not stale")
	}
	if tr.Stale("default/web", []*discoveryv1.EndpointSlice{slice("a", 1)}) {
		t.Error("the cache holds what was written, yet stale")
	}
	tr.Update(slice("a", 2))
	if !tr.Stale("default/web", []*discoveryv1.EndpointSlice{slice("a", 1)}) {
		t.Error("an older generation in the cache is not stale")
	}
	if tr.ShouldSync(slice("a", 2)) {
		t.Error("our own write is news")
	}
	if !tr.ShouldSync(slice("a", 3)) || !tr.ShouldSync(slice("b", 1)) {
		t.Error("someone else's write is not news")
	}
	tr.ExpectDeletion(slice("a", 2))
	if !tr.Stale("default/web", []*discoveryv1.EndpointSlice{slice("a", 2)}) {
		t.Error("a deleted slice still in the cache is not stale")
	}
	if tr.HandleDeletion(slice("a", 2)) {
		t.Error("our own deletion is reported as unexpected")
	}
	if !tr.HandleDeletion(slice("b", 1)) {
		t.Error("someone else's deletion is not reported")
	}
	if tr.Stale("default/web", nil) {
		t.Error("stale after every deletion was seen")
	}
}
