package apiserver_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/etcdtest"
	"github.com/minictl/minictl/internal/testenv"
)

// These tests run the API server on an etcd they pause, kill, restart and
// wipe (package etcdtest), with a short request timeout.

const (
	outageRequestTimeout = 2 * time.Second
	// readyzNotices is how soon /readyz must fail after etcd stops
	// answering.
	readyzNotices = 5 * time.Second
	// failFastNotices is how soon after etcd stops requests fail at once:
	// once it has answered no probe for five seconds, plus a probe's
	// timeout and interval.
	failFastNotices = 10 * time.Second
	// recovers bounds how long the server may take to serve again after
	// etcd is back.
	recovers = 20 * time.Second
)

func startOnEtcd(t *testing.T) (*etcdtest.Etcd, *testenv.Env) {
	t.Helper()
	e := etcdtest.Start(t)
	env := testenv.StartWith(t, testenv.Options{Etcd: e.URL, Server: apiserver.Config{RequestTimeout: outageRequestTimeout}})
	return e, env
}

// timed sends one request and says how long the answer took.
func timed(t *testing.T, env *testenv.Env, method, path string, body any) (*reply, time.Duration) {
	t.Helper()
	start := time.Now()
	r := do(t, env, method, path, jsonType, body)
	return r, time.Since(start)
}

// waitReadyz polls /readyz until it answers want, within d; it returns the
// last answer.
func waitReadyz(t *testing.T, env *testenv.Env, want int, d time.Duration) *reply {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		r := do(t, env, http.MethodGet, "/readyz", "", nil)
		if r.code == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after %s, want %d: %s", r.code, d, want, r.body)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
}

// resumingWatch is a client that watches from a resourceVersion and, when
// the server ends its stream, watches again from the last resourceVersion
// it saw, as a reflector does.
type resumingWatch struct {
	env    *testenv.Env
	path   string // without resourceVersion
	s      *stream
	lastRV string
}

func newResumingWatch(t *testing.T, env *testenv.Env, path, rv string) *resumingWatch {
	t.Helper()
	w := &resumingWatch{env: env, path: path, lastRV: rv}
	w.s = watch(t, env, w.path+"&resourceVersion="+rv)
	return w
}

// next returns the next event that is not a bookmark; an ERROR event is
// returned as it is.
func (w *resumingWatch) next(t *testing.T) event {
	t.Helper()
	timeout := time.After(recovers)
	for {
		select {
		case ev, ok := <-w.s.events:
			if !ok {
				w.s = watch(t, w.env, w.path+"&resourceVersion="+w.lastRV)
				continue
			}
			if ev.Type != "ERROR" {
				w.lastRV = ev.meta.ResourceVersion
			}
			if ev.Type != "BOOKMARK" {
				return ev
			}
		case <-timeout:
			t.Fatalf("no watch event within %s", recovers)
		}
	}
}

// TestEtcdOutage pauses etcd under the API server, then kills it and
// starts it again on its data. While etcd does not answer, /readyz,
// /livez and /healthz fail within seconds, with kube-apiserver's text; a
// request ends with 504 Timeout at the request timeout, or at once with
// 503 ServiceUnavailable once etcd has answered nothing for 5 s; the
// watch cache still serves resourceVersion=0. When etcd is back,
// everything recovers without a restart, and a watcher that resumes from
// its last resourceVersion misses nothing and sees nothing twice.
func TestEtcdOutage(t *testing.T) {
	e, env := startOnEtcd(t)
	createNamespace(t, env, "outage")
	first := create[corev1.ConfigMap](t, env, cmPath("outage", ""), configMap("first", nil, nil))
	w := newResumingWatch(t, env, cmPath("outage", "")+"?watch=true", first.ResourceVersion)
	create[corev1.ConfigMap](t, env, cmPath("outage", ""), configMap("a", nil, nil))
	if ev := w.next(t); ev.Type != "ADDED" || ev.meta.Name != "a" {
		t.Fatalf("watch before the outage: got %s, want ADDED a", ev)
	}

	e.Pause()
	paused := time.Now()
	// Sent before the server can know: it waits for etcd until the
	// request timeout, and no longer.
	r, took := timed(t, env, http.MethodPost, cmPath("outage", ""), configMap("during", nil, nil))
	if took > outageRequestTimeout+time.Second {
		t.Errorf("create while etcd is paused took %s, more than the %s request timeout", took, outageRequestTimeout)
	}
	if st := r.wantStatus(t, http.StatusGatewayTimeout, metav1.StatusReasonTimeout); !strings.Contains(st.Message, "request did not complete within requested timeout") {
		t.Errorf("504 message %q", st.Message)
	}

	r = waitReadyz(t, env, http.StatusInternalServerError, readyzNotices-time.Since(paused))
	if body := string(r.body); !strings.Contains(body, "[-]etcd failed: reason withheld\n") || !strings.HasSuffix(body, "readyz check failed\n") || !strings.Contains(body, "[+]ping ok\n") {
		t.Errorf("/readyz while etcd is paused:\n%s", body)
	}
	for _, path := range []string{"/livez", "/healthz"} {
		if r := do(t, env, http.MethodGet, path, "", nil); r.code != http.StatusInternalServerError || !strings.Contains(string(r.body), "[-]etcd failed") {
			t.Errorf("%s while etcd is paused: %d %s", path, r.code, r.body)
		}
	}
	if r := do(t, env, http.MethodGet, "/readyz/etcd", "", nil); r.code != http.StatusInternalServerError {
		t.Errorf("/readyz/etcd while etcd is paused: %d %s", r.code, r.body)
	}
	// Once etcd has answered nothing for five seconds, the server stops
	// waiting for it: requests that need etcd fail at once.
	for deadline := paused.Add(failFastNotices); ; {
		r, took := timed(t, env, http.MethodGet, cmPath("outage", "first"), nil)
		if r.code == http.StatusServiceUnavailable && took < time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests still wait for etcd %s after it stopped: %d after %s", time.Since(paused), r.code, took)
		}
	}
	for _, req := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, cmPath("outage", "first"), nil},
		{http.MethodGet, cmPath("outage", ""), nil},
		{http.MethodPost, cmPath("outage", ""), configMap("refused", nil, nil)},
	} {
		r, took := timed(t, env, req.method, req.path, req.body)
		r.wantStatus(t, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable)
		if took > time.Second {
			t.Errorf("%s %s while etcd is known unavailable took %s, want an answer at once", req.method, req.path, took)
		}
	}
	// The watch cache serves what it has, as kube-apiserver's does.
	cached := get[corev1.ConfigMapList](t, env, cmPath("outage", "")+"?resourceVersion=0")
	if got := cmNames(cached); !slices.Equal(got, []string{"a", "first"}) {
		t.Errorf("list at resourceVersion=0 while etcd is paused: %v", got)
	}

	e.Kill()
	e.Restart()
	e.Resume()
	waitReadyz(t, env, http.StatusOK, recovers)
	healthy(t, env)
	after := create[corev1.ConfigMap](t, env, cmPath("outage", ""), configMap("after", nil, nil))

	// "during" timed out: it may or may not have been written (504 says
	// so); the watcher sees it if and only if it was, then "after".
	duringWritten := do(t, env, http.MethodGet, cmPath("outage", "during"), "", nil).code == http.StatusOK
	want := []string{"ADDED after"}
	if duringWritten {
		want = []string{"ADDED during", "ADDED after"}
	}
	var got []string
	last := rv(t, w.lastRV)
	for len(got) < len(want) {
		ev := w.next(t)
		got = append(got, ev.Type+" "+ev.meta.Name)
		if ev.Type == "ERROR" {
			t.Fatalf("watch after the outage: ERROR %s; got %v, want %v", ev.Object, got, want)
		}
		if r := rv(t, ev.meta.ResourceVersion); r <= last {
			t.Fatalf("watch after the outage: %s is not after resourceVersion %d", ev, last)
		} else {
			last = r
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("watch across the outage got %v, want %v", got, want)
	}
	if last != rv(t, after.ResourceVersion) {
		t.Errorf("watch ended at resourceVersion %d, want %s", last, after.ResourceVersion)
	}
}

