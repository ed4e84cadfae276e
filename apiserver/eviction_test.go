package apiserver_test

import (
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/internal/testenv"
)

func pdbPath(ns, name string) string {
	p := "/apis/policy/v1/namespaces/" + ns + "/poddisruptionbudgets"
	if name != "" {
		p += "/" + name
	}
	return p
}

func eviction(name string) *policyv1.Eviction {
	return &policyv1.Eviction{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}
}

// evict POSTs an eviction of the pod ns/name.
func evict(t testing.TB, env *testenv.Env, ns, name string, body any) *reply {
	t.Helper()
	return do(t, env, http.MethodPost, podPath(ns, name)+"/eviction", jsonType, body)
}

// runningPod creates a pod bound to a node and running, Ready or not: what
// a kubelet would have made of it.
func runningPod(t testing.TB, env *testenv.Env, ns, name string, ready bool, labels map[string]string) *corev1.Pod {
	t.Helper()
	p := create[corev1.Pod](t, env, podPath(ns, ""), pod(name, "node-1", labels))
	p.Status.Phase = corev1.PodRunning
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}
	return update[corev1.Pod](t, env, podPath(ns, name)+"/status", p)
}

// budget creates a budget over app=<app> and writes the status a
// disruption controller would have computed for it.
func budget(t testing.TB, env *testenv.Env, ns, name, app string, allowed, current, desired int32) *policyv1.PodDisruptionBudget {
	t.Helper()
	min := intstr.FromInt32(desired)
	pdb := create[policyv1.PodDisruptionBudget](t, env, pdbPath(ns, ""), &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &min,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	})
	pdb.Status = policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation, DisruptionsAllowed: allowed,
		CurrentHealthy: current, DesiredHealthy: desired, ExpectedPods: current,
	}
	return update[policyv1.PodDisruptionBudget](t, env, pdbPath(ns, name)+"/status", pdb)
}

func hasCondition(p *corev1.Pod, typ corev1.PodConditionType, reason string) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}

func TestEvictionWithinBudget(t *testing.T) {
	env := testenv.Start(t)
	web := map[string]string{"app": "web"}
	for _, name := range []string{"web-1", "web-2", "web-3"} {
		runningPod(t, env, "default", name, true, web)
	}
	budget(t, env, "default", "web", "web", 1, 3, 2)

	st := evict(t, env, "default", "web-1", eviction("web-1")).want(t, http.StatusCreated).status(t)
	if st.Status != metav1.StatusSuccess {
		t.Errorf("eviction answered %+v, want Success", st)
	}
	p := get[corev1.Pod](t, env, podPath("default", "web-1"))
	if p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != corev1.DefaultTerminationGracePeriodSeconds {
		t.Errorf("evicted pod: deletionTimestamp %v grace %v, want a graceful deletion of 30s", p.DeletionTimestamp, p.DeletionGracePeriodSeconds)
	}
	if !hasCondition(p, corev1.DisruptionTarget, "EvictionByEvictionAPI") {
		t.Errorf("evicted pod's conditions %+v lack DisruptionTarget/EvictionByEvictionAPI", p.Status.Conditions)
	}
	pdb := get[policyv1.PodDisruptionBudget](t, env, pdbPath("default", "web"))
	if pdb.Status.DisruptionsAllowed != 0 {
		t.Errorf("disruptionsAllowed %d, want 0: the eviction took the one allowed", pdb.Status.DisruptionsAllowed)
	}
	if _, ok := pdb.Status.DisruptedPods["web-1"]; !ok {
		t.Errorf("disruptedPods %v lack web-1", pdb.Status.DisruptedPods)
	}
	if c := findCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition); c == nil || c.Status != metav1.ConditionFalse || c.Reason != policyv1.InsufficientPodsReason {
		t.Errorf("DisruptionAllowed condition %+v, want False/InsufficientPods", c)
	}

	t.Run("beyond the budget is 429 naming it", func(t *testing.T) {
		st := evict(t, env, "default", "web-2", eviction("web-2")).wantStatus(t, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests)
		if st.Message != "Cannot evict pod as it would violate the pod's disruption budget." {
			t.Errorf("message %q", st.Message)
		}
		want := metav1.StatusCause{Type: "DisruptionBudget", Message: "The disruption budget web needs 2 healthy pods and has 3 currently"}
		if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0] != want {
			t.Errorf("details %+v, want the cause %+v", st.Details, want)
		}
		if p := get[corev1.Pod](t, env, podPath("default", "web-2")); p.DeletionTimestamp != nil || len(p.Status.Conditions) != 1 {
			t.Errorf("a refused eviction changed the pod: %+v", p)
		}
	})

	t.Run("a pod being deleted is deleted again without the budget", func(t *testing.T) {
		evict(t, env, "default", "web-1", eviction("web-1")).want(t, http.StatusCreated)
	})
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

