package resourcequota

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/api/quota"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/internal/testenv"
)

func TestEveryQuotableKindHasASource(t *testing.T) {
	// The factory is never started: nothing is listed or watched.
	rc, err := client.New(&client.Config{Server: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	f := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	for _, res := range api.Resources().With(testenv.Widgets()) {
		if !quota.Quotable(res) {
			continue
		}
		s, err := openSource(f, res, informer.ResourceEventHandlerFuncs{})
		if err != nil {
			t.Errorf("%s: %v", res.GroupResource(), err)
			continue
		}
		if s.res != res || len(s.list(ns)) != 0 {
			t.Errorf("%s: source for %s with %d objects", res.GroupResource(), s.res.GroupResource(), len(s.list(ns)))
		}
	}
}

// fakeSource serves objs as if from a synced cache.
func fakeSource(res *api.Resource, objs ...api.Object) *source {
	return &source{res: res, synced: func() bool { return true }, list: func(namespace string) []api.Object {
		var out []api.Object
		for _, o := range objs {
			if o.GetNamespace() == namespace {
				out = append(out, o)
			}
		}
		return out
	}}
}

func TestMeasure(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	grace := int64(30)
	pod := func(name, namespace string, phase corev1.PodPhase, requests corev1.ResourceList) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: requests},
			}}},
			Status: corev1.PodStatus{Phase: phase},
		}
	}
	stuck := pod("stuck", ns, corev1.PodRunning, list("cpu", "1"))
	stuck.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
	stuck.DeletionGracePeriodSeconds = &grace
	pods := fakeSource(api.Pods,
		pod("web", ns, corev1.PodRunning, list("cpu", "250m", "memory", "1Gi")),
		pod("idle", ns, corev1.PodPending, nil), // BestEffort
		pod("done", ns, corev1.PodSucceeded, list("cpu", "4")),
		stuck,
		pod("elsewhere", "team-b", corev1.PodRunning, list("cpu", "8")),
	)
	configMaps := fakeSource(api.ConfigMaps,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "team-b"}},
	)
	sources := []*source{pods, configMaps}

	quotaOf := func(hard corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: ns},
			Spec:       corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes},
		}
	}
	for _, tc := range []struct {
		name string
		q    *corev1.ResourceQuota
		want string
	}{
		{"compute: terminal and stuck-terminating pods are counted but not charged",
			quotaOf(list("pods", "10", "count/pods", "10", "requests.cpu", "10", "requests.memory", "10Gi", "limits.cpu", "1")),
			"count/pods=4,limits.cpu=0,pods=2,requests.cpu=250m,requests.memory=1Gi"},
		{"BestEffort scope", quotaOf(list("pods", "10"), corev1.ResourceQuotaScopeBestEffort), "pods=1"},
		{"NotBestEffort scope", quotaOf(list("pods", "10", "cpu", "2"), corev1.ResourceQuotaScopeNotBestEffort), "cpu=250m,pods=1"},
		{"object counts of this namespace only", quotaOf(list("configmaps", "3", "count/configmaps", "3")),
			"configmaps=1,count/configmaps=1"},
		{"scoped quotas count no configmaps", quotaOf(list("configmaps", "3"), corev1.ResourceQuotaScopeBestEffort), "configmaps=0"},
		{"what cannot be measured is left out", quotaOf(list("pods", "1", "count/gadgets.example.com", "1")), "pods=2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := measure(tc.q, sources, now)
			if err != nil {
				t.Fatal(err)
			}
			if quota.Format(got) != tc.want {
				t.Errorf("measure = %s, want %s", quota.Format(got), tc.want)
			}
		})
	}

	bad := quotaOf(list("pods", "1"))
	bad.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
		ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: "Near", Values: []string{"x"},
	}}}
	if _, err := measure(bad, sources, now); err == nil {
		t.Error("measure with an unknown scope operator: want an error")
	}
}

