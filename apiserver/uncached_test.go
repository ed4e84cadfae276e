package apiserver_test

import (
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
	"github.com/minictl/minictl/store"
)

// kubeEvent is an Event about the pod named about, in ns.
func kubeEvent(ns, name, about string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: about},
		Reason:         "Scheduled", Message: "assigned " + about, Type: corev1.EventTypeNormal, Count: 1,
		Source: corev1.EventSource{Component: "default-scheduler"},
	}
}

func eventPath(ns, name string) string {
	p := "/api/v1/namespaces/" + ns + "/events"
	if name != "" {
		p += "/" + name
	}
	return p
}

// etcdWatches is how many etcd watches the server holds for events.
func etcdWatches(t testing.TB, env *testenv.Env) float64 {
	return metric(t, env, `minictl_etcd_watches{resource="events"}`)
}

// Events are served as kube-apiserver serves them, without a watch cache:
// every read goes to etcd and each watch is its own etcd watch. What a
// client sees is what the watch cache gives it.
func TestEventsWithoutWatchCache(t *testing.T) {
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{BookmarkInterval: 200 * time.Millisecond}})
	createNamespace(t, env, "ev")
	if n := etcdWatches(t, env); n != 0 {
		t.Fatalf("%v etcd watches of events with no watcher, want 0: the server keeps no cache of them", n)
	}
	from := get[corev1.EventList](t, env, eventPath("ev", "")).ResourceVersion
	all := watch(t, env, eventPath("ev", "")+"?watch=true&resourceVersion="+from)
	one := watch(t, env, eventPath("ev", "")+"?watch=true&fieldSelector=involvedObject.name%3Da&resourceVersion="+from)
	eventually(t, "an etcd watch per watcher", func() (bool, string) {
		n := etcdWatches(t, env)
		return n == 2, strconv.FormatFloat(n, 'f', -1, 64)
	})

	a := create[corev1.Event](t, env, eventPath("ev", ""), kubeEvent("ev", "a.1", "a"))
	b := create[corev1.Event](t, env, eventPath("ev", ""), kubeEvent("ev", "b.1", "b"))
	a2 := patch[corev1.Event](t, env, eventPath("ev", "a.1"), mergePatch, `{"count":2}`)
	do(t, env, http.MethodDelete, eventPath("ev", "b.1"), "", nil).want(t, http.StatusOK)
	create[corev1.Event](t, env, eventPath("default", ""), kubeEvent("default", "a.1", "a")) // another namespace

	evs := all.expect(t, "ADDED a.1", "ADDED b.1", "MODIFIED a.1", "DELETED b.1")
	for i, want := range []string{a.ResourceVersion, b.ResourceVersion, a2.ResourceVersion} {
		if evs[i].meta.ResourceVersion != want {
			t.Errorf("%s: resourceVersion %s, want %s, the write's", evs[i], evs[i].meta.ResourceVersion, want)
		}
	}
	if rv(t, evs[3].meta.ResourceVersion) <= rv(t, a2.ResourceVersion) {
		t.Errorf("DELETED at %s, not at the deletion's revision", evs[3].meta.ResourceVersion)
	}
	one.expect(t, "ADDED a.1", "MODIFIED a.1")

	t.Run("get and list read etcd", func(t *testing.T) {
		for _, q := range []string{"", "?resourceVersion=0", "?resourceVersion=" + a2.ResourceVersion} {
			if got := get[corev1.Event](t, env, eventPath("ev", "a.1")+q); got.Count != 2 || got.ResourceVersion != a2.ResourceVersion {
				t.Errorf("GET%s: count %d at %s, want 2 at %s", q, got.Count, got.ResourceVersion, a2.ResourceVersion)
			}
		}
		do(t, env, http.MethodGet, eventPath("ev", "a.1")+"?resourceVersion=99999999", "", nil).
			wantStatus(t, http.StatusGatewayTimeout, metav1.StatusReasonTimeout)
		for _, q := range []string{"", "&resourceVersion=0", "&resourceVersion=" + a2.ResourceVersion, "&limit=1"} {
			l := get[corev1.EventList](t, env, "/api/v1/events?fieldSelector=involvedObject.name%3Da"+q)
			if len(l.Items) == 0 || l.Items[0].Namespace != "default" || (q != "&limit=1" && len(l.Items) != 2) {
				t.Errorf("list%s: %d items, want both a.1 (default first)", q, len(l.Items))
			}
			if rv(t, l.ResourceVersion) < rv(t, a2.ResourceVersion) {
				t.Errorf("list%s at %s, older than the last write %s", q, l.ResourceVersion, a2.ResourceVersion)
			}
		}
	})

	t.Run("a watch without resourceVersion starts with what exists", func(t *testing.T) {
		s := watch(t, env, eventPath("ev", "")+"?watch=true")
		s.expect(t, "ADDED a.1")
		create[corev1.Event](t, env, eventPath("ev", ""), kubeEvent("ev", "c.1", "c"))
		s.expect(t, "ADDED c.1")
	})

	t.Run("bookmarks come from etcd's progress", func(t *testing.T) {
		last := revision(t, env)
		s := watch(t, env, eventPath("ev", "")+"?watch=true&allowWatchBookmarks=true&resourceVersion="+a2.ResourceVersion)
		var seen int64
		for {
			ev := s.next(t)
			r := rv(t, ev.meta.ResourceVersion)
			if ev.Type != "BOOKMARK" {
				seen = r
				continue
			}
			if r < last || r < seen {
				t.Errorf("BOOKMARK at %d, before the revision %d of the watch's start or %d of its last event", r, last, seen)
			}
			break
		}
	})

	t.Run("a watch ends with its client, and so does its etcd watch", func(t *testing.T) {
		// all and one remain; the earlier subtests' watches have gone.
		const before = 2
		eventually(t, "the two open watches' etcd watches alone", func() (bool, string) {
			n := etcdWatches(t, env)
			return n == before, strconv.FormatFloat(n, 'f', -1, 64)
		})
		s := watch(t, env, eventPath("ev", "")+"?watch=true&resourceVersion="+a2.ResourceVersion)
		eventually(t, "one more etcd watch", func() (bool, string) {
			n := etcdWatches(t, env)
			return n == before+1, strconv.FormatFloat(n, 'f', -1, 64)
		})
		s.close()
		eventually(t, "its etcd watch gone", func() (bool, string) {
			n := etcdWatches(t, env)
			return n == before, strconv.FormatFloat(n, 'f', -1, 64)
		})
	})

	t.Run("a compacted resourceVersion is 410 Gone", func(t *testing.T) {
		if err := env.Store.Compact(t.Context(), revision(t, env)); err != nil {
			t.Fatalf("compact: %v", err)
		}
		s := watch(t, env, eventPath("ev", "")+"?watch=true&resourceVersion="+a.ResourceVersion)
		ev := s.next(t)
		if ev.Type != "ERROR" || ev.status(t).Code != http.StatusGone {
			t.Fatalf("got %s %s, want an ERROR with 410", ev, ev.Object)
		}
	})

	t.Run("deletecollection", func(t *testing.T) {
		l := call[corev1.EventList](t, env, http.MethodDelete, eventPath("ev", "")+"?fieldSelector=involvedObject.name%3Dc", "", nil, http.StatusOK)
		if len(l.Items) != 1 || l.Items[0].Name != "c.1" {
			t.Errorf("deleted %d events, want c.1 alone", len(l.Items))
		}
		if got := get[corev1.EventList](t, env, eventPath("ev", "")); len(got.Items) != 1 || got.Items[0].Name != "a.1" {
			t.Errorf("left %d events, want a.1 alone", len(got.Items))
		}
	})
}

