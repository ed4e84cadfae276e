package disruption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// These tests run the controller against a real API server on a real etcd.
// No workload controller, scheduler or kubelet runs: the tests make the
// ReplicaSets, Deployments and pods themselves, and play the kubelet by
// writing the pods' Ready condition.

const ns = "default"

type running struct {
	pods     *client.Client[*corev1.Pod]
	pdbs     *client.Client[*policyv1.PodDisruptionBudget]
	rss      *client.Client[*appsv1.ReplicaSet]
	deploys  *client.Client[*appsv1.Deployment]
	recorder *record.FakeRecorder
}

func runController(t *testing.T) *running {
	t.Helper()
	env := controllertest.Start(t)
	rec := &record.FakeRecorder{}
	c, err := New(Options{Common: controller.Common{
		Client: env.Client, Informers: env.Informers, Recorder: rec, Logger: controllertest.Logger(t),
	}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 1, c)
	return &running{
		pods: client.For[*corev1.Pod](env.Client), pdbs: client.For[*policyv1.PodDisruptionBudget](env.Client),
		rss: client.For[*appsv1.ReplicaSet](env.Client), deploys: client.For[*appsv1.Deployment](env.Client),
		recorder: rec,
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func template(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
	}
}

func (r *running) replicaSet(t *testing.T, name, app string, replicas int32) *appsv1.ReplicaSet {
	t.Helper()
	rs, err := r.rss.Create(testCtx(t), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas, Template: template(app),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// pod creates a pod with app=<app>, controlled by owner if given, and
// running: Ready or not.
func (r *running) pod(t *testing.T, name, app string, owner *metav1.OwnerReference, ready bool) *corev1.Pod {
	t.Helper()
	ctx := testCtx(t)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	p, err := r.pods.Create(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return r.setReady(t, p, ready)
}

func (r *running) setReady(t *testing.T, p *corev1.Pod, ready bool) *corev1.Pod {
	t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p, err := r.pods.Get(testCtx(t), p.Namespace, p.Name)
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	out, err := r.pods.UpdateStatus(testCtx(t), p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func controlledBy(kind, apiVersion, name string, uid types.UID) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}
}

func (r *running) budget(t *testing.T, name, app string, minAvailable, maxUnavailable *intstr.IntOrString) {
	t.Helper()
	_, err := r.pdbs.Create(testCtx(t), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: minAvailable, MaxUnavailable: maxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// want is a budget's status as a user reads it.
type want struct {
	expected, desired, current, allowed int32
	reason                              string
}

func (r *running) waitStatus(t *testing.T, name string, w want) *policyv1.PodDisruptionBudget {
	t.Helper()
	var last *policyv1.PodDisruptionBudget
	controllertest.Eventually(t, fmt.Sprintf("budget %s at %+v", name, w), func() (bool, string) {
		pdb, err := r.pdbs.Get(testCtx(t), ns, name)
		if err != nil {
			return false, err.Error()
		}
		last = pdb
		st := pdb.Status
		cond := apimeta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition)
		reason := ""
		if cond != nil {
			reason = cond.Reason
		}
		got := want{st.ExpectedPods, st.DesiredHealthy, st.CurrentHealthy, st.DisruptionsAllowed, reason}
		return got == w && st.ObservedGeneration == pdb.Generation, fmt.Sprintf("status %+v, observed %d of generation %d", got, st.ObservedGeneration, pdb.Generation)
	})
	return last
}

func pct(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
func num(n int32) *intstr.IntOrString  { v := intstr.FromInt32(n); return &v }

func TestMaxUnavailablePercentageOverReplicaSetScale(t *testing.T) {
	r := runController(t)
	rs := r.replicaSet(t, "web", "web", 4)
	owner := controlledBy("ReplicaSet", "apps/v1", rs.Name, rs.UID)
	var pods []*corev1.Pod
	for i := range 3 {
		pods = append(pods, r.pod(t, fmt.Sprintf("web-%d", i), "web", owner, true))
	}
	r.budget(t, "web", "web", nil, pct("25%"))

	// 4 expected (the ReplicaSet's scale, not the 3 pods), 25% of 4 rounds
	// up to 1 unavailable: 3 must be healthy, and 3 are.
	r.waitStatus(t, "web", want{expected: 4, desired: 3, current: 3, allowed: 0, reason: policyv1.InsufficientPodsReason})

	pods = append(pods, r.pod(t, "web-3", "web", owner, true))
	pdb := r.waitStatus(t, "web", want{expected: 4, desired: 3, current: 4, allowed: 1, reason: policyv1.SufficientPodsReason})
	if c := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition); c.Status != metav1.ConditionTrue {
		t.Errorf("DisruptionAllowed %+v, want True", c)
	}

	// A pod that stops being Ready is not healthy.
	r.setReady(t, pods[0], false)
	r.waitStatus(t, "web", want{expected: 4, desired: 3, current: 3, allowed: 0, reason: policyv1.InsufficientPodsReason})

	// Scaling the ReplicaSet down moves the expectation with it, once a pod
	// change makes the budget look again.
	rs, _ = r.rss.Get(testCtx(t), ns, "web")
	rs.Spec.Replicas = ptrTo(int32(8))
	if _, err := r.rss.Update(testCtx(t), rs); err != nil {
		t.Fatal(err)
	}
	r.setReady(t, pods[0], true)
	r.waitStatus(t, "web", want{expected: 8, desired: 6, current: 4, allowed: 0, reason: policyv1.InsufficientPodsReason})
}

func TestMinAvailable(t *testing.T) {
	r := runController(t)

	t.Run("a percentage of the Deployment's scale", func(t *testing.T) {
		d, err := r.deploys.Create(testCtx(t), &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptrTo(int32(5)), Template: template("api"),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		rs := r.replicaSet(t, "api-1", "api", 3)
		rs.OwnerReferences = []metav1.OwnerReference{*controlledBy("Deployment", "apps/v1", d.Name, d.UID)}
		if _, err := r.rss.Update(testCtx(t), rs); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			r.pod(t, fmt.Sprintf("api-%d", i), "api", controlledBy("ReplicaSet", "apps/v1", rs.Name, rs.UID), true)
		}
		r.budget(t, "api", "api", pct("50%"), nil)
		// The Deployment's 5, not its ReplicaSet's 3: 50% of 5 rounds up to 3.
		r.waitStatus(t, "api", want{expected: 5, desired: 3, current: 3, allowed: 0, reason: policyv1.InsufficientPodsReason})
	})

	t.Run("a number counts the pods, with or without controllers", func(t *testing.T) {
		for i := range 3 {
			r.pod(t, fmt.Sprintf("naked-%d", i), "naked", nil, i < 2)
		}
		r.budget(t, "naked", "naked", num(1), nil)
		r.waitStatus(t, "naked", want{expected: 3, desired: 1, current: 2, allowed: 1, reason: policyv1.SufficientPodsReason})
		if got := r.recorder.WithReason("UnmanagedPods"); len(got) != 0 {
			t.Errorf("events %q: an integer minAvailable needs no controllers", got)
		}
	})

	t.Run("a scale read through /scale", func(t *testing.T) {
		d, err := r.deploys.Create(testCtx(t), &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "odd", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptrTo(int32(2)), Template: template("odd"),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "odd"}},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		// A pod a Deployment controls directly: no lister knows that, so the
		// Deployment's scale subresource is read, as for any scalable kind.
		r.pod(t, "odd-0", "odd", controlledBy("Deployment", "apps/v1", d.Name, d.UID), true)
		r.budget(t, "odd", "odd", pct("100%"), nil)
		r.waitStatus(t, "odd", want{expected: 2, desired: 2, current: 1, allowed: 0, reason: policyv1.InsufficientPodsReason})
	})
}

func TestUncountablePodsFailClosed(t *testing.T) {
	r := runController(t)

	t.Run("a pod without a controller is left out", func(t *testing.T) {
		r.pod(t, "lone", "lone", nil, true)
		r.budget(t, "lone", "lone", nil, num(1))
		r.waitStatus(t, "lone", want{expected: 0, desired: 0, current: 1, allowed: 0, reason: policyv1.InsufficientPodsReason})
		controllertest.Eventually(t, "an UnmanagedPods event", func() (bool, string) {
			return len(r.recorder.WithReason("UnmanagedPods")) > 0, fmt.Sprint(r.recorder.Events())
		})
	})

	t.Run("a controller without a scale fails the sync", func(t *testing.T) {
		cm := corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", UID: "0b7c6e1e-0000-4000-8000-000000000001"}}
		r.pod(t, "cfg-0", "cfg", controlledBy("ConfigMap", "v1", cm.Name, cm.UID), true)
		r.budget(t, "cfg", "cfg", pct("50%"), nil)
		controllertest.Eventually(t, "the budget failed closed", func() (bool, string) {
			pdb, err := r.pdbs.Get(testCtx(t), ns, "cfg")
			if err != nil {
				return false, err.Error()
			}
			c := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
			if c == nil || c.Reason != policyv1.SyncFailedReason || c.Status != metav1.ConditionFalse {
				return false, fmt.Sprintf("condition %+v", c)
			}
			if !strings.Contains(c.Message, "configmaps does not implement the scale subresource") {
				return false, "message " + c.Message
			}
			return pdb.Status.DisruptionsAllowed == 0, ""
		})
		if got := r.recorder.WithReason("CalculateExpectedPodCountFailed"); len(got) == 0 {
			t.Errorf("no CalculateExpectedPodCountFailed event in %q", r.recorder.Events())
		}
	})

	t.Run("no pods", func(t *testing.T) {
		r.budget(t, "none", "none", num(1), nil)
		r.waitStatus(t, "none", want{reason: policyv1.InsufficientPodsReason, desired: 1})
		if got := r.recorder.WithReason("NoPods"); len(got) == 0 || !strings.HasSuffix(got[0], "No matching pods found") {
			t.Errorf("NoPods events %q", got)
		}
	})
}

func TestDisruptedPods(t *testing.T) {
	r := runController(t)
	for i := range 3 {
		r.pod(t, fmt.Sprintf("db-%d", i), "db", nil, true)
	}
	r.budget(t, "db", "db", num(1), nil)
	pdb := r.waitStatus(t, "db", want{expected: 3, desired: 1, current: 3, allowed: 2, reason: policyv1.SufficientPodsReason})

	// What the eviction subresource writes: db-0 just now, db-1 long ago
	// (its eviction never deleted it), db-2 nearly two minutes ago.
	now := time.Now()
	pdb.Status.DisruptedPods = map[string]metav1.Time{
		"db-0": metav1.NewTime(now),
		"db-1": metav1.NewTime(now.Add(-3 * time.Minute)),
		"db-2": metav1.NewTime(now.Add(-DeletionTimeout + 3*time.Second)),
	}
	pdb.Status.DisruptionsAllowed = 0
	if _, err := r.pdbs.UpdateStatus(testCtx(t), pdb); err != nil {
		t.Fatal(err)
	}
	// db-0 and db-2 are about to go and do not count; db-1 counts again.
	got := r.waitStatus(t, "db", want{expected: 3, desired: 1, current: 1, allowed: 0, reason: policyv1.InsufficientPodsReason})
	if _, ok := got.Status.DisruptedPods["db-1"]; ok || len(got.Status.DisruptedPods) != 2 {
		t.Errorf("disruptedPods %v, want db-0 and db-2 only", got.Status.DisruptedPods)
	}
	if ev := r.recorder.WithReason("NotDeleted"); len(ev) == 0 {
		t.Errorf("no NotDeleted event for db-1 in %q", r.recorder.Events())
	}
	// db-2's entry expires in a few seconds, and the budget is looked at
	// again then without any change to wake it.
	got = r.waitStatus(t, "db", want{expected: 3, desired: 1, current: 2, allowed: 1, reason: policyv1.SufficientPodsReason})
	if _, ok := got.Status.DisruptedPods["db-0"]; !ok || len(got.Status.DisruptedPods) != 1 {
		t.Errorf("disruptedPods %v, want db-0 only", got.Status.DisruptedPods)
	}

	// A disrupted pod being deleted leaves the list at once.
	p, err := r.pods.Get(testCtx(t), ns, "db-0")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.pods.Delete(testCtx(t), ns, p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got = r.waitStatus(t, "db", want{expected: 3, desired: 1, current: 2, allowed: 1, reason: policyv1.SufficientPodsReason})
	controllertest.Eventually(t, "db-0 out of disruptedPods", func() (bool, string) {
		pdb, err := r.pdbs.Get(testCtx(t), ns, "db")
		if err != nil {
			return false, err.Error()
		}
		return len(pdb.Status.DisruptedPods) == 0, fmt.Sprint(pdb.Status.DisruptedPods)
	})
}

func ptrTo[T any](v T) *T { return &v }
