package client_test

import (
	"testing"
	"time"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/testenv"
)

// Discovery of a real server resolves the kinds minictl compiled in to
// their catalogue entries, and makes an unstructured entry for any other.
func TestServerPreferredResources(t *testing.T) {
	t.Parallel()
	widgets := testenv.Widgets()
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{Resources: api.Resources().With(widgets)}})
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	served, err := rc.ServerPreferredResources(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byGR := map[string]client.ServedResource{}
	for _, s := range served {
		byGR[s.Resource.GroupResource().String()] = s
	}
	if s := byGR["pods"]; s.Resource != api.Pods {
		t.Errorf("pods resolved to %+v, want the catalogue's entry", s.Resource)
	}
	w, ok := byGR["widgets.example.com"]
	if !ok {
		t.Fatalf("widgets not discovered: %d resources", len(served))
	}
	if w.Resource == widgets || !w.Resource.Unstructured() {
		t.Errorf("widgets: want a new unstructured entry, got %+v", w.Resource)
	}
	r := w.Resource
	if r.Kind != "Widget" || r.Version != "v1" || !r.Namespaced || r.Singular != "widget" {
		t.Errorf("widgets entry %+v", r)
	}
	if !w.Supports("list", "watch", "delete", "deletecollection") {
		t.Errorf("widgets verbs %v", w.Verbs)
	}
	if _, ok := byGR["pods/status"]; ok {
		t.Error("a subresource was listed as a resource")
	}
	gc := served.Catalogue("list", "watch", "delete")
	if _, ok := gc.Lookup("example.com", "v1", "widgets"); !ok {
		t.Error("widgets not in the catalogue of deletable resources")
	}
	if _, ok := gc.Lookup("", "v1", "bindings"); ok {
		t.Error("bindings (create only) in the catalogue of deletable resources")
	}
}
