package apiserver_test

import (
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

func TestNamespaceLifecycle(t *testing.T) {
	env := testenv.Start(t)

	t.Run("create in a missing namespace", func(t *testing.T) {
		before := revision(t, env)
		do(t, env, http.MethodPost, cmPath("missing", ""), jsonType, configMap("cm", nil, nil)).
			wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
		if after := revision(t, env); after != before {
			t.Errorf("etcd revision moved from %d to %d", before, after)
		}
		if l := get[corev1.ConfigMapList](t, env, "/api/v1/configmaps"); len(l.Items) != 0 {
			t.Errorf("stored: %v", cmNames(l))
		}
	})

	t.Run("a deleted namespace is Terminating", func(t *testing.T) {
		createNamespace(t, env, "doomed")
		create[corev1.ConfigMap](t, env, cmPath("doomed", ""), configMap("inside", nil, nil))

		got := call[corev1.Namespace](t, env, http.MethodDelete, "/api/v1/namespaces/doomed", "", nil, http.StatusOK)
		if got.Status.Phase != corev1.NamespaceTerminating || got.DeletionTimestamp == nil {
			t.Errorf("delete answered phase %q deletionTimestamp %v", got.Status.Phase, got.DeletionTimestamp)
		}
		// No namespace controller runs here, so it stays, with its content.
		ns := get[corev1.Namespace](t, env, "/api/v1/namespaces/doomed")
		if ns.Status.Phase != corev1.NamespaceTerminating || ns.DeletionTimestamp == nil {
			t.Errorf("stored phase %q deletionTimestamp %v", ns.Status.Phase, ns.DeletionTimestamp)
		}
		get[corev1.ConfigMap](t, env, cmPath("doomed", "inside"))

		before := revision(t, env)
		do(t, env, http.MethodPost, cmPath("doomed", ""), jsonType, configMap("late", nil, nil)).
			wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
		if after := revision(t, env); after != before {
			t.Errorf("etcd revision moved from %d to %d", before, after)
		}
		do(t, env, http.MethodGet, cmPath("doomed", "late"), "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)

		// Updating what is already inside is still allowed, as in Kubernetes.
		patch[corev1.ConfigMap](t, env, cmPath("doomed", "inside"), mergePatch, `{"data":{"k":"v"}}`)
	})

	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		t.Run("built-in "+name, func(t *testing.T) {
			ns := get[corev1.Namespace](t, env, "/api/v1/namespaces/"+name)
			if ns.Status.Phase != corev1.NamespaceActive {
				t.Errorf("phase %q", ns.Status.Phase)
			}
			before := revision(t, env)
			do(t, env, http.MethodDelete, "/api/v1/namespaces/"+name, "", nil).wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
			if after := revision(t, env); after != before {
				t.Errorf("etcd revision moved from %d to %d", before, after)
			}
			ns = get[corev1.Namespace](t, env, "/api/v1/namespaces/"+name)
			if ns.Status.Phase != corev1.NamespaceActive || ns.DeletionTimestamp != nil {
				t.Errorf("after delete: phase %q deletionTimestamp %v", ns.Status.Phase, ns.DeletionTimestamp)
			}
		})
	}

	t.Run("list namespaces", func(t *testing.T) {
		l := get[corev1.NamespaceList](t, env, "/api/v1/namespaces")
		got := map[string]bool{}
		for _, ns := range l.Items {
			got[ns.Name] = true
		}
		for _, want := range []string{"default", "kube-system", "kube-public", "kube-node-lease", "doomed"} {
			if !got[want] {
				t.Errorf("namespace %s not listed", want)
			}
		}
	})
}
