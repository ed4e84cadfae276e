package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/testenv"
	"github.com/minictl/minictl/kubelet"
)

const metricsPath = "/apis/metrics.k8s.io/v1beta1"

// testResolution is how often the test servers scrape their kubelets.
const testResolution = 100 * time.Millisecond

// runKubelet runs the simulated kubelet of node against env until the
// test ends.
func runKubelet(t *testing.T, env *testenv.Env, node string) {
	t.Helper()
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k, err := kubelet.New(kubelet.Options{Client: rc, NodeName: node, HeartbeatInterval: time.Second, StatusUpdateInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kubelet %s: %v", node, err)
		}
	})
}

func usagePod(name, node, cpu, memory string, labels map[string]string) *corev1.Pod {
	p := pod(name, node, labels)
	p.Annotations = map[string]string{kubelet.AnnotationCPUUsage: cpu, kubelet.AnnotationMemoryUsage: memory}
	return p
}

func quantityIs(q resource.Quantity, want string) bool { return q.Cmp(resource.MustParse(want)) == 0 }

// The API server serves metrics.k8s.io/v1beta1 as metrics-server does:
// the pods' and nodes' usage from two scrapes of their kubelets, the
// annotated 350m and 200Mi of a pod as its usage, the node's as its own
// 50m and 200Mi plus its pods'; lists filtered by labels and by
// metadata.name; 404 for what has no metrics, 405 for a watch or a write.
func TestResourceMetricsAPI(t *testing.T) {
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{MetricResolution: testResolution}})
	runKubelet(t, env, "node-1")
	create[corev1.Pod](t, env, podPath("default", ""), usagePod("web", "node-1", "350m", "200Mi", map[string]string{"app": "web"}))
	create[corev1.Pod](t, env, podPath("default", ""), usagePod("db", "node-1", "100m", "1Gi", map[string]string{"app": "db"}))
	create[corev1.Pod](t, env, podPath("default", ""), pod("pending", "", nil))

	var pm metricsv1beta1.PodMetrics
	eventually(t, "web's metrics at 350m and 200Mi", func() (bool, string) {
		r := do(t, env, http.MethodGet, metricsPath+"/namespaces/default/pods/web", "", nil)
		if r.code != http.StatusOK {
			return false, truncate(r.body)
		}
		r.into(t, &pm)
		return len(pm.Containers) == 1 && quantityIs(pm.Containers[0].Usage[corev1.ResourceCPU], "350m"), truncate(r.body)
	})
	if pm.Kind != "PodMetrics" || pm.APIVersion != "metrics.k8s.io/v1beta1" || pm.Name != "web" || pm.Namespace != "default" || pm.Labels["app"] != "web" {
		t.Errorf("pod metrics: %+v", pm)
	}
	if c := pm.Containers[0]; c.Name != "app" || !quantityIs(c.Usage[corev1.ResourceMemory], "200Mi") {
		t.Errorf("container %s uses %v, want app with 200Mi", c.Name, c.Usage)
	}
	if pm.Window.Duration <= 0 || pm.Timestamp.IsZero() {
		t.Errorf("window %v, timestamp %v", pm.Window, pm.Timestamp)
	}

	var nm metricsv1beta1.NodeMetrics
	eventually(t, "node-1's metrics at 500m", func() (bool, string) {
		r := do(t, env, http.MethodGet, metricsPath+"/nodes/node-1", "", nil)
		if r.code != http.StatusOK {
			return false, truncate(r.body)
		}
		r.into(t, &nm)
		return quantityIs(nm.Usage[corev1.ResourceCPU], "500m"), truncate(r.body)
	})
	if want := resource.MustParse("1424Mi"); nm.Kind != "NodeMetrics" || nm.Name != "node-1" || nm.Labels["kubernetes.io/hostname"] != "node-1" || nm.Usage.Memory().Cmp(want) != 0 {
		t.Errorf("node metrics: %+v, want 1424Mi (the node's 200Mi, web's 200Mi, db's 1Gi)", nm)
	}

	listed := func(path string) []string {
		t.Helper()
		var l metricsv1beta1.PodMetricsList
		call[metricsv1beta1.PodMetricsList](t, env, http.MethodGet, path, "", nil, http.StatusOK).DeepCopyInto(&l)
		var names []string
		for _, it := range l.Items {
			names = append(names, it.Namespace+"/"+it.Name)
		}
		return names
	}
	for path, want := range map[string][]string{
		metricsPath + "/namespaces/default/pods": {"default/db", "default/web"},
		metricsPath + "/pods":                    {"default/db", "default/web"},
		metricsPath + "/namespaces/default/pods" + "?" + query("labelSelector", "app=web"): {"default/web"},
		metricsPath + "/pods" + "?" + query("fieldSelector", "metadata.name=db"):           {"default/db"},
		metricsPath + "/namespaces/kube-system/pods":                                       nil,
	} {
		if got := listed(path); !equalStrings(got, want) {
			t.Errorf("GET %s: %v, want %v", path, got, want)
		}
	}
	nodes := call[metricsv1beta1.NodeMetricsList](t, env, http.MethodGet, metricsPath+"/nodes", "", nil, http.StatusOK)
	if nodes.Kind != "NodeMetricsList" || len(nodes.Items) != 1 || nodes.Items[0].Name != "node-1" {
		t.Errorf("node metrics list: %+v", nodes)
	}

	for _, c := range []struct {
		method, path string
		code         int
		reason       metav1.StatusReason
		message      string
	}{
		{"GET", metricsPath + "/namespaces/default/pods/nope", 404, metav1.StatusReasonNotFound, `pods "nope" not found`},
		{"GET", metricsPath + "/namespaces/default/pods/pending", 404, metav1.StatusReasonNotFound, `pods.metrics.k8s.io "default/pending" not found`},
		{"GET", metricsPath + "/nodes/nope", 404, metav1.StatusReasonNotFound, `nodes "nope" not found`},
		{"GET", metricsPath + "/pods" + "?" + query("fieldSelector", "spec.nodeName=node-1"), 400, metav1.StatusReasonBadRequest, ""},
		{"GET", metricsPath + "/namespaces/default/pods?watch=true", 405, metav1.StatusReasonMethodNotAllowed, `watch is not supported on resources of kind "pods.metrics.k8s.io"`},
		{"GET", metricsPath + "/nodes?watch=1", 405, metav1.StatusReasonMethodNotAllowed, `watch is not supported on resources of kind "nodes.metrics.k8s.io"`},
		{"POST", metricsPath + "/namespaces/default/pods", 405, metav1.StatusReasonMethodNotAllowed, ""},
		{"DELETE", metricsPath + "/nodes/node-1", 405, metav1.StatusReasonMethodNotAllowed, ""},
	} {
		var body any
		if c.method == "POST" {
			body = map[string]any{"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics", "metadata": map[string]any{"name": "x"}}
		}
		st := do(t, env, c.method, c.path, "", body).wantStatus(t, c.code, c.reason)
		if c.message != "" && st.Message != c.message {
			t.Errorf("%s %s: %q, want %q", c.method, c.path, st.Message, c.message)
		}
	}
	if got := get[corev1.Pod](t, env, podPath("default", "web")); got.Name != "web" {
		t.Errorf("the pod itself: %+v", got)
	}
}

