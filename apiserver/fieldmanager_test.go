package apiserver

import (
	"crypto/sha256"
	"encoding/json"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
)

// The premise of applyNoops: when FieldManager.Apply returns the live
// object unchanged, it returns it unchanged again for the same inputs,
// later; when an apply changes something, its result is not the live
// object (so it is never remembered). Random objects of several kinds,
// each applied as its own configuration, then stored and read back.
func TestUnchangedApplyRepeats(t *testing.T) {
	for _, res := range []*api.Resource{api.Deployments, api.ConfigMaps, api.Services, api.Pods} {
		t.Run(res.Kind, func(t *testing.T) {
			fms, err := newFieldManagers(res)
			if err != nil {
				t.Fatal(err)
			}
			unchanged := 0
			samples := createSamples(t, res, 20)
			for i, sample := range samples {
				setTypeMeta(res, sample)
				config := asApplyConfig(t, sample)
				// What a client applies names the object, and sets no
				// metadata the server owns.
				meta := map[string]any{"name": "sample"}
				for _, k := range []string{"labels", "annotations"} {
					if v, ok := config.Object["metadata"].(map[string]any)[k]; ok {
						meta[k] = v
					}
				}
				config.Object["metadata"] = meta
				apply := func(live api.Object) (api.Object, bool) {
					t.Helper()
					out, err := fms.main.Apply(live, config.DeepCopy(), "ops", false)
					if err != nil {
						return nil, false // a random object the merge refuses
					}
					return out.(api.Object), true
				}
				empty := res.NewObject()
				setTypeMeta(res, empty)
				created, ok := apply(empty)
				if !ok {
					continue
				}
				created.SetUID(types.UID("uid"))
				created.SetResourceVersion("5")
				live := storedAndRead(t, res, created)
				if out, _ := apply(live); !apiequality.Semantic.DeepEqual(out, live) {
					continue // defaulting or the random values moved something: a change
				}
				unchanged++
				time.Sleep(time.Millisecond)
				if out, _ := apply(live); !apiequality.Semantic.DeepEqual(out, live) {
					t.Errorf("sample %d: an apply that changed nothing changes something when repeated", i)
				}
				// A changed configuration is not the live object.
				changed := config.DeepCopy()
				unstructured.SetNestedField(changed.Object, "changed", "metadata", "labels", "applied")
				out, err := fms.main.Apply(live, changed, "ops", false)
				if err != nil {
					t.Fatalf("sample %d: %v", i, err)
				}
				if apiequality.Semantic.DeepEqual(out, live) {
					t.Errorf("sample %d: an apply that changed a label returned the live object", i)
				}
			}
			t.Logf("%d of %d samples applied unchanged a second time", unchanged, len(samples))
			if unchanged < len(samples)/4 {
				t.Errorf("only %d of %d samples applied unchanged a second time", unchanged, len(samples))
			}
		})
	}
}

func asApplyConfig(t *testing.T, obj api.Object) *unstructured.Unstructured {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	u.SetManagedFields(nil)
	return u
}

// storedAndRead is obj as etcd would hold it and a read would decode it.
func storedAndRead(t *testing.T, res *api.Resource, obj api.Object) api.Object {
	t.Helper()
	data, err := encodeForStorage(res, obj)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeFromStorage(res, data, 5)
	if err != nil {
		t.Fatal(err)
	}
	setTypeMeta(res, out)
	return out
}

// applyNoops answers only for the very object (uid and resourceVersion)
// and the very call it remembered.
func TestApplyNoopsMatchesEveryInput(t *testing.T) {
	obj := &unstructured.Unstructured{}
	obj.SetNamespace("default")
	obj.SetName("w")
	obj.SetUID("uid")
	obj.SetResourceVersion("5")
	call := appliedCall{manager: "ops", config: sha256.Sum256([]byte("spec: {}"))}
	var n applyNoops
	if n.has(obj, call) {
		t.Fatal("remembered before add")
	}
	n.add(obj, call)
	if !n.has(obj, call) {
		t.Fatal("not remembered")
	}
	for name, c := range map[string]appliedCall{
		"subresource": {sub: "status", manager: "ops", config: call.config},
		"manager":     {manager: "other", config: call.config},
		"force":       {manager: "ops", force: true, config: call.config},
		"body":        {manager: "ops", config: sha256.Sum256([]byte("spec: {a: 1}"))},
	} {
		if n.has(obj, c) {
			t.Errorf("another %s matched", name)
		}
	}
	for name, change := range map[string]func(o *unstructured.Unstructured){
		"resourceVersion": func(o *unstructured.Unstructured) { o.SetResourceVersion("6") },
		"uid":             func(o *unstructured.Unstructured) { o.SetUID("other") },
		"name":            func(o *unstructured.Unstructured) { o.SetName("x") },
		"namespace":       func(o *unstructured.Unstructured) { o.SetNamespace("x") },
	} {
		o := obj.DeepCopy()
		change(o)
		if n.has(o, call) {
			t.Errorf("another %s matched", name)
		}
	}
}

// The same premise for a custom kind typed by its schema, whose field
// manager is the CRD one.
func TestUnchangedApplyRepeatsCustom(t *testing.T) {
	def := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"replicas": {Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte("1")}},
							"tags":     {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
						}},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"phase": {Type: "string"}}},
					}}}}},
		},
	}
	def.Status.AcceptedNames = def.Spec.Names
	resources, err := api.CustomResources(def)
	if err != nil {
		t.Fatal(err)
	}
	res := resources[0]
	fms, err := newFieldManagers(res)
	if err != nil {
		t.Fatal(err)
	}
	config := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default", "labels": map[string]any{"a": "1"}},
		"spec":     map[string]any{"tags": []any{"x", "y"}},
	}}
	apply := func(live api.Object, config *unstructured.Unstructured) api.Object {
		t.Helper()
		out, err := fms.main.Apply(live, config.DeepCopy(), "ops", false)
		if err != nil {
			t.Fatal(err)
		}
		return out.(api.Object)
	}
	empty := res.NewObject()
	setTypeMeta(res, empty)
	created := apply(empty, config)
	res.Default(created)
	created.SetUID("uid")
	created.SetResourceVersion("5")
	live := storedAndRead(t, res, created)
	for range 2 {
		if out := apply(live, config); !apiequality.Semantic.DeepEqual(out, live) {
			t.Fatalf("an unchanged apply of a custom object changed it: %v", out)
		}
		time.Sleep(time.Millisecond)
	}
	changed := config.DeepCopy()
	changed.Object["spec"] = map[string]any{"tags": []any{"x"}}
	if out := apply(live, changed); apiequality.Semantic.DeepEqual(out, live) {
		t.Error("an apply that dropped a tag returned the live object")
	}
}
