package resourcequota

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/internal/testenv"
)

// computeHard limits every compute name a pod is charged under.
var computeHard = list(
	"pods", "5", "count/pods", "10",
	"requests.cpu", "2", "requests.memory", "2Gi", "limits.cpu", "4", "limits.memory", "4Gi",
	"cpu", "2", "memory", "2Gi",
)

func TestUsedFollowsPodCreatesAndDeletes(t *testing.T) {
	f := run(t, time.Hour)
	ctx := t.Context()
	f.createQuota(t, "compute", computeHard)
	f.waitForUsed(t, "compute", list(
		"pods", "0", "count/pods", "0", "requests.cpu", "0", "requests.memory", "0",
		"limits.cpu", "0", "limits.memory", "0", "cpu", "0", "memory", "0"))

	// web: 0.1 + 0.2 cpu in two containers, which must add up to 300m exactly.
	web := podSpec("web",
		res(list("cpu", "0.1", "memory", "128Mi"), list("cpu", "200m", "memory", "256Mi")),
		res(list("cpu", "0.2", "memory", "128Mi"), list("cpu", "300m", "memory", "256Mi")))
	if _, err := f.pods.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	f.waitForUsed(t, "compute", list(
		"pods", "1", "count/pods", "1", "requests.cpu", "300m", "requests.memory", "256Mi",
		"limits.cpu", "500m", "limits.memory", "512Mi", "cpu", "300m", "memory", "256Mi"))

	// db: an init container larger than its app container sets its cpu.
	db := podSpec("db", res(list("cpu", "500m", "memory", "1Gi"), list("cpu", "1", "memory", "1Gi")))
	db.Spec.InitContainers = []corev1.Container{{
		Name: "migrate", Image: "busybox",
		Resources: res(list("cpu", "1", "memory", "64Mi"), list("cpu", "1", "memory", "64Mi")),
	}}
	if _, err := f.pods.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	f.waitForUsed(t, "compute", list(
		"pods", "2", "count/pods", "2", "requests.cpu", "1300m", "requests.memory", "1280Mi",
		"limits.cpu", "1500m", "limits.memory", "1536Mi", "cpu", "1300m", "memory", "1280Mi"))
	// Creates are charged by the API server's quota admission; a delete is
	// given back by the controller, which tells it.
	if err := f.pods.Delete(ctx, ns, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitForUsed(t, "compute", list(
		"pods", "1", "count/pods", "1", "requests.cpu", "1", "requests.memory", "1Gi",
		"limits.cpu", "1", "limits.memory", "1Gi", "cpu", "1", "memory", "1Gi"))
	controllertest.Eventually(t, "the story of pods 2→1", func() (bool, string) {
		return f.logs.has(`msg="used `, "pods 2→1 (hard 5)", "object=team-a/compute"), "no such log line"
	})
}

func TestSucceededPodStopsCounting(t *testing.T) {
	f := run(t, time.Hour)
	ctx := t.Context()
	f.createQuota(t, "compute", list("pods", "5", "count/pods", "5", "requests.cpu", "2", "limits.memory", "1Gi"))
	job := podSpec("job", res(list("cpu", "250m"), list("memory", "100Mi")))
	if _, err := f.pods.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	f.waitForUsed(t, "compute", list("pods", "1", "count/pods", "1", "requests.cpu", "250m", "limits.memory", "100Mi"))

	// Play the kubelet: the pod ran to completion.
	got, err := f.pods.Get(ctx, ns, "job")
	if err != nil {
		t.Fatal(err)
	}
	got.Status.Phase = corev1.PodSucceeded
	if _, err := f.pods.UpdateStatus(ctx, got); err != nil {
		t.Fatal(err)
	}
	// It is still stored, so count/pods still counts it; nothing else does.
	f.waitForUsed(t, "compute", list("pods", "0", "count/pods", "1", "requests.cpu", "0", "limits.memory", "0"))
}

func TestUsedFollowsObjectCounts(t *testing.T) {
	f := run(t, time.Hour)
	ctx := t.Context()
	configMaps := client.For[*corev1.ConfigMap](f.rc)
	services := client.For[*corev1.Service](f.rc)
	deployments := client.For[*appsv1.Deployment](f.rc)

	if f.watching(api.ConfigMaps) {
		t.Fatal("configmaps are watched before any quota counts them")
	}
	f.createQuota(t, "objects", list(
		"configmaps", "5", "count/configmaps", "5",
		"services", "5", "services.nodeports", "5", "services.loadbalancers", "1",
		"count/deployments.apps", "2", "secrets", "3",
	))
	f.waitForUsed(t, "objects", list(
		"configmaps", "0", "count/configmaps", "0", "count/deployments.apps", "0", "secrets", "0",
		"services", "0", "services.loadbalancers", "0", "services.nodeports", "0"))

	for _, name := range []string{"a", "b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		if _, err := configMaps.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	port := func(name string, p int32) corev1.ServicePort { return corev1.ServicePort{Name: name, Port: p} }
	clusterIP := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "internal", Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{port("http", 80)}},
	}
	nodePort := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "exposed", Namespace: ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{port("http", 80), port("admin", 81)}},
	}
	for _, svc := range []*corev1.Service{clusterIP, nodePort} {
		if _, err := services.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	labels := map[string]string{"app": "web"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
	if _, err := deployments.Create(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	f.waitForUsed(t, "objects", list(
		"configmaps", "2", "count/configmaps", "2", "count/deployments.apps", "1", "secrets", "0",
		"services", "2", "services.loadbalancers", "0", "services.nodeports", "2"))

	if err := configMaps.Delete(ctx, ns, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := services.Delete(ctx, ns, "exposed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := deployments.Delete(ctx, ns, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitForUsed(t, "objects", list(
		"configmaps", "1", "count/configmaps", "1", "count/deployments.apps", "0", "secrets", "0",
		"services", "1", "services.loadbalancers", "0", "services.nodeports", "0"))
}

// A kind the server serves, which the controller is not told about, is
// found through discovery and counted: the controller keeps
// count/widgets.example.com true, and the API server's quota admission
// refuses the widget that would exceed it.
func TestCountsAKindFoundThroughDiscovery(t *testing.T) {
	widgets := testenv.Widgets()
	f := runWith(t, time.Hour, api.Resources().With(widgets))
	ctx := t.Context()
	wc := client.ForResource(f.rc, widgets)
	create := func(name string) error {
		w := &unstructured.Unstructured{}
		w.SetName(name)
		w.SetNamespace(ns)
		_, err := wc.Create(ctx, w)
		return err
	}
	if err := create("w1"); err != nil {
		t.Fatal(err)
	}
	f.createQuota(t, "widgets", list("count/widgets.example.com", "2"))
	f.waitForUsed(t, "widgets", list("count/widgets.example.com", "1"))
	if !f.watching(widgets) {
		t.Fatal("widgets are counted but not watched")
	}
	if err := create("w2"); err != nil {
		t.Fatal(err)
	}
	f.waitForUsed(t, "widgets", list("count/widgets.example.com", "2"))
	if err := create("w3"); !client.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: widgets") {
		t.Fatalf("third widget: %v, want Forbidden: exceeded quota", err)
	}
	if err := wc.Delete(ctx, ns, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitForUsed(t, "widgets", list("count/widgets.example.com", "1"))
}

func TestHardMirrorsSpecAfterUpdate(t *testing.T) {
	f := run(t, time.Hour)
	ctx := t.Context()
	f.createQuota(t, "compute", list("pods", "5"))
	if _, err := f.pods.Create(ctx, podSpec("web", res(list("cpu", "100m"), nil))); err != nil {
		t.Fatal(err)
	}
	q := f.waitForUsed(t, "compute", list("pods", "1"))

	// Raise pods, limit cpu too, and stop limiting nothing else: status
	// follows spec, and the new resource is measured at once.
	q.Spec.Hard = list("pods", "10", "requests.cpu", "1")
	if _, err := f.quotas.Update(ctx, q); err != nil {
		t.Fatal(err)
	}
	q = f.waitForUsed(t, "compute", list("pods", "1", "requests.cpu", "100m"))
	if h := q.Status.Hard["pods"]; h.String() != "10" {
		t.Errorf("status.hard pods = %s, want 10", h.String())
	}

	// A resource no longer limited leaves status.
	q.Spec.Hard = list("requests.cpu", "1")
	if _, err := f.quotas.Update(ctx, q); err != nil {
		t.Fatal(err)
	}
	f.waitForUsed(t, "compute", list("requests.cpu", "100m"))
}

func TestResyncFixesTamperedUsage(t *testing.T) {
	f := run(t, 500*time.Millisecond)
	ctx := t.Context()
	f.createQuota(t, "compute", list("pods", "5", "requests.memory", "1Gi"))
	if _, err := f.pods.Create(ctx, podSpec("web", res(list("memory", "256Mi"), nil))); err != nil {
		t.Fatal(err)
	}
	q := f.waitForUsed(t, "compute", list("pods", "1", "requests.memory", "256Mi"))

	// Someone writes a wrong usage. No event tells the controller (status
	// changes are not watched); the periodic recalculation sets it right.
	q.Status.Used = list("pods", "4", "requests.memory", "1Gi", "secrets", "7")
	tampered, err := f.quotas.UpdateStatus(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if u := tampered.Status.Used["pods"]; u.String() != "4" {
		t.Fatalf("tampered status.used pods = %s, want 4", u.String())
	}
	f.waitForUsed(t, "compute", list("pods", "1", "requests.memory", "256Mi"))
	controllertest.Eventually(t, "the story of the fix", func() (bool, string) {
		return f.logs.has("pods 4→1 (hard 5)") && f.logs.has("requests.memory 1Gi→256Mi (hard 1Gi)") && f.logs.has("secrets 7→none"),
			"no such log line"
	})
}

// hidingDiscovery is the server's discovery, less the resources of group
// hidden while hide is set: a kind that stops being served.
type hidingDiscovery struct {
	rc     *client.RESTClient
	hidden string
	hide   atomic.Bool
}

func (d *hidingDiscovery) ServerPreferredResources(ctx context.Context) (client.ServedResources, error) {
	served, err := d.rc.ServerPreferredResources(ctx)
	if !d.hide.Load() {
		return served, err
	}
	return slices.DeleteFunc(served, func(s client.ServedResource) bool { return s.Resource.Group == d.hidden }), err
}

// A kind that stops being served stops its informer, whose goroutines are
// gone; when it is served again, its quotas are measured again.
func TestAKindThatGoesStopsItsInformer(t *testing.T) {
	widgets := testenv.Widgets()
	env := controllertest.StartWith(t, controllertest.Options{ClientTimeout: 20 * time.Second, Resources: api.Resources().With(widgets)})
	rc := env.Client
	if _, err := client.For[*corev1.Namespace](rc).Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	disc := &hidingDiscovery{rc: rc, hidden: "example.com"}
	c, err := New(Options{
		Common:       controller.Common{Client: rc, Informers: env.Informers, Logger: controllertest.Logger(t)},
		ResyncPeriod: time.Hour, Discovery: disc, DiscoveryPeriod: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 2, c)
	f := &fixture{rc: rc, c: c, quotas: client.For[*corev1.ResourceQuota](rc)}
	wc := client.ForResource(rc, widgets)
	w := &unstructured.Unstructured{}
	w.SetName("w1")
	w.SetNamespace(ns)
	if _, err := wc.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	f.createQuota(t, "widgets", list("count/widgets.example.com", "5"))
	f.waitForUsed(t, "widgets", list("count/widgets.example.com", "1"))
	widgetSource := func() *source {
		c.mu.Lock()
		defer c.mu.Unlock()
		for res, s := range c.sources {
			if res.GroupResource() == widgets.GroupResource() {
				return s
			}
		}
		return nil
	}
	if widgetSource() == nil {
		t.Fatal("widgets are counted without a source")
	}
	watches := func() int { return controllertest.ServerWatches(t, rc, "widgets") }
	controllertest.Eventually(t, "the server to see one widgets watch", func() (bool, string) { return watches() == 1, "" })

	disc.hide.Store(true)
	controllertest.Eventually(t, "the widgets source to close", func() (bool, string) { return widgetSource() == nil, "" })
	// Its informer, which nothing else used, stopped: its watch is gone.
	controllertest.Eventually(t, "the server to see no widgets watch", func() (bool, string) { return watches() == 0, "" })

	// Deleted while not served: nobody counts it, until widgets are
	// served again and the quota is measured again.
	if err := wc.Delete(t.Context(), ns, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	disc.hide.Store(false)
	f.waitForUsed(t, "widgets", list("count/widgets.example.com", "0"))
	if widgetSource() == nil {
		t.Fatal("widgets are counted again but not watched")
	}
}
