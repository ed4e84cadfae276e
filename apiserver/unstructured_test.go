package apiserver_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
)

// A catalogue entry is all the server needs to serve a kind, even one with
// no Go type: storage, every verb, discovery and OpenAPI follow from it.
func TestServesEveryKindOfItsCatalogue(t *testing.T) {
	const path = "/apis/example.com/v1/namespaces/default/widgets"
	builtin := testenv.Start(t)
	do(t, builtin, http.MethodGet, path, "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)

	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{Resources: api.Resources().With(testenv.Widgets())}})

	var list metav1.APIResourceList
	do(t, env, http.MethodGet, "/apis/example.com/v1", "", nil).want(t, http.StatusOK).into(t, &list)
	if len(list.APIResources) != 1 || list.APIResources[0].Name != "widgets" || !list.APIResources[0].Namespaced ||
		!slices.Contains(list.APIResources[0].Verbs, "deletecollection") {
		t.Fatalf("discovery of example.com/v1 = %+v", list.APIResources)
	}

	w := map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1", "finalizers": []string{"example.com/hold"}},
		"spec":     map[string]any{"size": 3},
	}
	created := &unstructured.Unstructured{}
	do(t, env, http.MethodPost, path, jsonType, w).want(t, http.StatusCreated).into(t, created)
	if created.GetUID() == "" || created.GetNamespace() != "default" || created.GetKind() != "Widget" {
		t.Fatalf("created = %v", created.Object)
	}
	if size, _, _ := unstructured.NestedInt64(created.Object, "spec", "size"); size != 3 {
		t.Errorf("created spec.size = %d, want 3: fields the server does not know are kept", size)
	}
	patched := &unstructured.Unstructured{}
	do(t, env, http.MethodPatch, path+"/w1", mergePatch, `{"spec":{"size":4}}`).want(t, http.StatusOK).into(t, patched)
	if size, _, _ := unstructured.NestedInt64(patched.Object, "spec", "size"); size != 4 {
		t.Errorf("patched spec.size = %d, want 4", size)
	}

	// Such a kind has no protobuf: a client that prefers it gets JSON.
	r := getAccept(t, env, path, api.ProtobufMediaType+", application/json").want(t, http.StatusOK)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("list asking protobuf first: Content-Type %q, want JSON", ct)
	}
	var items unstructured.UnstructuredList
	r.into(t, &items)
	if items.GetKind() != "WidgetList" || len(items.Items) != 1 || items.Items[0].GetName() != "w1" {
		t.Errorf("list = %v", items.Object)
	}
	var table metav1.Table
	getAccept(t, env, path, kubectlAccept).want(t, http.StatusOK).into(t, &table)
	if len(table.Rows) != 1 || table.Rows[0].Cells[0] != "w1" {
		t.Errorf("table rows = %+v", table.Rows)
	}
	var doc struct {
		Components struct{ Schemas map[string]any }
	}
	do(t, env, http.MethodGet, "/openapi/v3/apis/example.com/v1", "", nil).want(t, http.StatusOK).into(t, &doc)
	if doc.Components.Schemas["com.example.v1.Widget"] == nil || doc.Components.Schemas["com.example.v1.WidgetList"] == nil {
		t.Errorf("openapi v3 schemas: %v", keys(doc.Components.Schemas))
	}

	// Finalizers hold it, as any object.
	do(t, env, http.MethodDelete, path+"/w1", jsonType, nil).want(t, http.StatusOK)
	held := &unstructured.Unstructured{}
	do(t, env, http.MethodGet, path+"/w1", "", nil).want(t, http.StatusOK).into(t, held)
	if held.GetDeletionTimestamp() == nil {
		t.Fatalf("deleted widget with a finalizer: %v", held.Object)
	}
	do(t, env, http.MethodPatch, path+"/w1", mergePatch, `{"metadata":{"finalizers":null}}`).want(t, http.StatusOK)
	do(t, env, http.MethodGet, path+"/w1", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