// TestEtcdWiped wipes etcd under the API server, as an etcd that lost its
// disk and started empty. The server notices: its watchers end with 410
// Gone before any event of the new history, a watch resuming from a
// resourceVersion of the lost history gets 410 too, a list at
// resourceVersion=0 serves the new truth, the built-in namespaces come
// back, and a new object reaches watchers.
func TestEtcdWiped(t *testing.T) {
	e, env := startOnEtcd(t)
	var last *corev1.ConfigMap
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		last = create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap(name, nil, nil))
	}
	open := watch(t, env, cmPath("default", "")+"?watch=true&resourceVersion="+last.ResourceVersion)
	lost := create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("lost", nil, nil))
	open.expect(t, "ADDED lost")

	e.Wipe()
	ev := open.nextNonBookmark(t)
	if ev.Type != "ERROR" {
		t.Fatalf("open watch across the wipe: got %s, want an ERROR with 410 Gone first", ev)
	}
	if st := ev.status(t); st.Code != http.StatusGone {
		t.Errorf("open watch across the wipe: ERROR %+v, want code 410", st)
	}
	open.ended(t, waitTimeout)

	waitReadyz(t, env, http.StatusOK, recovers)
	eventually(t, "the cache's list at resourceVersion=0 shows the wiped etcd", func() (bool, string) {
		l := get[corev1.ConfigMapList](t, env, cmPath("default", "")+"?resourceVersion=0")
		return len(l.Items) == 0, strings.Join(cmNames(l), ",")
	})
	eventually(t, "the built-in namespaces are back", func() (bool, string) {
		l := get[corev1.NamespaceList](t, env, "/api/v1/namespaces")
		got := names(l.Items, func(n *corev1.Namespace) string { return n.Name })
		return len(got) == 4, strings.Join(got, ",")
	})

	// A client that comes back with a resourceVersion of the lost history
	// is told to list again.
	resumed := watch(t, env, cmPath("default", "")+"?watch=true&resourceVersion="+lost.ResourceVersion)
	if ev := resumed.nextNonBookmark(t); ev.Type != "ERROR" || ev.status(t).Code != http.StatusGone {
		t.Fatalf("watch from resourceVersion %s of the lost history: got %s, want ERROR 410", lost.ResourceVersion, ev)
	}

	// It lists, watches from the list, and a new object reaches it.
	list := get[corev1.ConfigMapList](t, env, cmPath("default", ""))
	if len(list.Items) != 0 {
		t.Errorf("list after the wipe: %v", cmNames(list))
	}
	relisted := watch(t, env, cmPath("default", "")+"?watch=true&resourceVersion="+list.ResourceVersion)
	fresh := watch(t, env, cmPath("default", "")+"?watch=true")
	created := create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("new", nil, nil))
	relisted.expect(t, "ADDED new")
	fresh.expect(t, "ADDED new")
	if rv(t, created.ResourceVersion) >= rv(t, lost.ResourceVersion) {
		t.Errorf("new object's resourceVersion %s is not below the lost history's %s: was etcd wiped?", created.ResourceVersion, lost.ResourceVersion)
	}
}
