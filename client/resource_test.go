package client_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/testenv"
)

// A client by descriptor speaks to a kind nobody compiled in, with
// unstructured objects.
func TestForResourceWithoutGoType(t *testing.T) {
	widgets := testenv.Widgets()
	rc, ns := setup(t, testenv.Options{Server: apiserver.Config{Resources: api.Resources().With(widgets)}})
	ctx := ctxFor(t)
	c := client.ForResource(rc, widgets)

	w, err := c.Watch(ctx, ns, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1)}}}
	obj.SetName("w1")
	obj.SetNamespace(ns)
	created, err := c.Create(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	u, ok := created.(*unstructured.Unstructured)
	if !ok || u.GetUID() == "" || u.GetKind() != "Widget" || u.GetAPIVersion() != "example.com/v1" {
		t.Fatalf("created %T %+v", created, created)
	}
	if obj.GetKind() != "" {
		t.Error("Create changed the object passed to it")
	}
	if ev := next(t, w); ev.Type != watch.Added || ev.Object.GetName() != "w1" {
		t.Fatalf("watch: %s %v", ev.Type, ev.Object)
	}

	patched, err := c.Patch(ctx, ns, "w1", types.MergePatchType, []byte(`{"spec":{"size":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(patched.(*unstructured.Unstructured).Object, "spec", "size"); size != 2 {
		t.Errorf("patched spec.size = %d, want 2", size)
	}
	if ev := next(t, w); ev.Type != watch.Modified || ev.Object.GetResourceVersion() != patched.GetResourceVersion() {
		t.Fatalf("watch: %s %v", ev.Type, ev.Object)
	}
	list, err := c.List(ctx, ns, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].GetName() != "w1" || list.Items[0].GetObjectKind().GroupVersionKind().Kind != "Widget" {
		t.Fatalf("list = %+v", list.Items)
	}
	if err := c.Delete(ctx, ns, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, ns, "w1"); !client.IsNotFound(err) {
		t.Fatalf("get after delete: %v, want NotFound", err)
	}
}

// A client by descriptor of a kind that has a Go type hands out that type,
// as For's client does.
func TestForResourceOfATypedKind(t *testing.T) {
	rc, ns := setup(t, testenv.Options{})
	ctx := ctxFor(t)
	c := client.ForResource(rc, api.ConfigMaps)
	if _, err := c.Create(ctx, configMap(ns, "cfg", nil, map[string]string{"k": "v"})); err != nil {
		t.Fatal(err)
	}
	list, err := c.List(ctx, ns, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("list has %d items, want 1", len(list.Items))
	}
	cm, ok := list.Items[0].(*corev1.ConfigMap)
	if !ok || cm.Data["k"] != "v" || cm.Kind != "ConfigMap" {
		t.Fatalf("item = %T %+v", list.Items[0], list.Items[0])
	}
}

// List items of a built-in kind carry no apiVersion or kind in
// kube-apiserver's JSON; a client by descriptor of a kind it decodes
// unstructured takes them all the same, numbers as integers.
func TestForResourceListItemsWithoutKind(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"WidgetList","apiVersion":"example.com/v1","metadata":{"resourceVersion":"7"},
			"items":[{"metadata":{"name":"a","namespace":"ns"},"spec":{"size":3}}]}`))
	}))
	defer srv.Close()
	rc, err := client.New(&client.Config{Server: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	list, err := client.ForResource(rc, testenv.Widgets()).List(ctxFor(t), "ns", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if list.ResourceVersion != "7" || len(list.Items) != 1 {
		t.Fatalf("list = %+v", list)
	}
	u := list.Items[0].(*unstructured.Unstructured)
	if u.GetName() != "a" || u.GetKind() != "Widget" || u.GetAPIVersion() != "example.com/v1" {
		t.Errorf("item = %v", u.Object)
	}
	if size, ok, _ := unstructured.NestedInt64(u.Object, "spec", "size"); !ok || size != 3 {
		t.Errorf("spec.size = %v (found %v), want the integer 3", size, ok)
	}
}