// Discovery lists metrics.k8s.io/v1beta1 with nodes and pods, read only,
// so that kubectl top finds them.
func TestResourceMetricsDiscovery(t *testing.T) {
	env := testenv.Start(t)
	l := get[metav1.APIResourceList](t, env, metricsPath)
	want := map[string]bool{"nodes": false, "pods": true}
	if len(l.APIResources) != 2 {
		t.Fatalf("resources: %+v", l.APIResources)
	}
	for _, r := range l.APIResources {
		ns, ok := want[r.Name]
		if !ok || r.Namespaced != ns || !equalStrings(r.Verbs, []string{"get", "list"}) || r.Kind != map[string]string{"nodes": "NodeMetrics", "pods": "PodMetrics"}[r.Name] {
			t.Errorf("resource %+v", r)
		}
	}
	groups := get[metav1.APIGroupList](t, env, "/apis")
	found := false
	for _, g := range groups.Groups {
		found = found || g.Name == "metrics.k8s.io" && g.PreferredVersion.Version == "v1beta1"
	}
	if !found {
		t.Errorf("/apis does not list metrics.k8s.io v1beta1")
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// On the secure port the resource metrics are authorized as kube's are:
// by the metrics.k8s.io group's pods and nodes, which
// system:aggregated-metrics-reader grants and view, edit and admin
// aggregate.
func TestResourceMetricsRBAC(t *testing.T) {
	e := startRBACEnv(t)
	for _, ns := range []string{"team-a", "team-b"} {
		createNamespace(t, e.Env, ns)
	}
	create[rbacv1.RoleBinding](t, e.Env, rbacPath+"/namespaces/team-a/rolebindings",
		roleBinding("team-a", "bob-metrics", "ClusterRole", "system:aggregated-metrics-reader", userSubject("bob")))
	eventually(t, "bob's binding in force", func() (bool, string) {
		r := e.as(t, "bob", "GET", metricsPath+"/namespaces/team-a/pods", nil)
		return r.code == http.StatusOK, truncate(r.body)
	})
	e.as(t, "bob", "GET", metricsPath+"/namespaces/team-b/pods", nil).forbidden(t,
		`pods.metrics.k8s.io is forbidden: User "bob" cannot list resource "pods" in API group "metrics.k8s.io" in the namespace "team-b"`)
	e.as(t, "carol", "GET", metricsPath+"/nodes/node-1", nil).forbidden(t,
		`nodes.metrics.k8s.io "node-1" is forbidden: User "carol" cannot get resource "nodes" in API group "metrics.k8s.io" at the cluster scope`)

	role := get[rbacv1.ClusterRole](t, e.Env, rbacPath+"/clusterroles/system:aggregated-metrics-reader")
	for _, l := range []string{"admin", "edit", "view"} {
		if role.Labels["rbac.authorization.k8s.io/aggregate-to-"+l] != "true" {
			t.Errorf("system:aggregated-metrics-reader does not aggregate to %s: %v", l, role.Labels)
		}
	}
	want := rbacv1.PolicyRule{Verbs: list("get", "list", "watch"), APIGroups: list("metrics.k8s.io"), Resources: list("pods", "nodes")}
	if len(role.Rules) != 1 || fmt.Sprint(role.Rules[0]) != fmt.Sprint(want) {
		t.Errorf("rules %+v, want %+v", role.Rules, want)
	}
}
