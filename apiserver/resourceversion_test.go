package apiserver

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
)

// TestWithResourceVersion: splicing the resourceVersion into the stored
// JSON gives exactly what encoding the object with it gives, for every
// kind and every combination of metadata fields around it.
func TestWithResourceVersion(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	grace := int64(30)
	yes := true
	metas := map[string]func(m *metav1.ObjectMeta){
		"name only": func(m *metav1.ObjectMeta) { m.Name = "a" },
		"empty":     func(m *metav1.ObjectMeta) {},
		"uid":       func(m *metav1.ObjectMeta) { m.Name, m.Namespace, m.UID = "a", "ns", "u-1" },
		"everything": func(m *metav1.ObjectMeta) {
			m.Name, m.GenerateName, m.Namespace, m.UID = "a", "a-", "ns", "u-1"
			m.Generation = 3
			m.CreationTimestamp = now
			m.DeletionTimestamp = &now
			m.DeletionGracePeriodSeconds = &grace
			m.Labels = map[string]string{"app": "x", "resourceVersion": `"1"`}
			m.Annotations = map[string]string{"last": `{"metadata":{"resourceVersion":"1"}}`}
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "r", UID: "u-2", Controller: &yes}}
			m.Finalizers = []string{"example.com/hold"}
		},
		"labels first": func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"a": "b"} },
		"finalizers":   func(m *metav1.ObjectMeta) { m.Name, m.Finalizers = "a", []string{"f"} },
	}
	for _, res := range api.Resources() {
		for name, set := range metas {
			t.Run(res.Plural+"/"+name, func(t *testing.T) {
				obj := res.NewObject()
				var m metav1.ObjectMeta
				set(&m)
				obj.SetName(m.Name)
				obj.SetGenerateName(m.GenerateName)
				obj.SetNamespace(m.Namespace)
				obj.SetUID(m.UID)
				obj.SetGeneration(m.Generation)
				obj.SetCreationTimestamp(m.CreationTimestamp)
				obj.SetDeletionTimestamp(m.DeletionTimestamp)
				obj.SetDeletionGracePeriodSeconds(m.DeletionGracePeriodSeconds)
				obj.SetLabels(m.Labels)
				obj.SetAnnotations(m.Annotations)
				obj.SetOwnerReferences(m.OwnerReferences)
				obj.SetFinalizers(m.Finalizers)
				if pod, ok := obj.(*corev1.Pod); ok {
					pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "i"}}
					pod.Status.Phase = corev1.PodRunning
				}
				setTypeMeta(res, obj)
				// JSON, as custom objects (and data dirs from before
				// protobuf) are stored; protobuf's stamp is api's.
				stored, err := marshalObject(obj)
				if err != nil {
					t.Fatal(err)
				}
				got, ok := withResourceVersion(stored, 12345)
				if !ok {
					t.Fatalf("withResourceVersion refused %s", stored)
				}
				obj.SetResourceVersion("12345")
				want, _ := json.Marshal(obj)
				if !bytes.Equal(got, want) {
					t.Fatalf("got  %s\nwant %s", got, want)
				}
				again, ok := restampResourceVersion(got, 12345, 7)
				obj.SetResourceVersion("7")
				want, _ = json.Marshal(obj)
				if !ok || !bytes.Equal(again, want) {
					t.Fatalf("restamp: got %s\nwant %s", again, want)
				}
			})
		}
	}
}

func TestWithResourceVersionRefuses(t *testing.T) {
	for _, data := range []string{
		``, `[]`, `{}`, `{"kind":"Pod"}`, `{"metadata":"x"}`, `{"metadata":{"resourceVersion":"1"}}`,
		`{"metadata":{"name":"a"`, `{"metadata":{"name":"a\"}}`,
	} {
		if out, ok := withResourceVersion([]byte(data), 5); ok {
			t.Errorf("withResourceVersion(%s) = %s, want refusal", data, out)
		}
	}
	if _, ok := restampResourceVersion([]byte(`{"metadata":{"name":"a"}}`), 5, 6); ok {
		t.Error("restamp of an object without resourceVersion 5 succeeded")
	}
}
