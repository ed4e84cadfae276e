package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
)

// listRV lists configmaps in ns and returns the list's resourceVersion, the
// point a client watches from.
func listRV(t *testing.T, env *testenv.Env, ns string) string {
	t.Helper()
	return get[corev1.ConfigMapList](t, env, cmPath(ns, "")).ResourceVersion
}

func deleteCM(t *testing.T, env *testenv.Env, ns, name string) {
	t.Helper()
	do(t, env, http.MethodDelete, cmPath(ns, name), "", nil).want(t, http.StatusOK)
}

func TestWatchEvents(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "w")
	from := listRV(t, env, "w")
	s := watch(t, env, cmPath("w", "")+"?watch=true&resourceVersion="+from)
	if !slices.Equal(s.resp.TransferEncoding, []string{"chunked"}) {
		t.Errorf("Transfer-Encoding %v, want chunked", s.resp.TransferEncoding)
	}

	a := create[corev1.ConfigMap](t, env, cmPath("w", ""), configMap("a", nil, map[string]string{"v": "1"}))
	patched := patch[corev1.ConfigMap](t, env, cmPath("w", "a"), mergePatch, `{"data":{"v":"2"}}`)
	b := create[corev1.ConfigMap](t, env, cmPath("w", ""), configMap("b", nil, nil))
	deleteCM(t, env, "w", "a")
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("elsewhere", nil, nil)) // another namespace: not seen

	evs := s.expect(t, "ADDED a", "MODIFIED a", "ADDED b", "DELETED a")
	if evs[0].meta.ResourceVersion != a.ResourceVersion || evs[1].meta.ResourceVersion != patched.ResourceVersion ||
		evs[2].meta.ResourceVersion != b.ResourceVersion {
		t.Errorf("event resourceVersions %v, want those the writes returned (%s %s %s)", evs, a.ResourceVersion, patched.ResourceVersion, b.ResourceVersion)
	}
	for _, ev := range evs {
		var cm corev1.ConfigMap
		if err := json.Unmarshal(ev.Object, &cm); err != nil {
			t.Fatalf("decode %s: %v", ev, err)
		}
		if cm.Kind != "ConfigMap" || cm.APIVersion != "v1" || cm.Namespace != "w" {
			t.Errorf("%s: object is %s %s in %q", ev, cm.APIVersion, cm.Kind, cm.Namespace)
		}
		if ev.Type != "ADDED" && cm.Data["v"] != "2" && cm.Name == "a" {
			t.Errorf("%s: data %v, want the last state", ev, cm.Data)
		}
	}
	// The deleted object is reported at the deletion's revision.
	if rv(t, evs[3].meta.ResourceVersion) <= rv(t, b.ResourceVersion) {
		t.Errorf("DELETED at %s, not after %s", evs[3].meta.ResourceVersion, b.ResourceVersion)
	}

	t.Run("without a resourceVersion, existing objects come first as ADDED", func(t *testing.T) {
		s := watch(t, env, cmPath("w", "")+"?watch=true")
		s.expect(t, "ADDED b")
		create[corev1.ConfigMap](t, env, cmPath("w", ""), configMap("c", nil, nil))
		s.expect(t, "ADDED c")
	})

	t.Run("one object by fieldSelector", func(t *testing.T) {
		s := watch(t, env, cmPath("w", "")+"?watch=true&fieldSelector=metadata.name%3Dc")
		s.expect(t, "ADDED c")
		patch[corev1.ConfigMap](t, env, cmPath("w", "b"), mergePatch, `{"data":{"x":"y"}}`)
		patch[corev1.ConfigMap](t, env, cmPath("w", "c"), mergePatch, `{"data":{"x":"y"}}`)
		s.expect(t, "MODIFIED c")
	})

	t.Run("all namespaces", func(t *testing.T) {
		s := watch(t, env, "/api/v1/configmaps?watch=true&resourceVersion="+get[corev1.ConfigMapList](t, env, "/api/v1/configmaps").ResourceVersion)
		create[corev1.ConfigMap](t, env, cmPath("w", ""), configMap("d", nil, nil))
		create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("e", nil, nil))
		s.expect(t, "ADDED d", "ADDED e")
	})
}

