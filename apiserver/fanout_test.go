package apiserver_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
)

// TestWatchFanOut: many HTTP watchers cost etcd one watch. Every watcher
// gets every event, in order.
func TestWatchFanOut(t *testing.T) {
	const watchers, pods = 200, 50
	env := testenv.Start(t)
	createNamespace(t, env, "fan")
	from := get[corev1.PodList](t, env, podPath("fan", "")).ResourceVersion

	streams := make([]*stream, watchers)
	for i := range streams {
		streams[i] = watch(t, env, podPath("fan", "")+"?watch=true&resourceVersion="+from)
	}
	// Every watch is registered once its response has started.
	if got := metric(t, env, `apiserver_registered_watchers{resource="pods"}`); got != watchers {
		t.Errorf("apiserver_registered_watchers{pods} = %v, want %d", got, watchers)
	}

	want := make([]string, pods)
	for i := range want {
		want[i] = fmt.Sprintf("ADDED pod-%02d", i)
		create[corev1.Pod](t, env, podPath("fan", ""), pod(fmt.Sprintf("pod-%02d", i), "", nil))
	}

	var wg sync.WaitGroup
	errs := make(chan error, watchers)
	for i, s := range streams {
		wg.Go(func() {
			var last int64
			for j, w := range want {
				select {
				case ev, ok := <-s.events:
					if !ok {
						errs <- fmt.Errorf("watcher %d: stream ended after %d events: %v", i, j, s.err)
						return
					}
					if got := ev.Type + " " + ev.meta.Name; got != w {
						errs <- fmt.Errorf("watcher %d: event %d is %s, want %s", i, j, got, w)
						return
					}
					r, err := strconv.ParseInt(ev.meta.ResourceVersion, 10, 64)
					if err != nil || r <= last {
						errs <- fmt.Errorf("watcher %d: event %d at %q, not after %d", i, j, ev.meta.ResourceVersion, last)
						return
					}
					last = r
				case <-time.After(waitTimeout):
					errs <- fmt.Errorf("watcher %d: no event %d (%s) within %v", i, j, w, waitTimeout)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	if got := metric(t, env, `minictl_etcd_watches{resource="pods"}`); got != 1 {
		t.Errorf("minictl_etcd_watches{pods} = %v, want 1", got)
	}
	if got := metric(t, env, `apiserver_registered_watchers{resource="pods"}`); got != watchers {
		t.Errorf("apiserver_registered_watchers{pods} = %v, want %d", got, watchers)
	}
	if got := metric(t, env, `apiserver_terminated_watchers_total{resource="pods"}`); got != 0 {
		t.Errorf("apiserver_terminated_watchers_total{pods} = %v, want 0", got)
	}

	// Watchers that go away are unregistered.
	for _, s := range streams[:watchers/2] {
		s.close()
	}
	eventually(t, "closed watchers are unregistered", func() (bool, string) {
		got := metric(t, env, `apiserver_registered_watchers{resource="pods"}`)
		return got == watchers/2, fmt.Sprint(got)
	})
}

// TestStalledWatcher: a watcher that stops reading is cut off once its
// buffer is full; it delays neither the cache nor the other watchers.
func TestStalledWatcher(t *testing.T) {
	const minEvents, maxEvents, batch = 500, 3000, 50
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{WatcherBuffer: 10}})
	from := listRV(t, env, "default")
	path := cmPath("default", "") + "?watch=true&resourceVersion=" + from

	// The stalled watcher: a raw connection that sends a request and then
	// reads nothing until the end.
	conn, err := net.Dial("tcp", strings.TrimPrefix(env.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, conn.RemoteAddr()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the stalled watcher is registered", func() (bool, string) {
		got := metric(t, env, `apiserver_registered_watchers{resource="configmaps"}`)
		return got == 1, fmt.Sprint(got)
	})

	normal := watch(t, env, path)
	// 20 KiB per event: the socket buffers of a connection whose reader
	// never reads stop growing at a few MiB (about 200 events here), and
	// then the watcher's buffer of 10 fills. Write in batches until the
	// server has cut the stalled watcher off, whatever this machine's
	// buffer sizes, then one batch more.
	data := map[string]string{"blob": strings.Repeat("x", 20<<10)}
	events := 0
	terminated := func() bool { return metric(t, env, `apiserver_terminated_watchers_total{resource="configmaps"}`) > 0 }
	for done := false; !done; {
		if events >= maxEvents {
			t.Fatalf("the stalled watcher was not cut off after %d events of 20 KiB", events)
		}
		done = events >= minEvents && terminated()
		for range batch {
			create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap(fmt.Sprintf("cm-%04d", events), nil, data))
			events++
		}
	}

	// The normal watcher gets every event, in order.
	var last int64
	for i := range events {
		ev := normal.nextNonBookmark(t)
		if want := fmt.Sprintf("cm-%04d", i); ev.Type != "ADDED" || ev.meta.Name != want {
			t.Fatalf("normal watcher: event %d is %s, want ADDED %s", i, ev, want)
		}
		r := rv(t, ev.meta.ResourceVersion)
		if r <= last {
			t.Fatalf("normal watcher: event %d at %d, not after %d", i, r, last)
		}
		last = r
	}

	// The stalled one was cut off, and only it.
	if got := metric(t, env, `apiserver_terminated_watchers_total{resource="configmaps"}`); got != 1 {
		t.Errorf("apiserver_terminated_watchers_total{configmaps} = %v, want 1", got)
	}
	if got := metric(t, env, `apiserver_registered_watchers{resource="configmaps"}`); got != 1 {
		t.Errorf("apiserver_registered_watchers{configmaps} = %v, want 1 (the normal watcher)", got)
	}

	// Its stream ends: reading it now gives the events that were
	// already on their way, then the end of the response, well short of
	// all of them. The end is clean when the handler finished its last
	// writes, or a cut connection (unexpected EOF) when a write to the
	// reader that never read passed its deadline; a read that times out
	// means the server never ended it.
	if err := conn.SetReadDeadline(time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("stalled watcher: read response: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stalled watcher: HTTP %d", resp.StatusCode)
	}
	dec := json.NewDecoder(resp.Body)
	got := 0
	for {
		var ev struct{ Type string }
		err := dec.Decode(&ev)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			t.Fatalf("stalled watcher: after %d events: %v (the server did not end the stream)", got, err)
		}
		if ev.Type == "ADDED" {
			got++
		}
	}
	if got >= events {
		t.Errorf("stalled watcher received all %d events; it should have been cut off", got)
	}
	t.Logf("the stalled watcher got %d of %d events before it was cut off", got, events)
	healthy(t, env)
}

// TestNodeWatchersOverHTTP: each kubelet's watch of its own pods
// (fieldSelector=spec.nodeName=<node>) sees a pod when a binding puts it
// on its node and when it is deleted, and nothing of the other nodes'
// pods; the scheduler's watch of unbound pods (spec.nodeName=) sees a pod
// arrive when it is created and leave when it is bound.
func TestNodeWatchersOverHTTP(t *testing.T) {
	const nodes, busy, pods = 50, 10, 20
	env := testenv.Start(t)
	from := get[corev1.PodList](t, env, podPath("default", "")).ResourceVersion
	watchPods := func(selector string) *stream {
		return watch(t, env, "/api/v1/pods?watch=true&resourceVersion="+from+"&fieldSelector="+url.QueryEscape(selector))
	}
	kubelets := make([]*stream, nodes)
	for i := range kubelets {
		kubelets[i] = watchPods(fmt.Sprintf("spec.nodeName=node-%02d", i))
	}
	unbound := watchPods("spec.nodeName=")

	binding := func(node string) *corev1.Binding {
		return &corev1.Binding{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Binding"},
			Target:   corev1.ObjectReference{Kind: "Node", Name: node},
		}
	}
	var unboundWant []string
	for i := range pods {
		name := fmt.Sprintf("p-%02d", i)
		create[corev1.Pod](t, env, podPath("default", ""), pod(name, "", nil))
		do(t, env, http.MethodPost, podPath("default", name)+"/binding", jsonType, binding(fmt.Sprintf("node-%02d", i%busy))).want(t, http.StatusCreated)
		unboundWant = append(unboundWant, "ADDED "+name, "DELETED "+name)
	}
	for i := range pods {
		do(t, env, http.MethodDelete, podPath("default", fmt.Sprintf("p-%02d", i))+"?gracePeriodSeconds=0", "", nil).want(t, http.StatusOK)
	}
	// A last pod on every node: a node's watcher must see it next, so
	// nothing else came before.
	for i := range nodes {
		create[corev1.Pod](t, env, podPath("default", ""), pod(fmt.Sprintf("last-%02d", i), fmt.Sprintf("node-%02d", i), nil))
	}

	unbound.expect(t, unboundWant...)
	for i, s := range kubelets {
		var want []string
		if i < busy {
			for j := i; j < pods; j += busy {
				want = append(want, fmt.Sprintf("ADDED p-%02d", j))
			}
			for j := i; j < pods; j += busy {
				want = append(want, fmt.Sprintf("DELETED p-%02d", j))
			}
		}
		want = append(want, fmt.Sprintf("ADDED last-%02d", i))
		s.expect(t, want...)
	}
}
