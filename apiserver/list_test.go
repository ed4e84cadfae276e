package apiserver_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

func TestSelectors(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "other")
	for _, p := range []struct {
		ns, name, node string
		labels         map[string]string
		phase          corev1.PodPhase
	}{
		{"default", "front", "n1", map[string]string{"app": "web", "tier": "front"}, corev1.PodRunning},
		{"default", "back", "n2", map[string]string{"app": "web", "tier": "back"}, corev1.PodPending},
		{"default", "db", "", map[string]string{"app": "db"}, corev1.PodPending},
		{"other", "job", "n1", nil, corev1.PodSucceeded},
	} {
		create[corev1.Pod](t, env, podPath(p.ns, ""), pod(p.name, p.node, p.labels))
		if p.phase != corev1.PodPending {
			patch[corev1.Pod](t, env, podPath(p.ns, p.name)+"/status", mergePatch, fmt.Sprintf(`{"status":{"phase":%q}}`, p.phase))
		}
	}
	last := get[corev1.PodList](t, env, "/api/v1/pods").ResourceVersion

	for _, tc := range []struct {
		name, path, q string
		want          []string
	}{
		{"label =", podPath("default", ""), query("labelSelector", "app=web"), []string{"default/back", "default/front"}},
		{"label ==", podPath("default", ""), query("labelSelector", "app==db"), []string{"default/db"}},
		{"label !=", "/api/v1/pods", query("labelSelector", "app!=web"), []string{"default/db", "other/job"}},
		{"label in", "/api/v1/pods", query("labelSelector", "app in (web,db)"), []string{"default/back", "default/db", "default/front"}},
		{"label notin", "/api/v1/pods", query("labelSelector", "app notin (web)"), []string{"default/db", "other/job"}},
		{"label exists", "/api/v1/pods", query("labelSelector", "tier"), []string{"default/back", "default/front"}},
		{"label does not exist", "/api/v1/pods", query("labelSelector", "!tier"), []string{"default/db", "other/job"}},
		{"two label requirements", "/api/v1/pods", query("labelSelector", "app=web,tier!=front"), []string{"default/back"}},
		{"field metadata.name", "/api/v1/pods", query("fieldSelector", "metadata.name=front"), []string{"default/front"}},
		{"field metadata.namespace", "/api/v1/pods", query("fieldSelector", "metadata.namespace=other"), []string{"other/job"}},
		{"field metadata.namespace !=", "/api/v1/pods", query("fieldSelector", "metadata.namespace!=default"), []string{"other/job"}},
		{"field spec.nodeName", "/api/v1/pods", query("fieldSelector", "spec.nodeName=n1"), []string{"default/front", "other/job"}},
		{"field spec.nodeName empty", "/api/v1/pods", query("fieldSelector", "spec.nodeName="), []string{"default/db"}},
		{"field status.phase =", "/api/v1/pods", query("fieldSelector", "status.phase=Running"), []string{"default/front"}},
		{"field status.phase !=", "/api/v1/pods", query("fieldSelector", "status.phase!=Pending"), []string{"default/front", "other/job"}},
		{"two field requirements", "/api/v1/pods", query("fieldSelector", "spec.nodeName=n1,status.phase!=Succeeded"), []string{"default/front"}},
		{"label and field", podPath("default", ""), query("labelSelector", "app=web", "fieldSelector", "spec.nodeName=n2"), []string{"default/back"}},
		{"matches nothing", podPath("default", ""), query("labelSelector", "app=none"), []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The same answer from etcd (no resourceVersion), from the
			// watch cache (a resourceVersion it must have reached), and
			// page by page.
			for _, from := range []string{"", "&resourceVersion=" + last, "&limit=1"} {
				got := listAll(t, env, tc.path+"?"+tc.q+from)
				if !slices.Equal(got, tc.want) {
					t.Errorf("%s%s: got %v, want %v", tc.path, "?"+tc.q+from, got, tc.want)
				}
			}
		})
	}

	t.Run("selectors on a watch", func(t *testing.T) {
		s := watch(t, env, "/api/v1/pods?watch=true&"+query("labelSelector", "app=web", "fieldSelector", "spec.nodeName=n1"))
		s.expect(t, "ADDED front")
	})

	for _, tc := range []struct {
		name, q, message string
	}{
		{"unsupported field label", query("fieldSelector", "spec.containers=x"), "field label not supported"},
		{"unsupported field label of another kind", query("fieldSelector", "type=Opaque"), "field label not supported"},
		{"malformed field selector", query("fieldSelector", "status.phase"), ""},
		{"malformed label selector", query("labelSelector", "app in (web"), ""},
		{"label selector with a bad key", query("labelSelector", "-bad-=x"), ""},
		{"label selector with a bad operator", query("labelSelector", "app=>x"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, verb := range []string{"list", "watch"} {
				path := podPath("default", "") + "?" + tc.q
				if verb == "watch" {
					path += "&watch=true"
				}
				st := do(t, env, http.MethodGet, path, "", nil).wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
				if !strings.Contains(st.Message, tc.message) {
					t.Errorf("%s: message %q, want it to contain %q", verb, st.Message, tc.message)
				}
			}
		})
	}
}