func TestWatchResume(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "r")
	from := listRV(t, env, "r")

	first := watch(t, env, cmPath("r", "")+"?watch=true&resourceVersion="+from)
	for _, n := range []string{"a", "b", "c"} {
		create[corev1.ConfigMap](t, env, cmPath("r", ""), configMap(n, nil, nil))
	}
	seen := first.expect(t, "ADDED a", "ADDED b", "ADDED c")
	first.close()
	last := seen[len(seen)-1].meta.ResourceVersion

	// Changes while no one watches.
	create[corev1.ConfigMap](t, env, cmPath("r", ""), configMap("d", nil, nil))
	patch[corev1.ConfigMap](t, env, cmPath("r", "a"), mergePatch, `{"data":{"k":"v"}}`)
	deleteCM(t, env, "r", "b")
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("noise", nil, nil))

	second := watch(t, env, cmPath("r", "")+"?watch=true&resourceVersion="+last)
	missed := second.expect(t, "ADDED d", "MODIFIED a", "DELETED b")
	if rv(t, missed[0].meta.ResourceVersion) <= rv(t, last) {
		t.Errorf("first replayed event %s is not after %s", missed[0], last)
	}
	// Nothing else was replayed: the next event is the next write.
	create[corev1.ConfigMap](t, env, cmPath("r", ""), configMap("sentinel", nil, nil))
	second.expect(t, "ADDED sentinel")

	t.Run("from the middle of the missed events", func(t *testing.T) {
		s := watch(t, env, cmPath("r", "")+"?watch=true&resourceVersion="+missed[0].meta.ResourceVersion)
		s.expect(t, "MODIFIED a", "DELETED b", "ADDED sentinel")
	})
}

func TestWatchSelectorTransitions(t *testing.T) {
	env := testenv.Start(t)
	from := listRV(t, env, "default")
	s := watch(t, env, cmPath("default", "")+"?watch=true&labelSelector=app%3Dweb&resourceVersion="+from)

	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("x", map[string]string{"app": "web"}, nil))
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("y", map[string]string{"app": "db"}, nil))
	patch[corev1.ConfigMap](t, env, cmPath("default", "x"), mergePatch, `{"metadata":{"labels":{"app":"db"}}}`)  // leaves
	patch[corev1.ConfigMap](t, env, cmPath("default", "y"), mergePatch, `{"metadata":{"labels":{"app":"web"}}}`) // enters
	patch[corev1.ConfigMap](t, env, cmPath("default", "y"), mergePatch, `{"data":{"k":"v"}}`)                    // stays
	patch[corev1.ConfigMap](t, env, cmPath("default", "x"), mergePatch, `{"data":{"k":"v"}}`)                    // stays out
	deleteCM(t, env, "default", "y")
	deleteCM(t, env, "default", "x")
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("z", map[string]string{"app": "web"}, nil))

	evs := s.expect(t, "ADDED x", "DELETED x", "ADDED y", "MODIFIED y", "DELETED y", "ADDED z")
	// The object that left is reported as it was when it still matched.
	var left corev1.ConfigMap
	if err := json.Unmarshal(evs[1].Object, &left); err != nil {
		t.Fatal(err)
	}
	if left.Labels["app"] != "web" {
		t.Errorf("DELETED x carries labels %v, want the last matching state", left.Labels)
	}
}

func TestWatchBookmarks(t *testing.T) {
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{BookmarkInterval: 50 * time.Millisecond}})
	from := listRV(t, env, "default")
	with := watch(t, env, cmPath("default", "")+"?watch=true&allowWatchBookmarks=true&resourceVersion="+from)
	without := watch(t, env, cmPath("default", "")+"?watch=true&resourceVersion="+from)

	for range 2 {
		ev := with.next(t)
		if ev.Type != "BOOKMARK" {
			t.Fatalf("got %s, want BOOKMARK", ev)
		}
		if ev.meta.Kind != "ConfigMap" || ev.meta.APIVersion != "v1" || rv(t, ev.meta.ResourceVersion) < rv(t, from) {
			t.Errorf("bookmark %s %s at %s, want a v1 ConfigMap not older than %s", ev.meta.APIVersion, ev.meta.Kind, ev.meta.ResourceVersion, from)
		}
	}
	cm := create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("after", nil, nil))
	// A watcher that did not ask for bookmarks gets none.
	if ev := without.next(t); ev.Type != "ADDED" || ev.meta.Name != "after" {
		t.Errorf("watcher without bookmarks got %s, want ADDED after", ev)
	}
	// Bookmarks come in order with events: those after an event are not
	// older than it.
	if ev := with.nextNonBookmark(t); ev.Type != "ADDED" || ev.meta.Name != "after" {
		t.Fatalf("watcher with bookmarks got %s, want ADDED after", ev)
	}
	for range 2 {
		ev := with.next(t)
		if ev.Type != "BOOKMARK" || rv(t, ev.meta.ResourceVersion) < rv(t, cm.ResourceVersion) {
			t.Errorf("after ADDED at %s: got %s", cm.ResourceVersion, ev)
		}
	}
}