func TestEvictionRefusals(t *testing.T) {
	env := testenv.Start(t)

	t.Run("no budget: deleted", func(t *testing.T) {
		runningPod(t, env, "default", "lone", true, map[string]string{"app": "lone"})
		evict(t, env, "default", "lone", eviction("lone")).want(t, http.StatusCreated)
		if p := get[corev1.Pod](t, env, podPath("default", "lone")); p.DeletionTimestamp == nil {
			t.Error("a pod no budget selects was not deleted")
		}
	})

	t.Run("two budgets: 500", func(t *testing.T) {
		runningPod(t, env, "default", "api-1", true, map[string]string{"app": "api"})
		budget(t, env, "default", "api-a", "api", 1, 1, 0)
		budget(t, env, "default", "api-b", "api", 1, 1, 0)
		r := evict(t, env, "default", "api-1", eviction("api-1")).want(t, http.StatusInternalServerError)
		if st := r.status(t); st.Message != "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support." {
			t.Errorf("message %q", st.Message)
		}
		if p := get[corev1.Pod](t, env, podPath("default", "api-1")); p.DeletionTimestamp != nil {
			t.Error("the pod was deleted")
		}
	})

	t.Run("a budget not yet observed: 429", func(t *testing.T) {
		runningPod(t, env, "default", "db-1", true, map[string]string{"app": "db"})
		pdb := budget(t, env, "default", "db", "db", 1, 1, 0)
		pdb.Spec.MinAvailable = nil
		pdb.Spec.MaxUnavailable = &intstr.IntOrString{Type: intstr.String, StrVal: "50%"}
		update[policyv1.PodDisruptionBudget](t, env, pdbPath("default", "db"), pdb) // generation 2, observed 1
		st := evict(t, env, "default", "db-1", eviction("db-1")).wantStatus(t, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests)
		if st.Details == nil || len(st.Details.Causes) != 1 || !strings.Contains(st.Details.Causes[0].Message, "still being processed") {
			t.Errorf("details %+v", st.Details)
		}
	})

	t.Run("pending: deleted without the budget", func(t *testing.T) {
		create[corev1.Pod](t, env, podPath("default", ""), pod("cache-1", "", map[string]string{"app": "cache"}))
		budget(t, env, "default", "cache", "cache", 0, 0, 1)
		evict(t, env, "default", "cache-1", eviction("cache-1")).want(t, http.StatusCreated)
		do(t, env, http.MethodGet, podPath("default", "cache-1"), "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	})

	t.Run("not ready, AlwaysAllow: deleted without taking from the budget", func(t *testing.T) {
		runningPod(t, env, "default", "q-1", false, map[string]string{"app": "q"})
		pdb := budget(t, env, "default", "q", "q", 0, 0, 1)
		always := policyv1.AlwaysAllow
		pdb.Spec.UnhealthyPodEvictionPolicy = &always
		pdb = update[policyv1.PodDisruptionBudget](t, env, pdbPath("default", "q"), pdb)
		pdb.Status.ObservedGeneration = pdb.Generation
		update[policyv1.PodDisruptionBudget](t, env, pdbPath("default", "q")+"/status", pdb)
		evict(t, env, "default", "q-1", eviction("q-1")).want(t, http.StatusCreated)
		if p := get[corev1.Pod](t, env, podPath("default", "q-1")); p.DeletionTimestamp == nil {
			t.Error("the unready pod was not deleted")
		}
		if got := get[policyv1.PodDisruptionBudget](t, env, pdbPath("default", "q")); len(got.Status.DisruptedPods) != 0 {
			t.Errorf("disruptedPods %v, want none", got.Status.DisruptedPods)
		}
	})

	t.Run("not ready, IfHealthyBudget with too few healthy: 429", func(t *testing.T) {
		runningPod(t, env, "default", "r-1", false, map[string]string{"app": "r"})
		budget(t, env, "default", "r", "r", 0, 0, 1)
		evict(t, env, "default", "r-1", eviction("r-1")).wantStatus(t, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests)
	})

	t.Run("dry run changes nothing", func(t *testing.T) {
		runningPod(t, env, "default", "d-1", true, map[string]string{"app": "d"})
		budget(t, env, "default", "d", "d", 1, 1, 0)
		do(t, env, http.MethodPost, podPath("default", "d-1")+"/eviction?dryRun=All", jsonType, eviction("d-1")).want(t, http.StatusCreated)
		if p := get[corev1.Pod](t, env, podPath("default", "d-1")); p.DeletionTimestamp != nil || len(p.Status.Conditions) != 1 {
			t.Errorf("a dry-run eviction changed the pod: %+v", p.Status)
		}
		if pdb := get[policyv1.PodDisruptionBudget](t, env, pdbPath("default", "d")); pdb.Status.DisruptionsAllowed != 1 || len(pdb.Status.DisruptedPods) != 0 {
			t.Errorf("a dry-run eviction changed the budget: %+v", pdb.Status)
		}
	})

	t.Run("a stale resourceVersion precondition: 409, not deleted", func(t *testing.T) {
		create[corev1.Pod](t, env, podPath("default", ""), pod("pre-1", "node-1", map[string]string{"app": "pre"}))
		stale := "1"
		ev := eviction("pre-1")
		ev.DeleteOptions = &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &stale}}
		evict(t, env, "default", "pre-1", ev).wantStatus(t, http.StatusConflict, metav1.StatusReasonConflict)
		if p := get[corev1.Pod](t, env, podPath("default", "pre-1")); p.DeletionTimestamp != nil || len(p.Status.Conditions) != 0 {
			t.Errorf("the pod was touched: %+v", p.Status)
		}
	})

	t.Run("a budget still being processed says when to retry", func(t *testing.T) {
		r := evict(t, env, "default", "db-1", eviction("db-1"))
		r.wantStatus(t, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests)
		if got := r.header.Get("Retry-After"); got != "10" {
			t.Errorf("Retry-After %q, want 10", got)
		}
	})

	t.Run("no such pod: 404", func(t *testing.T) {
		evict(t, env, "default", "ghost", eviction("ghost")).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	})

	t.Run("bad bodies: 400", func(t *testing.T) {
		runningPod(t, env, "default", "b-1", true, map[string]string{"app": "b"})
		evict(t, env, "default", "b-1", "{not json").wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		evict(t, env, "default", "b-1", eviction("b-2")).wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		evict(t, env, "default", "b-1", pod("b-1", "", nil)).wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		if p := get[corev1.Pod](t, env, podPath("default", "b-1")); p.DeletionTimestamp != nil {
			t.Error("a bad eviction deleted the pod")
		}
	})

	t.Run("policy/v1beta1 Eviction is accepted", func(t *testing.T) {
		runningPod(t, env, "default", "old-1", true, map[string]string{"app": "old"})
		ev := eviction("old-1")
		ev.APIVersion = "policy/v1beta1"
		evict(t, env, "default", "old-1", ev).want(t, http.StatusCreated)
	})

	t.Run("GET is not allowed", func(t *testing.T) {
		do(t, env, http.MethodGet, podPath("default", "b-1")+"/eviction", "", nil).want(t, http.StatusMethodNotAllowed)
	})
}