// listAll lists path, following continue tokens, and returns the items'
// namespace/name in order.
func listAll(t *testing.T, env *testenv.Env, path string) []string {
	t.Helper()
	var out []string
	token := ""
	for range 100 {
		p := path
		if token != "" {
			p += "&continue=" + token
		}
		l := get[corev1.PodList](t, env, p)
		out = append(out, podNames(l)...)
		if token = l.Continue; token == "" {
			return out
		}
	}
	t.Fatalf("%s: more than 100 pages", path)
	return nil
}

func TestPagination(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "paged")
	var want []string
	for i := range 5 {
		name := fmt.Sprintf("cm-%d", i)
		create[corev1.ConfigMap](t, env, cmPath("paged", ""), configMap(name, nil, nil))
		want = append(want, name)
	}

	t.Run("limit=2 walks all with continue tokens", func(t *testing.T) {
		var got []string
		var listRV string
		path := cmPath("paged", "") + "?limit=2"
		for page := 0; ; page++ {
			l := get[corev1.ConfigMapList](t, env, path)
			if len(l.Items) > 2 {
				t.Fatalf("page %d has %d items", page, len(l.Items))
			}
			if page == 0 {
				listRV = l.ResourceVersion
				// A write between pages must not show in the pages that follow:
				// every page is read at the first page's revision.
				create[corev1.ConfigMap](t, env, cmPath("paged", ""), configMap("cm-9-late", nil, nil))
			} else if l.ResourceVersion != listRV {
				t.Errorf("page %d resourceVersion %s, first page %s", page, l.ResourceVersion, listRV)
			}
			got = append(got, cmNames(l)...)
			if l.Continue == "" {
				break
			}
			if page > 5 {
				t.Fatalf("too many pages")
			}
			if l.RemainingItemCount == nil || *l.RemainingItemCount <= 0 {
				t.Errorf("page %d: remainingItemCount %v", page, l.RemainingItemCount)
			}
			path = cmPath("paged", "") + "?limit=2&continue=" + l.Continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("pages gave %v, want %v (each exactly once)", got, want)
		}
	})

	t.Run("limit larger than the list", func(t *testing.T) {
		l := get[corev1.ConfigMapList](t, env, cmPath("paged", "")+"?limit=100")
		if len(l.Items) != 6 || l.Continue != "" {
			t.Errorf("%d items, continue %q", len(l.Items), l.Continue)
		}
	})

	for _, token := range []string{"garbage", "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MCwic3RhcnQiOiIifQ", "%00%01"} {
		t.Run("bad continue token "+token, func(t *testing.T) {
			do(t, env, http.MethodGet, cmPath("paged", "")+"?limit=2&continue="+token, "", nil).
				wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		})
	}
}