func TestWatchTimeout(t *testing.T) {
	env := testenv.Start(t)
	start := time.Now()
	s := watch(t, env, cmPath("default", "")+"?watch=true&timeoutSeconds=1")
	s.ended(t, waitTimeout)
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("stream ended after %v, before its 1s timeout", d)
	}
}

func TestWatchCompacted(t *testing.T) {
	env := testenv.Start(t)
	old := create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("a", nil, nil))
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("b", nil, nil))
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("c", nil, nil))
	compacted := revision(t, env)
	if err := env.Store.Compact(t.Context(), compacted); err != nil {
		t.Fatalf("compact: %v", err)
	}

	s := watch(t, env, cmPath("default", "")+"?watch=true&resourceVersion="+old.ResourceVersion)
	ev := s.next(t)
	if ev.Type != "ERROR" {
		t.Fatalf("got %s, want ERROR", ev)
	}
	st := ev.status(t)
	if st.Kind != "Status" || st.Code != http.StatusGone ||
		(st.Reason != metav1.StatusReasonExpired && st.Reason != metav1.StatusReasonGone) {
		t.Errorf("ERROR carries %s code %d reason %q, want a Status with 410 Expired or Gone", st.Kind, st.Code, st.Reason)
	}
	s.ended(t, waitTimeout)

	t.Run("from the compacted revision itself", func(t *testing.T) {
		s := watch(t, env, cmPath("default", "")+"?watch=true&resourceVersion="+fmt.Sprint(compacted))
		create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("d", nil, nil))
		s.expect(t, "ADDED d")
	})
}

func TestWatchInitialEvents(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "wl")
	for _, n := range []string{"x", "y"} {
		create[corev1.ConfigMap](t, env, cmPath("wl", ""), configMap(n, nil, nil))
	}
	// The last write is to another resource: the configmaps cache must
	// still answer at once, and with both objects.
	createNamespace(t, env, "unrelated")

	for _, tc := range []struct{ name, q string }{
		{"resourceVersion empty", "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion="},
		{"with allowWatchBookmarks", "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=&allowWatchBookmarks=true"},
		{"resourceVersion 0", "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := watch(t, env, cmPath("wl", "")+"?watch=true&"+tc.q)
			added := s.expect(t, "ADDED x", "ADDED y")
			ev := s.next(t)
			if ev.Type != "BOOKMARK" || ev.meta.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
				t.Fatalf("got %s (annotations %v), want the BOOKMARK that ends the initial events", ev, ev.meta.Annotations)
			}
			if rv(t, ev.meta.ResourceVersion) < rv(t, added[1].meta.ResourceVersion) {
				t.Errorf("initial-events-end bookmark at %s, before the last initial event %s", ev.meta.ResourceVersion, added[1].meta.ResourceVersion)
			}
			create[corev1.ConfigMap](t, env, cmPath("wl", ""), configMap("later", nil, nil))
			s.expect(t, "ADDED later")
			deleteCM(t, env, "wl", "later")
			s.expect(t, "DELETED later")
		})
	}

	t.Run("sendInitialEvents=false starts from now", func(t *testing.T) {
		s := watch(t, env, cmPath("wl", "")+"?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
		create[corev1.ConfigMap](t, env, cmPath("wl", ""), configMap("later", nil, nil))
		s.expect(t, "ADDED later")
	})
}

