package apiserver_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

// quotaReady creates a ResourceQuota and, playing the resource quota
// controller, fills its status so admission enforces it.
func quotaReady(t *testing.T, env *testenv.Env, ns string, hard corev1.ResourceList) {
	t.Helper()
	q := &corev1.ResourceQuota{
		TypeMeta:   metav1.TypeMeta{Kind: "ResourceQuota", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}
	created := create[corev1.ResourceQuota](t, env, "/api/v1/namespaces/"+ns+"/resourcequotas", q)
	used := corev1.ResourceList{}
	for name := range hard {
		used[name] = resource.MustParse("0")
	}
	created.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: used}
	update[corev1.ResourceQuota](t, env, "/api/v1/namespaces/"+ns+"/resourcequotas/q/status", created)
	eventually(t, "the quota's status in the cache", func() (bool, string) {
		l := get[corev1.ResourceQuotaList](t, env, "/api/v1/namespaces/"+ns+"/resourcequotas?resourceVersion=0")
		return len(l.Items) == 1 && len(l.Items[0].Status.Hard) > 0, "status not cached yet"
	})
}

// TestQuotaAdmission: with pods: 2, the third pod is refused with
// Kubernetes' message and nothing is stored; status.used moves with each
// admitted pod.
func TestQuotaAdmission(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "quota")
	quotaReady(t, env, "quota", corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")})
	for _, name := range []string{"a", "b"} {
		create[corev1.Pod](t, env, "/api/v1/namespaces/quota/pods", pod(name, "", nil))
	}
	before := revision(t, env)
	st := do(t, env, "POST", "/api/v1/namespaces/quota/pods", jsonType, pod("c", "", nil)).
		wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
	want := `pods "c" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`
	if st.Message != want {
		t.Errorf("message %q, want %q", st.Message, want)
	}
	if after := revision(t, env); after != before {
		t.Errorf("a refused pod moved the revision from %d to %d", before, after)
	}
	q := get[corev1.ResourceQuota](t, env, "/api/v1/namespaces/quota/resourcequotas/q")
	if used := q.Status.Used[corev1.ResourcePods]; used.String() != "2" {
		t.Errorf("status.used pods = %s, want 2", used.String())
	}
}

// TestQuotaConcurrentCreates: twenty creates racing for five free slots
// create exactly five pods.
func TestQuotaConcurrentCreates(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "race")
	quotaReady(t, env, "race", corev1.ResourceList{corev1.ResourcePods: resource.MustParse("5")})
	var wg sync.WaitGroup
	codes, errs := make([]int, 20), make([]error, 20)
	for i := range codes {
		body, err := json.Marshal(pod(fmt.Sprintf("p%d", i), "", nil))
		if err != nil {
			t.Fatal(err)
		}
		// Not do: it fails the test with t.Fatal, which only the test's
		// own goroutine may call.
		wg.Go(func() {
			resp, err := env.Client().Post(env.URL+"/api/v1/namespaces/race/pods", jsonType, bytes.NewReader(body))
			if err != nil {
				errs[i] = err
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	created, refused := 0, 0
	for _, c := range codes {
		switch c {
		case http.StatusCreated:
			created++
		case http.StatusForbidden:
			refused++
		}
	}
	if created != 5 || refused != 15 {
		t.Errorf("created %d, refused %d (codes %v); want 5 and 15", created, refused, codes)
	}
	l := get[corev1.PodList](t, env, "/api/v1/namespaces/race/pods")
	if len(l.Items) != 5 {
		t.Errorf("%d pods stored, want 5", len(l.Items))
	}
	q := get[corev1.ResourceQuota](t, env, "/api/v1/namespaces/race/resourcequotas/q")
	if used := q.Status.Used[corev1.ResourcePods]; used.String() != "5" {
		t.Errorf("status.used pods = %s, want 5", used.String())
	}
}

// TestQuotaOnUpdate: an update that adds to usage is charged like a
// create: turning a ClusterIP Service into a LoadBalancer is refused when
// the quota allows no load balancers, and nothing changes.
func TestQuotaOnUpdate(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "svc")
	quotaReady(t, env, "svc", corev1.ResourceList{corev1.ResourceServicesLoadBalancers: resource.MustParse("0")})
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	create[corev1.Service](t, env, "/api/v1/namespaces/svc/services", svc)
	before := revision(t, env)
	st := do(t, env, "PATCH", "/api/v1/namespaces/svc/services/web", mergePatch, `{"spec":{"type":"LoadBalancer"}}`).
		wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
	want := `services "web" is forbidden: exceeded quota: q, requested: services.loadbalancers=1, used: services.loadbalancers=0, limited: services.loadbalancers=0`
	if st.Message != want {
		t.Errorf("message %q, want %q", st.Message, want)
	}
	if after := revision(t, env); after != before {
		t.Errorf("a refused update moved the revision from %d to %d", before, after)
	}
	got := get[corev1.Service](t, env, "/api/v1/namespaces/svc/services/web")
	if got.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("service type %q after a refused update", got.Spec.Type)
	}
}

// TestQuotaGivenBack: a create whose write fails after admission charged
// it (the name is taken) gives the charge back, so status.used counts only
// what was written.
func TestQuotaGivenBack(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "refund")
	quotaReady(t, env, "refund", corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")})
	create[corev1.Pod](t, env, "/api/v1/namespaces/refund/pods", pod("a", "", nil))
	do(t, env, "POST", "/api/v1/namespaces/refund/pods", jsonType, pod("a", "", nil)).
		wantStatus(t, http.StatusConflict, metav1.StatusReasonAlreadyExists)
	q := get[corev1.ResourceQuota](t, env, "/api/v1/namespaces/refund/resourcequotas/q")
	if used := q.Status.Used[corev1.ResourcePods]; used.String() != "1" {
		t.Errorf("status.used pods = %s after a create that failed, want 1", used.String())
	}
	// The slot the failed create took is free again.
	create[corev1.Pod](t, env, "/api/v1/namespaces/refund/pods", pod("b", "", nil))
}
