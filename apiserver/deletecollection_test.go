package apiserver_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

// TestDeleteCollection: DELETE on a collection deletes what its selector
// lists, each object as a single delete would: one without finalizers is
// removed, one with a finalizer is only marked, and one outside the
// selector is left alone. The answer lists the deleted objects' last
// states.
func TestDeleteCollection(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "dc")
	const cms = "/api/v1/namespaces/dc/configmaps"
	cm := func(name, app string, finalizers ...string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}, Finalizers: finalizers},
		}
	}
	for i := range 20 {
		create[corev1.ConfigMap](t, env, cms, cm(fmt.Sprintf("a%02d", i), "a"))
	}
	create[corev1.ConfigMap](t, env, cms, cm("held", "a", "example.com/hold"))
	create[corev1.ConfigMap](t, env, cms, cm("other", "b"))

	deleted := call[corev1.ConfigMapList](t, env, http.MethodDelete, cms+"?labelSelector=app%3Da", "", nil, http.StatusOK)
	var names []string
	for _, it := range deleted.Items {
		names = append(names, it.Name)
	}
	slices.Sort(names)
	if len(names) != 21 || names[0] != "a00" || names[20] != "held" {
		t.Errorf("the answer lists %v, want a00..a19 and held", names)
	}

	left := get[corev1.ConfigMapList](t, env, cms)
	var leftNames []string
	for _, it := range left.Items {
		leftNames = append(leftNames, it.Name)
		if it.Name == "held" && it.DeletionTimestamp == nil {
			t.Errorf("held has a finalizer: it should be marked for deletion, not left as it was")
		}
	}
	slices.Sort(leftNames)
	if !slices.Equal(leftNames, []string{"held", "other"}) {
		t.Errorf("left after deletecollection: %v, want held (finalizer) and other (not selected)", leftNames)
	}
}
