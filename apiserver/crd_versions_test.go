package apiserver_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/minictl/minictl/internal/testenv"
)

const widgetsV2 = "/apis/example.com/v2/namespaces/default/widgets"

// atV2 is a widget as a client of example.com/v2 sends it.
func atV2(w map[string]any) map[string]any {
	w["apiVersion"] = "example.com/v2"
	return w
}

// A custom resource served at two versions has one etcd watch and one
// watch cache: watchers of each version see every change, each in its own
// version, with their selectors applied to that version's objects.
func TestCustomResourceVersionsShareOneWatch(t *testing.T) {
	env := testenv.Start(t)
	createCRD(t, env, widgetCRD())
	if n := metric(t, env, `minictl_etcd_watches{resource="widgets"}`); n != 1 {
		t.Fatalf("etcd watches of widgets = %v, want 1 for its two versions", n)
	}

	v1 := watch(t, env, widgetsV1+"?watch=true")
	v2red := watch(t, env, widgetsV2+"?watch=true&fieldSelector=spec.color%3Dred")

	create[unstructured.Unstructured](t, env, widgetsV1, widget("w1", 1, "red", nil))
	create[unstructured.Unstructured](t, env, widgetsV2, atV2(widget("w2", 1, "blue", nil)))
	for _, ev := range v1.expect(t, "ADDED w1", "ADDED w2") {
		if !strings.Contains(string(ev.Object), `"apiVersion":"example.com/v1"`) {
			t.Errorf("v1 watcher got %s", ev.Object)
		}
	}
	ev := v2red.expect(t, "ADDED w1")[0]
	if !strings.Contains(string(ev.Object), `"apiVersion":"example.com/v2"`) {
		t.Errorf("v2 watcher got %s", ev.Object)
	}

	// A change through v2 that changes nothing writes nothing: the object
	// is compared as stored, not as v2 shows it.
	w1 := get[unstructured.Unstructured](t, env, widgetsV2+"/w1")
	same := update[unstructured.Unstructured](t, env, widgetsV2+"/w1", w1.Object)
	if same.GetResourceVersion() != w1.GetResourceVersion() {
		t.Errorf("a no-op update at v2 moved resourceVersion %s to %s", w1.GetResourceVersion(), same.GetResourceVersion())
	}
	// The next event either watcher sees is the next real change.
	patch[unstructured.Unstructured](t, env, widgetsV2+"/w2", mergePatch, map[string]any{"spec": map[string]any{"color": "red"}})
	v1.expect(t, "MODIFIED w2")
	v2red.expect(t, "ADDED w2") // it entered the selector

	var list unstructured.UnstructuredList
	do(t, env, http.MethodGet, widgetsV2, "", nil).want(t, http.StatusOK).into(t, &list)
	if len(list.Items) != 2 {
		t.Fatalf("list at v2: %d items, want 2", len(list.Items))
	}
	for _, it := range list.Items {
		if it.GetAPIVersion() != "example.com/v2" {
			t.Errorf("list at v2: item %s has apiVersion %s", it.GetName(), it.GetAPIVersion())
		}
	}
}

