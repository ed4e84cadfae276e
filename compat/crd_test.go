package compat

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// widgetCRD is a CustomResourceDefinition of the kind every test of
// custom resources uses, in a group of the test's own: a schema with a
// default, bounds, an enum and a CEL rule; status and scale subresources;
// printer columns; a short name and a category.
func widgetCRD(group string) string {
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.` + group + `
spec:
  group: ` + group + `
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [toys]}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What the widget should be.
            required: [size]
            properties:
              size: {type: integer, minimum: 1, maximum: 10, description: How many parts the widget has.}
              color: {type: string, enum: [red, green, blue], default: red}
              replicas: {type: integer, minimum: 0}
            x-kubernetes-validations:
            - rule: "self.size <= 5 || self.color != 'red'"
              message: a red widget has at most 5 parts
          status:
            type: object
            properties:
              replicas: {type: integer}
              observedSize: {type: integer}
              selector: {type: string}
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
`
}

func widget(group, ns, name, spec string) string {
	return fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: %s, namespace: %s}\nspec: %s\n", group, name, ns, spec)
}

// createWidgetCRD creates the CRD with kubectl, waits until it is
// Established, and deletes it when the test ends.
func createWidgetCRD(t *testing.T, group string) {
	t.Helper()
	out := kubectlIn(t, widgetCRD(group), "apply", "-f", "-")
	if want := "customresourcedefinition.apiextensions.k8s.io/widgets." + group + " created"; !strings.Contains(out, want) {
		t.Fatalf("apply of the CRD: %q, want %q", out, want)
	}
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "crd", "widgets."+group, "--wait=false") })
	kubectl(t, "wait", "--for", "condition=Established", "--timeout=30s", "crd/widgets."+group)
}

func TestKubectlCustomResources(t *testing.T) {
	const group, ns = "kubectl.compat.minictl.io", "compat-crd"
	createWidgetCRD(t, group)
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "namespace", ns, "--wait=false") })

	// Client-side apply; the schema's default fills in the color.
	out := kubectlIn(t, widget(group, ns, "w1", "{size: 3}"), "apply", "-f", "-")
	if want := "widget." + group + "/w1 created"; !strings.Contains(out, want) {
		t.Fatalf("apply: %q, want %q", out, want)
	}
	tb := parseTable(t, kubectl(t, "get", "widgets", "-n", ns))
	wantHeader(t, tb, "NAME", "SIZE", "COLOR", "AGE")
	if row := tb.find(t, "NAME", "w1"); tb.col(t, row, "SIZE") != "3" || tb.col(t, row, "COLOR") != "red" {
		t.Errorf("w1's row: %v", row)
	}
	if got := kubectl(t, "get", "wd", "w1", "-n", ns, "-o", "jsonpath={.spec.color}"); got != "red" {
		t.Errorf("by short name, spec.color = %q, want the default red", got)
	}
	if out := kubectl(t, "get", "toys", "-n", ns, "-o", "name"); !strings.Contains(out, "widget."+group+"/w1") {
		t.Errorf("get toys (the category): %q", out)
	}

	// What the schema refuses, with the messages Kubernetes gives.
	for _, c := range []struct{ spec, want string }{
		{"{size: 11}", "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"},
		{"{size: 7}", "a red widget has at most 5 parts"},
		{"{size: 2, color: pink}", `spec.color: Unsupported value: "pink"`},
		{"{color: blue}", "spec.size: Required value"},
		{"{size: 2, bogus: 1}", `unknown field "spec.bogus"`},
	} {
		r := kubectlRun(t, widget(group, ns, "bad", c.spec), nil, "create", "-f", "-")
		if r.err == nil || !strings.Contains(r.stderr, c.want) {
			t.Errorf("create with spec %s: %v\n%s\nwant %q", c.spec, r.err, r.stderr, c.want)
		}
	}
	if r := kubectlRun(t, "", nil, "get", "widget", "bad", "-n", ns); r.err == nil {
		t.Errorf("a refused widget was stored")
	}

	// kubectl explain reads the schema from the OpenAPI document.
	out = kubectl(t, "explain", "widgets.spec")
	for _, want := range []string{"KIND:       Widget", "GROUP:      " + group, "size\t<integer> -required-", "How many parts the widget has."} {
		if !strings.Contains(out, want) {
			t.Errorf("explain widgets.spec lacks %q:\n%s", want, out)
		}
	}

	// The scale subresource, at the CRD's paths.
	if out := kubectl(t, "scale", "widget", "w1", "-n", ns, "--replicas=2"); !strings.Contains(out, "widget."+group+"/w1 scaled") {
		t.Errorf("scale: %q", out)
	}
	if got := kubectl(t, "get", "widget", "w1", "-n", ns, "-o", "jsonpath={.spec.replicas}"); got != "2" {
		t.Errorf("spec.replicas %q after scale, want 2", got)
	}

	// Server-side apply: two managers, a conflict, then forced.
	kubectlIn(t, widget(group, ns, "w2", "{size: 2}"), "apply", "--server-side", "--field-manager=alice", "-f", "-")
	r := kubectlRun(t, widget(group, ns, "w2", "{size: 4}"), nil, "apply", "--server-side", "--field-manager=bob", "-f", "-")
	if r.err == nil || !strings.Contains(r.stderr, `conflict with "alice"`) || !strings.Contains(r.stderr, ".spec.size") {
		t.Errorf("apply by bob of alice's field: %v\n%s", r.err, r.stderr)
	}
	kubectlIn(t, widget(group, ns, "w2", "{size: 4}"), "apply", "--server-side", "--field-manager=bob", "--force-conflicts", "-f", "-")
	if got := kubectl(t, "get", "widget", "w2", "-n", ns, "-o", "jsonpath={.spec.size}"); got != "4" {
		t.Errorf("spec.size %q after the forced apply, want 4", got)
	}

	// Deleting the CRD deletes its objects, then the resource is gone.
	kubectl(t, "delete", "crd", "widgets."+group, "--timeout=60s")
	r = kubectlRun(t, "", nil, "get", "widgets."+group, "-n", ns)
	if r.err == nil || !strings.Contains(r.stderr, `the server doesn't have a resource type "widgets`) {
		t.Errorf("get after the CRD's deletion: %v\n%s\n%s", r.err, r.stdout, r.stderr)
	}
}

