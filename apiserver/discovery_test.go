package apiserver_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/minictl/minictl/internal/testenv"
)

func TestDiscovery(t *testing.T) {
	env := testenv.Start(t)

	t.Run("/api", func(t *testing.T) {
		v := get[metav1.APIVersions](t, env, "/api")
		if v.Kind != "APIVersions" || !slices.Equal(v.Versions, []string{"v1"}) {
			t.Errorf("kind %q versions %v", v.Kind, v.Versions)
		}
	})

	t.Run("/apis", func(t *testing.T) {
		l := get[metav1.APIGroupList](t, env, "/apis")
		if l.Kind != "APIGroupList" {
			t.Errorf("kind %q", l.Kind)
		}
		groups := map[string]metav1.APIGroup{}
		for _, g := range l.Groups {
			groups[g.Name] = g
		}
		for _, name := range []string{"apps", "coordination.k8s.io"} {
			g, ok := groups[name]
			if !ok {
				t.Errorf("group %s missing from %v", name, l.Groups)
				continue
			}
			if g.PreferredVersion.GroupVersion != name+"/v1" || len(g.Versions) == 0 {
				t.Errorf("group %s: preferred %+v versions %+v", name, g.PreferredVersion, g.Versions)
			}
		}
		g := get[metav1.APIGroup](t, env, "/apis/apps")
		if g.Name != "apps" || g.PreferredVersion.Version != "v1" {
			t.Errorf("/apis/apps: %+v", g)
		}
		do(t, env, http.MethodGet, "/apis/nope", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	})

	t.Run("/api/v1", func(t *testing.T) {
		l := get[metav1.APIResourceList](t, env, "/api/v1")
		if l.Kind != "APIResourceList" || l.GroupVersion != "v1" {
			t.Errorf("kind %q groupVersion %q", l.Kind, l.GroupVersion)
		}
		pods := find(t, l, "pods")
		if !pods.Namespaced || pods.Kind != "Pod" || pods.SingularName != "pod" || !slices.Contains(pods.ShortNames, "po") {
			t.Errorf("pods: %+v", pods)
		}
		for _, verb := range []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"} {
			if !slices.Contains(pods.Verbs, verb) {
				t.Errorf("pods verbs %v lack %s", pods.Verbs, verb)
			}
		}
		if st := find(t, l, "pods/status"); st.Kind != "Pod" || !slices.Contains(st.Verbs, "update") {
			t.Errorf("pods/status: %+v", st)
		}
		if b := find(t, l, "pods/binding"); b.Kind != "Binding" || !slices.Equal(b.Verbs, metav1.Verbs{"create"}) {
			t.Errorf("pods/binding: %+v", b)
		}
		if e := find(t, l, "pods/eviction"); e.Group != "policy" || e.Version != "v1" || e.Kind != "Eviction" || !slices.Equal(e.Verbs, metav1.Verbs{"create"}) {
			t.Errorf("pods/eviction: %+v, want policy/v1 Eviction, create (what kubectl drain looks for)", e)
		}
		if e := find(t, l, "pods/exec"); e.Kind != "PodExecOptions" || !slices.Equal(e.Verbs, metav1.Verbs{"create", "get"}) {
			t.Errorf("pods/exec: %+v", e)
		}
		if rc := find(t, l, "replicationcontrollers"); !rc.Namespaced || rc.Kind != "ReplicationController" ||
			!slices.Equal(rc.ShortNames, []string{"rc"}) || !slices.Equal(rc.Categories, []string{"all"}) {
			t.Errorf("replicationcontrollers: %+v", rc)
		}
		if sc := find(t, l, "replicationcontrollers/scale"); sc.Group != "autoscaling" || sc.Kind != "Scale" {
			t.Errorf("replicationcontrollers/scale: %+v", sc)
		}
		find(t, l, "replicationcontrollers/status")
		if ns := find(t, l, "namespaces"); ns.Namespaced || !slices.Contains(ns.ShortNames, "ns") {
			t.Errorf("namespaces: %+v", ns)
		}
		find(t, l, "namespaces/finalize")
		find(t, l, "configmaps")
	})

	t.Run("/apis/apps/v1", func(t *testing.T) {
		l := get[metav1.APIResourceList](t, env, "/apis/apps/v1")
		if l.GroupVersion != "apps/v1" {
			t.Errorf("groupVersion %q", l.GroupVersion)
		}
		if d := find(t, l, "deployments"); d.Kind != "Deployment" || !slices.Contains(d.ShortNames, "deploy") {
			t.Errorf("deployments: %+v", d)
		}
		sc := find(t, l, "deployments/scale")
		if sc.Group != "autoscaling" || sc.Version != "v1" || sc.Kind != "Scale" {
			t.Errorf("deployments/scale: %+v", sc)
		}
		if sc := find(t, l, "replicasets/scale"); sc.Group != "autoscaling" || sc.Kind != "Scale" {
			t.Errorf("replicasets/scale: %+v", sc)
		}
		do(t, env, http.MethodGet, "/apis/apps/v2", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	})

	t.Run("trailing slash", func(t *testing.T) {
		if v := get[metav1.APIVersions](t, env, "/api/"); v.Kind != "APIVersions" {
			t.Errorf("/api/: kind %q", v.Kind)
		}
		if l := get[metav1.APIGroupList](t, env, "/apis/"); l.Kind != "APIGroupList" || len(l.Groups) == 0 {
			t.Errorf("/apis/: kind %q, %d groups", l.Kind, len(l.Groups))
		}
		if g := get[metav1.APIGroup](t, env, "/apis/apps/"); g.Name != "apps" {
			t.Errorf("/apis/apps/: %+v", g)
		}
		for path, gv := range map[string]string{"/api/v1/": "v1", "/apis/apps/v1/": "apps/v1"} {
			if l := get[metav1.APIResourceList](t, env, path); l.GroupVersion != gv || len(l.APIResources) == 0 {
				t.Errorf("%s: groupVersion %q, %d resources", path, l.GroupVersion, len(l.APIResources))
			}
		}
		do(t, env, http.MethodPost, "/api/v1/", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	})

	t.Run("/version", func(t *testing.T) {
		v := get[version.Info](t, env, "/version")
		if v.Major != "1" || !strings.HasPrefix(v.GitVersion, "v1.") || v.GoVersion == "" {
			t.Errorf("version %+v", v)
		}
	})

	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		t.Run(path, func(t *testing.T) {
			r := do(t, env, http.MethodGet, path, "", nil).want(t, http.StatusOK)
			if string(r.body) != "ok" {
				t.Errorf("body %q", r.body)
			}
		})
	}

	t.Run("/metrics", func(t *testing.T) {
		get[corev1.PodList](t, env, podPath("default", "")) // at least one request to count
		r := do(t, env, http.MethodGet, "/metrics", "", nil).want(t, http.StatusOK)
		body := string(r.body)
		for _, want := range []string{
			"# TYPE apiserver_request_total counter",
			`apiserver_request_total{code="200",resource="pods",subresource="",verb="list"}`,
			"apiserver_request_duration_seconds_bucket",
			`minictl_etcd_watches{resource="pods"} 1`,
			"go_goroutines",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})
}

func find(t *testing.T, l *metav1.APIResourceList, name string) metav1.APIResource {
	t.Helper()
	for _, r := range l.APIResources {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("%s: no resource %q", l.GroupVersion, name)
	return metav1.APIResource{}
}