// A definition may store objects in a version it does not serve: they are
// written and read only through the served one, and etcd holds the storage
// version, defaulted on the way out with that version's schema, as
// kube-apiserver reads custom objects.
func TestCustomResourceStoredInAnUnservedVersion(t *testing.T) {
	env := testenv.Start(t)
	crd := widgetCRD()
	versions := crd["spec"].(map[string]any)["versions"].([]any)
	v1 := versions[0].(map[string]any)
	v1["served"] = false
	// Only the storage version defaults spec.size, and only it knows
	// spec.legacy.
	schema := func(spec map[string]any) map[string]any {
		return map[string]any{"openAPIV3Schema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"spec":   map[string]any{"type": "object", "properties": spec},
				"status": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
			},
		}}
	}
	v1["schema"] = schema(map[string]any{
		"replicas": map[string]any{"type": "integer"},
		"color":    map[string]any{"type": "string"},
		"selector": map[string]any{"type": "string"},
		"size":     map[string]any{"type": "string", "default": "small"},
		"legacy":   map[string]any{"type": "string", "default": "yes"},
	})
	versions[1].(map[string]any)["schema"] = schema(map[string]any{
		"replicas": map[string]any{"type": "integer"},
		"color":    map[string]any{"type": "string"},
		"selector": map[string]any{"type": "string"},
		"size":     map[string]any{"type": "string"},
	})
	createCRD(t, env, crd)
	do(t, env, http.MethodGet, widgetsV1, "", nil).wantStatus(t, http.StatusNotFound, "NotFound")

	w := watch(t, env, widgetsV2+"?watch=true")
	created := create[unstructured.Unstructured](t, env, widgetsV2, atV2(widget("w1", 1, "red", nil)))
	if created.GetAPIVersion() != "example.com/v2" {
		t.Errorf("created apiVersion %s", created.GetAPIVersion())
	}
	ev := w.expect(t, "ADDED w1")[0]
	if !strings.Contains(string(ev.Object), `"apiVersion":"example.com/v2"`) {
		t.Errorf("watch at v2 got %s", ev.Object)
	}
	kv, err := env.Store.Get(t.Context(), "/registry/example.com/widgets/default/w1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kv.Value), `"apiVersion":"example.com/v1"`) {
		t.Errorf("etcd holds %s, want the storage version", kv.Value)
	}

	// An object stored before its version had the defaults, read at v2:
	// the storage version's defaults, then conversion, then v2's schema,
	// which knows no spec.legacy, prunes that.
	stored := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"old","namespace":"default","uid":"u-old","creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"color":"blue"}}`
	if _, err := env.Store.Create(t.Context(), "/registry/example.com/widgets/default/old", []byte(stored)); err != nil {
		t.Fatal(err)
	}
	w.expect(t, "ADDED old")
	old := get[unstructured.Unstructured](t, env, widgetsV2+"/old")
	if size, _, _ := unstructured.NestedString(old.Object, "spec", "size"); size != "small" {
		t.Errorf("read at v2: spec.size %q, want the storage version's default: %v", size, old.Object["spec"])
	}
	if _, found, _ := unstructured.NestedString(old.Object, "spec", "legacy"); found {
		t.Errorf("read at v2 has spec.legacy, which v2's schema does not know: %v", old.Object["spec"])
	}
	if c, _, _ := unstructured.NestedString(old.Object, "spec", "color"); c != "blue" || old.GetAPIVersion() != "example.com/v2" {
		t.Errorf("read at v2: %v", old.Object)
	}
}

// A custom object takes JSON and merge patches and server-side apply, not
// a strategic merge patch (its schema has no patch strategies), and its
// OpenAPI says so, as kube-apiserver's does.
func TestCustomObjectPatchTypes(t *testing.T) {
	env := testenv.Start(t)
	createCRD(t, env, widgetCRD())
	create[unstructured.Unstructured](t, env, widgetsV1, widget("w1", 1, "red", nil))
	st := do(t, env, http.MethodPatch, widgetsV1+"/w1", strategicPtch, `{"spec":{"color":"blue"}}`).
		wantStatus(t, http.StatusUnsupportedMediaType, "UnsupportedMediaType")
	_, accepted, _ := strings.Cut(st.Message, "accepted media types are")
	if !strings.Contains(accepted, "application/merge-patch+json") || !strings.Contains(accepted, "application/apply-patch+yaml") || strings.Contains(accepted, "strategic") {
		t.Errorf("message %q does not list what a custom object takes", st.Message)
	}
	if c, _, _ := unstructured.NestedString(get[unstructured.Unstructured](t, env, widgetsV1+"/w1").Object, "spec", "color"); c != "red" {
		t.Errorf("the refused patch changed spec.color to %q", c)
	}

	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	do(t, env, http.MethodGet, "/openapi/v2", "", nil).want(t, http.StatusOK).into(t, &doc)
	consumes := func(path string) []string {
		var op struct {
			Consumes []string `json:"consumes"`
		}
		if err := json.Unmarshal(doc.Paths[path]["patch"], &op); err != nil {
			t.Fatalf("the PATCH of %s: %v", path, err)
		}
		return op.Consumes
	}
	custom := consumes("/apis/example.com/v1/namespaces/{namespace}/widgets/{name}")
	if !slices.Equal(custom, []string{"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"}) {
		t.Errorf("a widget's PATCH consumes %v", custom)
	}
	builtin := consumes("/api/v1/namespaces/{namespace}/pods/{name}")
	if !slices.Contains(builtin, "application/strategic-merge-patch+json") || !slices.Contains(builtin, "application/apply-patch+yaml") {
		t.Errorf("a pod's PATCH consumes %v", builtin)
	}
}