func TestStory(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, cur corev1.ResourceQuotaStatus
		want     string
	}{
		{"one more pod",
			corev1.ResourceQuotaStatus{Hard: list("pods", "5"), Used: list("pods", "2")},
			corev1.ResourceQuotaStatus{Hard: list("pods", "5"), Used: list("pods", "3")},
			"used pods 2→3 (hard 5)"},
		{"first sync",
			corev1.ResourceQuotaStatus{},
			corev1.ResourceQuotaStatus{Hard: list("pods", "5", "requests.cpu", "1"), Used: list("pods", "0", "requests.cpu", "0")},
			"hard pods none→5, requests.cpu none→1; used pods none→0 (hard 5), requests.cpu none→0 (hard 1)"},
		{"units do not make a change",
			corev1.ResourceQuotaStatus{Hard: list("cpu", "1"), Used: list("cpu", "1000m", "pods", "1")},
			corev1.ResourceQuotaStatus{Hard: list("cpu", "1"), Used: list("cpu", "1", "pods", "2")},
			"used pods 1→2"},
		{"a limit dropped",
			corev1.ResourceQuotaStatus{Hard: list("pods", "5", "secrets", "2"), Used: list("pods", "1", "secrets", "1")},
			corev1.ResourceQuotaStatus{Hard: list("pods", "5"), Used: list("pods", "1")},
			"hard secrets 2→none; used secrets 1→none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := story(tc.old, tc.cur); got != tc.want {
				t.Errorf("story = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOwnStatusWriteIsCheckedOnceMore(t *testing.T) {
	rc, err := client.New(&client.Config{Server: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Common: controller.Common{Client: rc, Informers: informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	quotaAt := func(rv string, hard, used corev1.ResourceList) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "compute", Namespace: ns, ResourceVersion: rv},
			Spec:       corev1.ResourceQuotaSpec{Hard: hard},
			Status:     corev1.ResourceQuotaStatus{Hard: hard, Used: used},
		}
	}
	hard := list("pods", "5")
	c.written[ns+"/compute"] = "12"

	// Someone else's status write: left to the resync.
	c.updateQuota(quotaAt("10", hard, list("pods", "2")), quotaAt("11", hard, list("pods", "4")))
	if n := c.queue.Len(); n != 0 {
		t.Fatalf("after a status change by someone else: %d queued, want 0", n)
	}
	// Ours reaching the cache: measured once more, then forgotten.
	c.updateQuota(quotaAt("11", hard, list("pods", "4")), quotaAt("12", hard, list("pods", "3")))
	if n := c.queue.Len(); n != 1 {
		t.Fatalf("after our own write reached the cache: %d queued, want 1", n)
	}
	if _, ok := c.written[ns+"/compute"]; ok {
		t.Error("the written resourceVersion is still remembered")
	}
	// A spec change is always measured.
	c.updateQuota(quotaAt("12", hard, nil), quotaAt("13", list("pods", "6"), nil))
	if n := c.queue.Len(); n != 1 {
		t.Errorf("after a spec change: %d queued, want 1 (the same key)", n)
	}
}

// A new object is not measured again: admission charged it. A deletion,
// which admission does not see, is.
func TestNewObjectsAreNotMeasuredAgain(t *testing.T) {
	rc, err := client.New(&client.Config{Server: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	c, err := New(Options{Common: controller.Common{Client: rc, Informers: factory}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "compute", Namespace: ns}, Spec: corev1.ResourceQuotaSpec{Hard: list("pods", "5")}}
	if err := informer.For[*corev1.ResourceQuota](factory).GetIndexer().Add(q); err != nil {
		t.Fatal(err)
	}
	h := c.objectHandler(api.Pods)
	for i := range 100 {
		h.OnAdd(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: ns}}, false)
	}
	if n := c.queue.Len(); n != 0 {
		t.Fatalf("100 new pods queued %d quotas, want none: admission charged them", n)
	}
	h.OnDelete(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: ns}})
	if n := c.queue.Len(); n != 1 {
		t.Errorf("a deleted pod queued %d quotas, want 1", n)
	}
}