// --watch-cache-sizes turns the watch cache of events back on, and
// refuses to turn off one the server reads itself.
func TestWatchCacheSizes(t *testing.T) {
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{
		WatchCacheSizes: map[schema.GroupResource]int{{Resource: "events"}: 100},
	}})
	eventually(t, "the events cache's one etcd watch", func() (bool, string) {
		n := etcdWatches(t, env)
		return n == 1, strconv.FormatFloat(n, 'f', -1, 64)
	})
	watch(t, env, eventPath("default", "")+"?watch=true")
	watch(t, env, eventPath("default", "")+"?watch=true")
	create[corev1.Event](t, env, eventPath("default", ""), kubeEvent("default", "a.1", "a"))
	if n := etcdWatches(t, env); n != 1 {
		t.Errorf("%v etcd watches with two watchers of a cached resource, want the cache's 1", n)
	}

	for in, want := range map[string]map[schema.GroupResource]int{
		"events#0":                         {{Resource: "events"}: 0},
		" events#100, deployments.apps#0 ": {{Resource: "events"}: 100, {Group: "apps", Resource: "deployments"}: 0},
		"":                                 {},
	} {
		got, err := apiserver.ParseWatchCacheSizes(in)
		if err != nil || !maps.Equal(got, want) {
			t.Errorf("ParseWatchCacheSizes(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"events", "events#", "#0", "events#many"} {
		if _, err := apiserver.ParseWatchCacheSizes(in); err == nil || !strings.Contains(err.Error(), "resource[.group]#size") {
			t.Errorf("ParseWatchCacheSizes(%q): error %v, want one that shows the form", in, err)
		}
	}

	st, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir(), ClientURL: "http://127.0.0.1:0"})
	if err != nil {
		t.Fatalf("store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	for sizes, want := range map[string]map[schema.GroupResource]int{
		"minictl serves only events without a watch cache": {{Resource: "pods"}: 0},
		"no built-in resource of that name":                {{Resource: "widgets"}: 0},
		"give 0 (no watch cache) or more":                  {{Resource: "events"}: -1},
	} {
		if _, err := apiserver.New(apiserver.Config{Store: st, WatchCacheSizes: want}); err == nil || !strings.Contains(err.Error(), sizes) {
			t.Errorf("sizes %v: error %v, want one that says %q", want, err, sizes)
		}
	}
}

// An Event lives --event-ttl after its last write, then etcd deletes it,
// and its watchers see it go; other objects stay.
func TestEventTTL(t *testing.T) {
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{EventTTL: 2 * time.Second}})
	from := revision(t, env)
	s := watch(t, env, eventPath("default", "")+"?watch=true&resourceVersion="+strconv.FormatInt(from, 10))
	create[corev1.Event](t, env, eventPath("default", ""), kubeEvent("default", "a.1", "a"))
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("stays", nil, nil))
	s.expect(t, "ADDED a.1")
	select {
	case ev, ok := <-s.events:
		if !ok || ev.Type != "DELETED" || ev.meta.Name != "a.1" {
			t.Fatalf("got %v (open %v), want the Event DELETED when its TTL ran out", ev, ok)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the Event is still there 20s after it was written to live 2s")
	}
	do(t, env, http.MethodGet, eventPath("default", "a.1"), "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	get[corev1.ConfigMap](t, env, cmPath("default", "stays"))

	st, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir(), ClientURL: "http://127.0.0.1:0"})
	if err != nil {
		t.Fatalf("store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := apiserver.New(apiserver.Config{Store: st, EventTTL: -time.Second}); err == nil || !strings.Contains(err.Error(), "event TTL") {
		t.Errorf("a negative event TTL: error %v, want one about it", err)
	}
}