// TestClientGoDynamicCustomResource: client-go's dynamic client and a
// dynamic informer on a custom resource, as operators use them.
func TestClientGoDynamicCustomResource(t *testing.T) {
	const group, ns = "dynamic.compat.minictl.io", "compat-dynamic"
	createWidgetCRD(t, group)
	createNamespace(t, clientset(t), ns)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: env.url})
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}

	var mu sync.Mutex
	var seen []string
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
	informer := factory.ForResource(gvr).Informer()
	note := func(what string, obj any) {
		u := obj.(*unstructured.Unstructured)
		size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s %d", what, u.GetName(), size))
		mu.Unlock()
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { note("add", obj) },
		UpdateFunc: func(_, obj any) { note("update", obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			note("delete", obj)
		},
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop with ctx.
	defer func() { cancel(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the informer did not sync")
	}

	var w unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(widget(group, ns, "d1", "{size: 1}")), &w.Object); err != nil {
		t.Fatal(err)
	}
	widgets := dyn.Resource(gvr).Namespace(ns)
	created, err := widgets.Create(ctx, &w, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if c, _, _ := unstructured.NestedString(created.Object, "spec", "color"); c != "red" {
		t.Errorf("created spec.color %q, want the default red", c)
	}
	if err := unstructured.SetNestedField(created.Object, int64(2), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if _, err := widgets.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update: %v", err)
	}
	list, err := widgets.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.GetResourceVersion() == "" {
		t.Fatalf("list: %v %+v", err, list)
	}
	if err := widgets.Delete(ctx, "d1", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	eventually(t, 30*time.Second, "the informer saw add, update and delete", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		got := strings.Join(seen, ", ")
		return got == "add d1 1, update d1 2, delete d1 2", got
	})
}
