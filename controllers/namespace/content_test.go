package namespace

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
)

func TestAccount(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { ts := metav1.NewTime(now.Add(d)); return &ts }
	obj := func(name string, deleting *metav1.Time, finalizers ...string) api.Object {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, DeletionTimestamp: deleting, Finalizers: finalizers}}
	}
	tests := []struct {
		name         string
		rt           resourceType
		left         []api.Object
		wantEstimate time.Duration
		wantErr      string
		wantFinal    map[string]int
	}{
		{name: "nothing left", rt: podsRT},
		{
			name:         "pods in their grace period",
			rt:           podsRT,
			left:         []api.Object{obj("a", at(4*time.Second)), obj("b", at(25*time.Second))},
			wantEstimate: 25 * time.Second,
		},
		{
			name:         "held by finalizers",
			rt:           configMapsRT,
			left:         []api.Object{obj("a", at(-time.Second), "example.com/hold")},
			wantEstimate: finalizerEstimate,
			wantFinal:    map[string]int{"example.com/hold": 1},
		},
		{
			name:    "a pod past its grace period, no kubelet finishing it",
			rt:      podsRT,
			left:    []api.Object{obj("a", at(-time.Second))},
			wantErr: "unexpected items still remain in namespace: team-a for gvr: /v1, Resource=pods",
		},
		{
			name:    "not even being deleted",
			rt:      deployRT,
			left:    []api.Object{obj("a", nil)},
			wantErr: "unexpected items still remain in namespace: team-a for gvr: apps/v1, Resource=deployments",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &contentReport{namespace: "team-a", finalizers: map[string]int{}}
			err := r.account(tt.rt, tt.left, now)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("err = %v", err)
			}
			if r.estimate != tt.wantEstimate {
				t.Errorf("estimate %v, want %v", r.estimate, tt.wantEstimate)
			}
			if len(tt.left) > 0 && (len(r.remaining) != 1 || r.remaining[0].n != len(tt.left)) {
				t.Errorf("remaining %v, want %d of %s", r.remaining, len(tt.left), tt.rt)
			}
			for f, n := range tt.wantFinal {
				if r.finalizers[f] != n {
					t.Errorf("finalizer %s counted %d, want %d", f, r.finalizers[f], n)
				}
			}
		})
	}
}

func TestRecheckAfter(t *testing.T) {
	for _, tt := range []struct{ estimate, want time.Duration }{
		{0, time.Second},
		{500 * time.Millisecond, time.Second},
		{4 * time.Second, 3 * time.Second},
		{finalizerEstimate, 8 * time.Second},
		{30 * time.Second, 16 * time.Second},
	} {
		r := &contentReport{estimate: tt.estimate}
		if got := r.recheckAfter(); got != tt.want {
			t.Errorf("estimate %v: recheck after %v, want %v", tt.estimate, got, tt.want)
		}
	}
}

func TestPodsFirstAndAction(t *testing.T) {
	got := podsFirst([]resourceType{configMapsRT, deployRT, podsRT})
	if got[0] != podsRT || got[1] != configMapsRT || got[2] != deployRT {
		t.Errorf("podsFirst = %v", got)
	}

	r := &contentReport{
		found:          []count{{podsRT, 3}, {configMapsRT, 2}},
		deleted:        []count{{podsRT, 3}},
		waitingForPods: true,
	}
	if got := r.action(); got != "delete 3 pods first" {
		t.Errorf("action = %q", got)
	}
	r = &contentReport{found: []count{{podsRT, 3}, {configMapsRT, 2}}, deleted: []count{{podsRT, 3}, {configMapsRT, 2}}}
	if got := r.action(); got != "delete" {
		t.Errorf("action = %q", got)
	}
	if got := counts(r.found); got != "3 pods, 2 configmaps" {
		t.Errorf("counts = %q", got)
	}
}

// fakeContent serves one collection of "widgets" in namespace ns for
// purgeResource: deletecollection is refused (405), so every object not
// yet being deleted gets a delete of its own.
type fakeContent struct {
	mu      sync.Mutex
	items   map[string]bool // name → being deleted
	deletes []string        // "name policy"
}

func (f *fakeContent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	const collection = "/api/v1/namespaces/ns/widgets"
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == collection:
		list := struct {
			Items []metav1.PartialObjectMetadata `json:"items"`
		}{Items: []metav1.PartialObjectMetadata{}}
		for name, deleting := range f.items {
			it := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
			if deleting {
				now := metav1.Now()
				it.DeletionTimestamp = &now
				it.Finalizers = []string{"example.com/hold"}
			}
			list.Items = append(list.Items, it)
		}
		_ = json.NewEncoder(w).Encode(list)
	case r.Method == http.MethodDelete && r.URL.Path == collection:
		w.WriteHeader(http.StatusMethodNotAllowed)
		_ = json.NewEncoder(w).Encode(metav1.Status{Status: metav1.StatusFailure, Code: 405, Reason: metav1.StatusReasonMethodNotAllowed})
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, collection+"/"):
		name := strings.TrimPrefix(r.URL.Path, collection+"/")
		var opts metav1.DeleteOptions
		_ = json.NewDecoder(r.Body).Decode(&opts)
		policy := "none"
		if opts.PropagationPolicy != nil {
			policy = string(*opts.PropagationPolicy)
		}
		f.deletes = append(f.deletes, name+" "+policy)
		delete(f.items, name)
		_ = json.NewEncoder(w).Encode(metav1.Status{Status: metav1.StatusSuccess})
	default:
		http.NotFound(w, r)
	}
}

func TestPurgeFallsBackToDeletingEachObject(t *testing.T) {
	f := &fakeContent{items: map[string]bool{"a": false, "b": true, "c": false}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	rc, err := client.New(&client.Config{Server: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	c := &Controller{rc: rc, discovery: &discoverer{rc: rc, now: time.Now}, now: time.Now}
	rt, _ := deletable(client.ServedResource{
		Resource: &api.Resource{Version: "v1", Kind: "Widget", Plural: "widgets", Namespaced: true, New: api.NewUnstructured},
		Verbs:    metav1.Verbs{"list", "delete", "deletecollection"},
	})

	items, err := c.listContent(context.Background(), rt, "ns")
	if err != nil || len(items) != 3 {
		t.Fatalf("list: %d items, %v", len(items), err)
	}
	left, err := c.purgeResource(context.Background(), rt, "ns", items)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	deletes := slices.Sorted(slices.Values(f.deletes))
	f.mu.Unlock()
	if want := []string{"a Background", "c Background"}; !slices.Equal(deletes, want) {
		t.Errorf("deletes %q, want %q (b is already being deleted)", deletes, want)
	}
	if len(left) != 1 || left[0].GetName() != "b" {
		t.Errorf("left %v, want b", left)
	}
}