// TestWatchCacheServesWhatWasWritten checks that the watch cache, which
// takes the objects this server writes as the writer had them, serves
// exactly what a client was answered and what etcd holds: every event
// carries the write's answer byte for byte, and a list from the cache is
// byte for byte the consistent list from etcd. A value written into etcd
// by another writer (here, not in encoding/json's compact form and with a
// field no Pod has) is served as the decoded object.
func TestWatchCacheServesWhatWasWritten(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "wc")
	podsPath := podPath("wc", "")
	from := get[corev1.PodList](t, env, podsPath).ResourceVersion
	s := watch(t, env, podsPath+"?watch=true&resourceVersion="+from)

	answers := []json.RawMessage{
		do(t, env, http.MethodPost, podsPath, jsonType, pod("a", "", map[string]string{"app": "web"})).want(t, http.StatusCreated).body,
		do(t, env, http.MethodPost, podsPath, jsonType, pod("b", "", nil)).want(t, http.StatusCreated).body,
		do(t, env, http.MethodPatch, podPath("wc", "a"), mergePatch, `{"metadata":{"labels":{"tier":"front"}}}`).want(t, http.StatusOK).body,
		do(t, env, http.MethodPatch, podPath("wc", "b")+"/status", mergePatch, `{"status":{"phase":"Running"}}`).want(t, http.StatusOK).body,
	}
	foreign := `{ "apiVersion": "v1", "kind": "Pod", "notAPodField": 1,
		"metadata": {"name": "c", "namespace": "wc", "uid": "4a8e8e0c-0000-4000-8000-000000000001"},
		"spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]} }`
	if _, err := env.Store.Create(context.Background(), "/registry/core/pods/wc/c", []byte(foreign)); err != nil {
		t.Fatal(err)
	}
	deleted := do(t, env, http.MethodDelete, podPath("wc", "a"), "", nil).want(t, http.StatusOK).body

	evs := s.expect(t, "ADDED a", "ADDED b", "MODIFIED a", "MODIFIED b", "ADDED c", "DELETED a")
	for i, answer := range answers {
		if !bytes.Equal(evs[i].Object, answer) {
			t.Errorf("%s: object\n%s\nwant the write's answer\n%s", evs[i], evs[i].Object, answer)
		}
	}
	var c corev1.Pod
	if err := json.Unmarshal(evs[4].Object, &c); err != nil {
		t.Fatal(err)
	}
	if want, _ := json.Marshal(&c); !bytes.Equal(evs[4].Object, want) || bytes.Contains(want, []byte("notAPodField")) {
		t.Errorf("%s: object %s, want the decoded Pod's JSON", evs[4], evs[4].Object)
	}
	// The deletion's answer is the pod's last state; the event is that
	// state at the deletion's revision.
	var last, gone corev1.Pod
	if err := json.Unmarshal(deleted, &last); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(evs[5].Object, &gone); err != nil {
		t.Fatal(err)
	}
	last.ResourceVersion = gone.ResourceVersion
	if !reflect.DeepEqual(&last, &gone) || rv(t, gone.ResourceVersion) <= rv(t, evs[4].meta.ResourceVersion) {
		t.Errorf("%s: object %s, want the last state at the deletion's revision", evs[5], evs[5].Object)
	}

	type list struct {
		Items []json.RawMessage `json:"items"`
	}
	var consistent, cached list
	do(t, env, http.MethodGet, podsPath, "", nil).want(t, http.StatusOK).into(t, &consistent)
	do(t, env, http.MethodGet, podsPath+"?"+query("resourceVersion", evs[5].meta.ResourceVersion, "resourceVersionMatch", "NotOlderThan"), "", nil).
		want(t, http.StatusOK).into(t, &cached)
	if len(consistent.Items) != 2 || !reflect.DeepEqual(consistent.Items, cached.Items) {
		t.Errorf("list from the watch cache\n%s\nwant the list from etcd\n%s", cached.Items, consistent.Items)
	}
}

// TestWatchListOptionsAreChecked sends the combinations of
// sendInitialEvents and resourceVersionMatch that Kubernetes refuses, each
// with kube-apiserver's 422 and message, on a watch and on a list.
func TestWatchListOptionsAreChecked(t *testing.T) {
	env := testenv.Start(t)
	const invalid = `ListOptions.meta.k8s.io "" is invalid: `
	for _, tc := range []struct{ name, q, message string }{
		{"watch: sendInitialEvents without resourceVersionMatch", "watch=true&sendInitialEvents=true",
			invalid + "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"},
		{"watch: sendInitialEvents=false without resourceVersionMatch", "watch=true&sendInitialEvents=false&resourceVersion=1",
			invalid + "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"},
		{"watch: resourceVersionMatch without sendInitialEvents", "watch=true&resourceVersionMatch=NotOlderThan&resourceVersion=1",
			invalid + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"},
		{"watch: sendInitialEvents with Exact", "watch=true&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=1",
			invalid + `[resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan"]`},
		{"watch: resourceVersionMatch with continue", "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&continue=x",
			invalid + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"},
		{"list: sendInitialEvents", "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=1",
			invalid + "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"},
		{"list: resourceVersionMatch with continue", "resourceVersionMatch=NotOlderThan&resourceVersion=0&continue=x",
			invalid + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := do(t, env, http.MethodGet, cmPath("default", "")+"?"+tc.q, "", nil).
				wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
			if st.Message != tc.message {
				t.Errorf("message\n%s\nwant\n%s", st.Message, tc.message)
			}
			if st.Details == nil || st.Details.Group != metav1.GroupName || st.Details.Kind != "ListOptions" || len(st.Details.Causes) == 0 {
				t.Errorf("details %+v, want meta.k8s.io ListOptions with causes", st.Details)
			}
		})
	}
}
