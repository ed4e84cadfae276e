package apiserver

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/api/crd"
)

// createSamples are objects of res as a create could bring them: filled
// at random (seeded, so a failure repeats), then defaulted and prepared
// as createObject does.
func createSamples(t *testing.T, res *api.Resource, n int) []api.Object {
	t.Helper()
	var out []api.Object
	for seed := range n {
		f := randfill.New().NilChance(0.3).NumElements(0, 2).MaxDepth(10).RandSource(rand.NewSource(int64(seed))).Funcs(
			func(q *resource.Quantity, c randfill.Continue) { *q = resource.MustParse("100m") },
			func(ts *metav1.Time, c randfill.Continue) { *ts = metav1.Unix(c.Int63n(1<<32), 0) },
			func(ts *metav1.MicroTime, c randfill.Continue) {
				*ts = metav1.NewMicroTime(time.Unix(c.Int63n(1<<32), 0))
			},
			func(v *runtime.RawExtension, c randfill.Continue) { *v = runtime.RawExtension{Raw: []byte(`{"a":1}`)} },
			func(v *metav1.FieldsV1, c randfill.Continue) { *v = metav1.FieldsV1{Raw: []byte(`{}`)} },
			func(v *intstr.IntOrString, c randfill.Continue) {
				if c.Bool() {
					*v = intstr.FromInt32(c.Int31())
				} else {
					*v = intstr.FromString(c.String(8))
				}
			},
		)
		obj := res.NewObject()
		f.Fill(obj)
		obj.SetManagedFields(nil)
		obj.SetName("sample")
		if res.Default != nil {
			res.Default(obj)
		}
		if res.PrepareForCreate != nil {
			res.PrepareForCreate(obj)
		}
		out = append(out, obj)
	}
	return out
}

// sameCreateRecord fails unless the direct path records for obj what the
// field manager records, bar the entry's time; it reports whether the
// direct path took obj.
func sameCreateRecord(t *testing.T, res *api.Resource, fm *fieldManagers, obj api.Object) bool {
	t.Helper()
	byManager := recordUpdate(fm.main, res, nil, obj.DeepCopyObject().(api.Object), "writer")
	direct := obj.DeepCopyObject().(api.Object)
	if !fm.create.record(direct, "writer", time.Now()) {
		return false
	}
	want, got := byManager.GetManagedFields(), direct.GetManagedFields()
	for _, mf := range [][]metav1.ManagedFieldsEntry{want, got} {
		for i := range mf {
			if mf[i].Time == nil {
				t.Errorf("%s: entry without a time", res.Kind)
			}
			mf[i].Time = nil
		}
	}
	if !reflect.DeepEqual(want, got) {
		w, _ := json.Marshal(want)
		g, _ := json.Marshal(got)
		t.Errorf("%s: direct create record\n%s\nwant (field manager)\n%s", res.Kind, g, w)
		return true
	}
	if u, ok := direct.(*unstructured.Unstructured); ok {
		// As Unstructured.SetManagedFields sets the same entry.
		viaSetter := u.DeepCopy()
		viaSetter.SetManagedFields(u.GetManagedFields())
		if !reflect.DeepEqual(viaSetter.Object, u.Object) {
			t.Errorf("%s: the entry set directly\n%#v\nset by SetManagedFields\n%#v", res.Kind, u.Object["metadata"], viaSetter.Object["metadata"])
		}
	}
	byManager.SetManagedFields(nil)
	direct.SetManagedFields(nil)
	if !reflect.DeepEqual(byManager, direct) {
		t.Errorf("%s: the direct path changed the object otherwise than the field manager", res.Kind)
	}
	return true
}

// A create's managedFields are the same, to the byte, whether built
// directly or by the field manager, for every built-in kind and for a
// custom kind typed by deduction.
func TestCreateFieldsEqualFieldManager(t *testing.T) {
	for _, res := range api.Resources() {
		if res.Unstructured() {
			continue
		}
		t.Run(res.Kind, func(t *testing.T) {
			fm, err := newFieldManagers(res)
			if err != nil {
				t.Fatal(err)
			}
			direct := 0
			samples := createSamples(t, res, 40)
			for _, obj := range samples {
				if sameCreateRecord(t, res, fm, obj) {
					direct++
				}
			}
			if direct < len(samples)/2 {
				t.Errorf("%s: %d of %d samples took the direct path", res.Kind, direct, len(samples))
			}
		})
	}
	t.Run("Pod as clients send it", func(t *testing.T) {
		fm, err := newFieldManagers(api.Pods)
		if err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "app:1.0", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Env: []corev1.EnvVar{{Name: "MODE", Value: "bench"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
				},
			}}},
		}
		api.Pods.Default(pod)
		api.Pods.PrepareForCreate(pod)
		if !sameCreateRecord(t, api.Pods, fm, pod) {
			t.Error("a pod as clients send it did not take the direct path")
		}
	})
	t.Run("custom kind with a schema", func(t *testing.T) {
		listMap := "map"
		def := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"replicas": {Type: "integer"},
								"ports": {Type: "array", XListType: &listMap, XListMapKeys: []string{"port"},
									Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
										Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
											"port": {Type: "integer"}, "name": {Type: "string"},
										}}}},
							}},
							"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"phase": {Type: "string"}}},
						}}}}},
			},
		}
		tc, err := crd.TypeConverter(def)
		if err != nil {
			t.Fatal(err)
		}
		res := &api.Resource{Group: "example.com", Version: "v1", Kind: "Widget", Plural: "widgets", Namespaced: true,
			Subresources: []string{"status"}, New: api.NewUnstructured, TypeConverter: tc}
		fm, err := newFieldManagers(res)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"default","labels":{"a":"1"}},` +
			`"spec":{"replicas":2,"ports":[{"port":80,"name":"http"},{"port":443}]},"status":{"phase":"New"}}`)); err != nil {
			t.Fatal(err)
		}
		if !sameCreateRecord(t, res, fm, u) {
			t.Error("custom object did not take the direct path")
		}
	})
	t.Run("custom kind", func(t *testing.T) {
		res := &api.Resource{Group: "example.com", Version: "v1", Kind: "Widget", Plural: "widgets", Namespaced: true,
			Subresources: []string{"status"}, New: api.NewUnstructured}
		fm, err := newFieldManagers(res)
		if err != nil {
			t.Fatal(err)
		}
		for _, pod := range createSamples(t, api.Pods, 20) {
			setTypeMeta(res, pod)
			data, err := json.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(data); err != nil {
				t.Fatal(err)
			}
			if !sameCreateRecord(t, res, fm, u) {
				t.Errorf("custom object did not take the direct path")
			}
		}
	})
}

// An object that brings managedFields takes the field manager's path,
// which decides what they mean.
func TestCreateFieldsLeavesSentManagedFields(t *testing.T) {
	fm, err := newFieldManagers(api.ConfigMaps)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: []metav1.ManagedFieldsEntry{}}}
	if fm.create.record(cm, "writer", time.Now()) {
		t.Error("an object with managedFields: [] took the direct path")
	}
}
