package crd

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestTypeConverter(t *testing.T) {
	crd := testCRD(t, widgetSchema)
	tc, err := TypeConverter(crd)
	if err != nil {
		t.Fatalf("TypeConverter: %v", err)
	}
	typed := func(j string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: obj(t, j)}
	}
	a, err := tc.ObjectToTyped(typed(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","labels":{"a":"1"},"finalizers":["x"]},
		"spec":{"name":"a","ports":[{"name":"http","port":80}],"tags":["a"],"free":{"anything":{"goes":1}},"port":"web"}}`))
	if err != nil {
		t.Fatalf("ObjectToTyped: %v", err)
	}
	b, err := tc.ObjectToTyped(typed(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","labels":{"b":"2"},"finalizers":["y"]},
		"spec":{"ports":[{"name":"https","port":443}],"tags":["b"],"port":8080}}`))
	if err != nil {
		t.Fatalf("ObjectToTyped: %v", err)
	}
	merged, err := a.Merge(b)
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	got, err := tc.TypedToObject(merged)
	if err != nil {
		t.Fatalf("TypedToObject: %v", err)
	}
	want := obj(t, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","labels":{"a":"1","b":"2"},"finalizers":["x","y"]},
		"spec":{"name":"a","ports":[{"name":"http","port":80},{"name":"https","port":443}],"tags":["a","b"],"free":{"anything":{"goes":1}},"port":8080}}`)
	if u := got.(*unstructured.Unstructured).Object; !reflect.DeepEqual(u, want) {
		t.Errorf("merged =\n%v\nwant (list-type map and set merge by key, labels granular, int-or-string scalar)\n%v", u, want)
	}

	if _, err := tc.ObjectToTyped(typed(`{"apiVersion":"example.com/v1","kind":"Widget","spec":{"replicas":"three"}}`)); err == nil {
		t.Errorf("a string where the schema says integer typed without error")
	}
	if _, err := tc.ObjectToTyped(typed(`{"apiVersion":"example.com/v2","kind":"Widget"}`)); err == nil {
		t.Errorf("an unserved version typed without error")
	}
}

func TestTypeConverterWithoutSchemaDeduces(t *testing.T) {
	crd := testCRD(t, widgetSchema)
	crd.Spec.Versions[0].Schema = nil
	tc, err := TypeConverter(crd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.ObjectToTyped(&unstructured.Unstructured{Object: obj(t, `{"apiVersion":"example.com/v1","kind":"Widget","x":{"y":[1]}}`)}); err != nil {
		t.Errorf("deduced typing: %v", err)
	}
}