func TestListResourceVersion(t *testing.T) {
	env := testenv.Start(t)
	old := create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("cm", nil, map[string]string{"v": "old"}))
	in := old.DeepCopy()
	in.Data["v"] = "new"
	update[corev1.ConfigMap](t, env, cmPath("default", "cm"), in)

	t.Run("resourceVersion=0 is served from the cache and catches up", func(t *testing.T) {
		create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("fresh", nil, nil))
		eventually(t, "list with resourceVersion=0 shows the new object", func() (bool, string) {
			l := get[corev1.ConfigMapList](t, env, cmPath("default", "")+"?resourceVersion=0")
			return slices.Contains(cmNames(l), "fresh"), fmt.Sprint(cmNames(l))
		})
	})

	t.Run("Exact with an old resourceVersion returns the old state", func(t *testing.T) {
		l := get[corev1.ConfigMapList](t, env, cmPath("default", "")+"?resourceVersionMatch=Exact&resourceVersion="+old.ResourceVersion)
		if l.ResourceVersion != old.ResourceVersion {
			t.Errorf("list resourceVersion %s, want %s", l.ResourceVersion, old.ResourceVersion)
		}
		if len(l.Items) != 1 || l.Items[0].Data["v"] != "old" || l.Items[0].ResourceVersion != old.ResourceVersion {
			t.Errorf("items %+v, want cm with v=old", l.Items)
		}
	})

	t.Run("NotOlderThan a resourceVersion from another resource", func(t *testing.T) {
		// The cache for configmaps must learn that etcd moved on because
		// of a namespace write before it can answer.
		createNamespace(t, env, "moved-on")
		nsRV := get[corev1.NamespaceList](t, env, "/api/v1/namespaces").ResourceVersion
		l := get[corev1.ConfigMapList](t, env, cmPath("default", "")+"?resourceVersionMatch=NotOlderThan&resourceVersion="+nsRV)
		if rv(t, l.ResourceVersion) < rv(t, nsRV) {
			t.Errorf("list resourceVersion %s older than %s", l.ResourceVersion, nsRV)
		}
	})

	t.Run("Exact with resourceVersion=0 is refused", func(t *testing.T) {
		do(t, env, http.MethodGet, cmPath("default", "")+"?resourceVersionMatch=Exact&resourceVersion=0", "", nil).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	})

	t.Run("a resourceVersion that is not a number", func(t *testing.T) {
		do(t, env, http.MethodGet, cmPath("default", "")+"?resourceVersion=abc", "", nil).
			wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
	})

	t.Run("Exact with a compacted resourceVersion is Gone", func(t *testing.T) {
		cur := revision(t, env)
		if err := env.Store.Compact(t.Context(), cur); err != nil {
			t.Fatalf("compact: %v", err)
		}
		st := do(t, env, http.MethodGet, cmPath("default", "")+"?resourceVersionMatch=Exact&resourceVersion="+old.ResourceVersion, "", nil).status(t)
		if st.Code != http.StatusGone {
			t.Errorf("got %d %s, want 410", st.Code, st.Reason)
		}
	})
}

// TestExpiredContinueToken: a continue token whose revision was compacted
// is 410 Gone, as in kube-apiserver, and the Status carries a token that
// goes on from where the expired one stopped, at the latest revision.
func TestExpiredContinueToken(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "pages")
	for _, name := range []string{"a", "b", "c"} {
		create[corev1.ConfigMap](t, env, cmPath("pages", ""), configMap(name, nil, nil))
	}
	first := get[corev1.ConfigMapList](t, env, cmPath("pages", "")+"?limit=1")
	if len(first.Items) != 1 || first.Continue == "" {
		t.Fatalf("first page: %d items, continue %q", len(first.Items), first.Continue)
	}
	create[corev1.ConfigMap](t, env, cmPath("pages", ""), configMap("d", nil, nil)) // after the first page
	if err := env.Store.Compact(t.Context(), revision(t, env)); err != nil {
		t.Fatalf("compact: %v", err)
	}

	st := do(t, env, http.MethodGet, cmPath("pages", "")+"?limit=1&continue="+first.Continue, "", nil).
		wantStatus(t, http.StatusGone, metav1.StatusReasonExpired)
	if !strings.Contains(st.Message, "use the continue token in this response") || st.Continue == "" {
		t.Fatalf("410 %q with continue %q: want kube's message and a token to go on with", st.Message, st.Continue)
	}
	var rest []string
	token := st.Continue
	for token != "" {
		page := get[corev1.ConfigMapList](t, env, cmPath("pages", "")+"?limit=1&continue="+token)
		for _, cm := range page.Items {
			rest = append(rest, cm.Name)
		}
		token = page.Continue
	}
	if got := strings.Join(rest, ","); got != "b,c,d" {
		t.Errorf("went on with %s, want b,c,d: the rest from where the first page stopped, as of now", got)
	}
}
