package namespace

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/testenv"
)

// Discovery against the real API server finds every namespaced resource
// that can be emptied, and nothing else.
func TestDiscoveryOfRealServer(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d := &discoverer{rc: rc, now: time.Now}
	res := d.namespacedResources(context.Background())
	if res.err != nil || res.parseErr != nil {
		t.Fatalf("discovery: %v, %v", res.err, res.parseErr)
	}
	got := map[string]resourceType{}
	for _, rt := range res.resources {
		got[rt.String()] = rt
	}
	wants := []string{
		"pods.", "podtemplates.", "services.", "endpoints.", "configmaps.", "secrets.", "serviceaccounts.", "events.",
		"resourcequotas.", "limitranges.", "leases.coordination.k8s.io", "replicasets.apps", "deployments.apps",
		"replicationcontrollers.", "daemonsets.apps", "controllerrevisions.apps", "jobs.batch", "cronjobs.batch",
		"poddisruptionbudgets.policy", "roles.rbac.authorization.k8s.io", "rolebindings.rbac.authorization.k8s.io",
		"endpointslices.discovery.k8s.io", "ingresses.networking.k8s.io", "networkpolicies.networking.k8s.io",
		"persistentvolumeclaims.", "statefulsets.apps", "horizontalpodautoscalers.autoscaling",
	}
	for _, want := range wants {
		rt, ok := got[want]
		if !ok {
			t.Errorf("%s not discovered", want)
			continue
		}
		if !rt.deleteCollection {
			t.Errorf("%s: deletecollection not seen", want)
		}
	}
	for name := range got {
		switch name {
		case "namespaces.", "nodes.":
			t.Errorf("cluster-scoped %s discovered", name)
		}
	}
	if len(got) != len(wants) {
		t.Errorf("discovered %d resources: %v", len(got), res.resources)
	}
}

// fakeDiscovery serves discovery documents from a map of path → body, and
// 503 for the paths in broken; it counts requests.
type fakeDiscovery struct {
	mu       sync.Mutex
	docs     map[string]any
	broken   map[string]bool
	requests int
}

func (f *fakeDiscovery) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	if f.broken[r.URL.Path] {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(metav1.Status{Status: metav1.StatusFailure, Code: 503,
			Reason: metav1.StatusReasonServiceUnavailable, Message: "the server is currently unable to handle the request"})
		return
	}
	doc, ok := f.docs[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}

func (f *fakeDiscovery) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

func (f *fakeDiscovery) setDoc(path string, doc any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.docs[path] = doc
}

func (f *fakeDiscovery) setBroken(path string, broken bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.broken[path] = broken
}

// A group that cannot be read makes discovery incomplete but still yields
// the others; a group version that does not parse is reported apart; only
// a complete answer is cached, and only for discoveryTTL.
func TestDiscoveryPartialFailureAndCache(t *testing.T) {
	verbs := metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "watch"}
	f := &fakeDiscovery{
		broken: map[string]bool{"/apis/metrics.example.com/v1": true},
		docs: map[string]any{
			"/api": metav1.APIVersions{Versions: []string{"v1"}},
			"/apis": metav1.APIGroupList{Groups: []metav1.APIGroup{
				{Name: "metrics.example.com", PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "metrics.example.com/v1", Version: "v1"}},
				{Name: "widgets.example.com", PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "widgets.example.com/v2", Version: "v2"},
					Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "widgets.example.com/v2"}, {GroupVersion: "widgets.example.com/v1"}}},
				{Name: "odd.example.com", PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "odd.example.com/v1", Version: "v1"}},
			}},
			"/api/v1": metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
				{Name: "pods", Namespaced: true, Verbs: verbs},
				{Name: "pods/status", Namespaced: true, Verbs: metav1.Verbs{"get", "update"}},
				{Name: "nodes", Namespaced: false, Verbs: verbs},
				{Name: "bindings", Namespaced: true, Verbs: metav1.Verbs{"create"}},
				{Name: "tokens", Namespaced: true, Verbs: metav1.Verbs{"list", "delete"}},
			}},
			"/apis/widgets.example.com/v2": metav1.APIResourceList{GroupVersion: "widgets.example.com/v2", APIResources: []metav1.APIResource{
				{Name: "widgets", Namespaced: true, Verbs: verbs},
			}},
			"/apis/widgets.example.com/v1": metav1.APIResourceList{GroupVersion: "widgets.example.com/v1", APIResources: []metav1.APIResource{
				{Name: "widgets", Namespaced: true, Verbs: verbs},
			}},
			"/apis/odd.example.com/v1": metav1.APIResourceList{GroupVersion: "odd.example.com/v1/extra", APIResources: []metav1.APIResource{
				{Name: "oddities", Namespaced: true, Verbs: verbs},
			}},
		},
	}
	srv := httptest.NewServer(f)
	defer srv.Close()
	rc, err := client.New(&client.Config{Server: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := &discoverer{rc: rc, now: func() time.Time { return now }}
	ctx := context.Background()

	res := d.namespacedResources(ctx)
	if gerr, ok := client.IsGroupDiscoveryFailed(res.err); !ok || len(gerr.Groups) != 1 || gerr.Groups[schema.GroupVersion{Group: "metrics.example.com", Version: "v1"}] == nil {
		t.Errorf("err = %v; want metrics.example.com/v1 failing", res.err)
	}
	if res.parseErr == nil {
		t.Error("the unparsable group version was not reported")
	}
	var names []string
	for _, rt := range res.resources {
		names = append(names, rt.String())
	}
	want := []string{"pods.", "tokens.", "widgets.widgets.example.com"}
	if len(names) != len(want) {
		t.Fatalf("resources %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("resources %v, want %v", names, want)
		}
	}
	if res.resources[1].deleteCollection {
		t.Error("tokens: deletecollection was not served")
	}
	if res.resources[2].res.Version != "v2" {
		t.Errorf("widgets through %s, want the preferred v2", res.resources[2].res.Version)
	}

	// Incomplete answers are not cached.
	before := f.count()
	d.namespacedResources(ctx)
	if f.count() == before {
		t.Error("an incomplete answer was cached")
	}

	// A complete one is, until discoveryTTL passes.
	f.setBroken("/apis/metrics.example.com/v1", false)
	f.setDoc("/apis/metrics.example.com/v1", metav1.APIResourceList{GroupVersion: "metrics.example.com/v1"})
	f.setDoc("/apis/odd.example.com/v1", metav1.APIResourceList{GroupVersion: "odd.example.com/v1"})
	if res := d.namespacedResources(ctx); res.err != nil || res.parseErr != nil {
		t.Fatalf("discovery: %v, %v", res.err, res.parseErr)
	}
	before = f.count()
	now = now.Add(discoveryTTL - time.Second)
	d.namespacedResources(ctx)
	if f.count() != before {
		t.Errorf("discovery asked the server again within its TTL")
	}
	now = now.Add(2 * time.Second)
	d.namespacedResources(ctx)
	if f.count() == before {
		t.Errorf("discovery did not ask again after its TTL")
	}
	before = f.count()
	d.invalidate()
	d.namespacedResources(ctx)
	if f.count() == before {
		t.Errorf("discovery did not ask again after invalidate")
	}
}
