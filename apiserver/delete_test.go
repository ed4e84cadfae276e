package apiserver_test

import (
	"net/http"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/internal/testenv"
)

func TestDeletePodGracefully(t *testing.T) {
	env := testenv.Start(t)

	t.Run("a scheduled pod waits for its grace period", func(t *testing.T) {
		create[corev1.Pod](t, env, podPath("default", ""), pod("running", "node-1", nil))
		got := call[corev1.Pod](t, env, http.MethodDelete, podPath("default", "running"), "", nil, http.StatusOK)
		if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 30 {
			t.Fatalf("deleted pod: deletionTimestamp %v, deletionGracePeriodSeconds %v; want set and 30",
				got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
		}
		stored := get[corev1.Pod](t, env, podPath("default", "running"))
		if stored.DeletionTimestamp == nil || *stored.DeletionGracePeriodSeconds != 30 {
			t.Errorf("stored pod not marked for deletion: %v %v", stored.DeletionTimestamp, stored.DeletionGracePeriodSeconds)
		}

		// Deleting again with the same grace period changes nothing.
		again := call[corev1.Pod](t, env, http.MethodDelete, podPath("default", "running"), "", nil, http.StatusOK)
		if again.ResourceVersion != stored.ResourceVersion {
			t.Errorf("a second delete moved the resourceVersion from %s to %s", stored.ResourceVersion, again.ResourceVersion)
		}

		// The kubelet's final delete: grace period 0 removes it.
		do(t, env, http.MethodDelete, podPath("default", "running")+"?gracePeriodSeconds=0", "", nil).want(t, http.StatusOK)
		do(t, env, http.MethodGet, podPath("default", "running"), "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	})

	t.Run("gracePeriodSeconds in DeleteOptions", func(t *testing.T) {
		create[corev1.Pod](t, env, podPath("default", ""), pod("short", "node-1", nil))
		got := call[corev1.Pod](t, env, http.MethodDelete, podPath("default", "short"), jsonType,
			`{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":5}`, http.StatusOK)
		if got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 5 {
			t.Errorf("deletionGracePeriodSeconds %v, want 5", got.DeletionGracePeriodSeconds)
		}
		do(t, env, http.MethodDelete, podPath("default", "short")+"?gracePeriodSeconds=0", "", nil).want(t, http.StatusOK)
		do(t, env, http.MethodGet, podPath("default", "short"), "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	})

	t.Run("an unscheduled pod goes at once", func(t *testing.T) {
		create[corev1.Pod](t, env, podPath("default", ""), pod("pending", "", nil))
		do(t, env, http.MethodDelete, podPath("default", "pending"), "", nil).want(t, http.StatusOK)
		do(t, env, http.MethodGet, podPath("default", "pending"), "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	})
}

func TestFinalizersBlockRemoval(t *testing.T) {
	env := testenv.Start(t)
	const hold = "example.com/hold"

	for _, tc := range []struct {
		name   string
		remove func(t *testing.T, path string, cur *corev1.ConfigMap) *reply
	}{
		{"PUT", func(t *testing.T, path string, cur *corev1.ConfigMap) *reply {
			in := cur.DeepCopy()
			in.Finalizers = nil
			return do(t, env, http.MethodPut, path, jsonType, in)
		}},
		{"merge patch", func(t *testing.T, path string, _ *corev1.ConfigMap) *reply {
			return do(t, env, http.MethodPatch, path, mergePatch, `{"metadata":{"finalizers":null}}`)
		}},
		{"JSON patch", func(t *testing.T, path string, _ *corev1.ConfigMap) *reply {
			return do(t, env, http.MethodPatch, path, jsonPatch, `[{"op":"remove","path":"/metadata/finalizers/0"}]`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "held-" + map[string]string{"PUT": "put", "merge patch": "merge", "JSON patch": "json"}[tc.name]
			path := cmPath("default", name)
			in := configMap(name, nil, nil)
			in.Finalizers = []string{hold}
			create[corev1.ConfigMap](t, env, cmPath("default", ""), in)

			got := call[corev1.ConfigMap](t, env, http.MethodDelete, path, "", nil, http.StatusOK)
			if got.DeletionTimestamp == nil || !slices.Equal(got.Finalizers, []string{hold}) {
				t.Fatalf("delete answered deletionTimestamp %v finalizers %v", got.DeletionTimestamp, got.Finalizers)
			}
			cur := get[corev1.ConfigMap](t, env, path)
			if cur.DeletionTimestamp == nil {
				t.Fatalf("stored object has no deletionTimestamp")
			}

			// A finalizer cannot be added to an object being deleted.
			do(t, env, http.MethodPatch, path, jsonPatch, `[{"op":"add","path":"/metadata/finalizers/-","value":"example.com/late"}]`).
				wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)

			tc.remove(t, path, cur).want(t, http.StatusOK)
			do(t, env, http.MethodGet, path, "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
		})
	}
}

// TestNoNewFinalizersWhileDeleting: a write that adds a finalizer to an
// object being deleted is refused with exactly one cause, on
// metadata.finalizers, as kube-apiserver refuses it; nothing is written.
func TestNoNewFinalizersWhileDeleting(t *testing.T) {
	env := testenv.Start(t)
	const hold, late = "example.com/hold", "example.com/late"
	in := configMap("terminating", nil, nil)
	in.Finalizers = []string{hold}
	create[corev1.ConfigMap](t, env, cmPath("default", ""), in)
	do(t, env, http.MethodDelete, cmPath("default", "terminating"), "", nil).want(t, http.StatusOK)
	cur := get[corev1.ConfigMap](t, env, cmPath("default", "terminating"))
	if cur.DeletionTimestamp == nil {
		t.Fatal("the object is not being deleted")
	}

	for _, tc := range []struct {
		name, method, contentType string
		body                      any
	}{
		{"PUT", http.MethodPut, jsonType, func() *corev1.ConfigMap {
			cm := cur.DeepCopy()
			cm.Finalizers = append(cm.Finalizers, late)
			return cm
		}()},
		{"JSON patch", http.MethodPatch, jsonPatch, `[{"op":"add","path":"/metadata/finalizers/-","value":"` + late + `"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := revision(t, env)
			st := do(t, env, tc.method, cmPath("default", "terminating"), tc.contentType, tc.body).
				wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
			if st.Details == nil || len(st.Details.Causes) != 1 {
				t.Fatalf("details %+v, want exactly one cause; message: %s", st.Details, st.Message)
			}
			if c := st.Details.Causes[0]; c.Type != metav1.CauseTypeForbidden || c.Field != "metadata.finalizers" {
				t.Errorf("cause %+v, want FieldValueForbidden on metadata.finalizers", c)
			}
			if after := revision(t, env); after != before {
				t.Errorf("etcd revision moved from %d to %d: something was written", before, after)
			}
		})
	}
}

// TestDeletionMetadataOnUpdate: only a delete sets deletionTimestamp and
// deletionGracePeriodSeconds. An update that leaves them out keeps them;
// one that sets them on an object not being deleted is refused, as
// kube-apiserver refuses it, and nothing is written.
func TestDeletionMetadataOnUpdate(t *testing.T) {
	env := testenv.Start(t)

	t.Run("left out while deleting", func(t *testing.T) {
		in := configMap("held", nil, nil)
		in.Finalizers = []string{"example.com/hold"}
		create[corev1.ConfigMap](t, env, cmPath("default", ""), in)
		deleting := call[corev1.ConfigMap](t, env, http.MethodDelete, cmPath("default", "held"), "", nil, http.StatusOK)
		if deleting.DeletionTimestamp == nil || deleting.DeletionGracePeriodSeconds == nil {
			t.Fatalf("delete answered deletionTimestamp %v grace %v", deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds)
		}
		put := deleting.DeepCopy()
		put.DeletionTimestamp, put.DeletionGracePeriodSeconds = nil, nil
		put.Labels = map[string]string{"touched": "yes"}
		got := update[corev1.ConfigMap](t, env, cmPath("default", "held"), put)
		if got.DeletionTimestamp == nil || !got.DeletionTimestamp.Equal(deleting.DeletionTimestamp) ||
			got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != *deleting.DeletionGracePeriodSeconds {
			t.Errorf("after the PUT: deletionTimestamp %v grace %v, want %v and %d kept",
				got.DeletionTimestamp, got.DeletionGracePeriodSeconds, deleting.DeletionTimestamp, *deleting.DeletionGracePeriodSeconds)
		}
	})

	live := create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("live", nil, nil))
	now := metav1.Now()
	grace := int64(0)
	for _, tc := range []struct {
		field string
		set   func(cm *corev1.ConfigMap)
	}{
		{"metadata.deletionTimestamp", func(cm *corev1.ConfigMap) { cm.DeletionTimestamp = &now }},
		{"metadata.deletionGracePeriodSeconds", func(cm *corev1.ConfigMap) { cm.DeletionGracePeriodSeconds = &grace }},
	} {
		t.Run("set on a live object: "+tc.field, func(t *testing.T) {
			before := revision(t, env)
			put := live.DeepCopy()
			tc.set(put)
			st := do(t, env, http.MethodPut, cmPath("default", "live"), jsonType, put).
				wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
			if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != tc.field {
				t.Errorf("details %+v, want one cause on %s; message: %s", st.Details, tc.field, st.Message)
			}
			if after := revision(t, env); after != before {
				t.Errorf("etcd revision moved from %d to %d: something was written", before, after)
			}
		})
	}
}

func TestDeletePropagationPolicy(t *testing.T) {
	env := testenv.Start(t)
	for _, tc := range []struct {
		policy         string
		wantFinalizers []string // nil: removed at once
	}{
		{"Orphan", []string{metav1.FinalizerOrphanDependents}},
		{"Foreground", []string{metav1.FinalizerDeleteDependents}},
		{"Background", nil},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			name := "d-" + map[string]string{"Orphan": "orphan", "Foreground": "fg", "Background": "bg"}[tc.policy]
			create[appsv1.Deployment](t, env, deployPath("default", ""), deployment(name, 1))
			r := do(t, env, http.MethodDelete, deployPath("default", name)+"?propagationPolicy="+tc.policy, "", nil).want(t, http.StatusOK)
			if tc.wantFinalizers == nil {
				if st := r.status(t); st.Status != metav1.StatusSuccess {
					t.Errorf("delete answered %+v", st)
				}
				do(t, env, http.MethodGet, deployPath("default", name), "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
				return
			}
			got := get[appsv1.Deployment](t, env, deployPath("default", name))
			if got.DeletionTimestamp == nil || !slices.Equal(got.Finalizers, tc.wantFinalizers) {
				t.Errorf("deletionTimestamp %v finalizers %v, want set and %v", got.DeletionTimestamp, got.Finalizers, tc.wantFinalizers)
			}
		})
	}

	t.Run("the same policy in DeleteOptions", func(t *testing.T) {
		create[appsv1.Deployment](t, env, deployPath("default", ""), deployment("d-body", 1))
		do(t, env, http.MethodDelete, deployPath("default", "d-body"), jsonType,
			`{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Orphan"}`).want(t, http.StatusOK)
		got := get[appsv1.Deployment](t, env, deployPath("default", "d-body"))
		if !slices.Equal(got.Finalizers, []string{metav1.FinalizerOrphanDependents}) {
			t.Errorf("finalizers %v", got.Finalizers)
		}
	})
}

func TestDeletePreconditions(t *testing.T) {
	env := testenv.Start(t)
	cm := create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("guarded", nil, nil))
	wrongUID, wrongRV := types.UID("not-the-uid"), "1"

	for _, tc := range []struct {
		name string
		pre  metav1.Preconditions
	}{
		{"uid mismatch", metav1.Preconditions{UID: &wrongUID}},
		{"resourceVersion mismatch", metav1.Preconditions{ResourceVersion: &wrongRV}},
		{"uid right, resourceVersion wrong", metav1.Preconditions{UID: &cm.UID, ResourceVersion: &wrongRV}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := revision(t, env)
			opts := metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{Kind: "DeleteOptions", APIVersion: "v1"}, Preconditions: &tc.pre}
			do(t, env, http.MethodDelete, cmPath("default", "guarded"), jsonType, opts).
				wantStatus(t, http.StatusConflict, metav1.StatusReasonConflict)
			if after := revision(t, env); after != before {
				t.Errorf("etcd revision moved from %d to %d", before, after)
			}
			got := get[corev1.ConfigMap](t, env, cmPath("default", "guarded"))
			if got.DeletionTimestamp != nil || got.ResourceVersion != cm.ResourceVersion {
				t.Errorf("object changed: deletionTimestamp %v rv %s", got.DeletionTimestamp, got.ResourceVersion)
			}
		})
	}

	t.Run("both match", func(t *testing.T) {
		opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion}}
		do(t, env, http.MethodDelete, cmPath("default", "guarded"), jsonType, opts).want(t, http.StatusOK)
		do(t, env, http.MethodGet, cmPath("default", "guarded"), "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	})
}
