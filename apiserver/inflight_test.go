package apiserver_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
	"github.com/minictl/minictl/store"
)

// heldReads is a real store whose reads of objects named held-* wait
// until the test lets them go: read-only requests that take their time,
// each holding its seat meanwhile.
type heldReads struct {
	*store.Store
	entered chan string   // receives the key of each held read
	release chan struct{} // closed to let them all go
	once    sync.Once
}

func newHeldReads() *heldReads {
	return &heldReads{entered: make(chan string, 100), release: make(chan struct{})}
}

func (h *heldReads) Get(ctx context.Context, key string) (*store.KeyValue, error) {
	if strings.Contains(key, "/held-") {
		h.entered <- key
		select {
		case <-h.release:
		case <-ctx.Done():
		}
	}
	return h.Store.Get(ctx, key)
}

func (h *heldReads) letGo() { h.once.Do(func() { close(h.release) }) }

// startHeld starts a server with the given caps on a heldReads store.
func startHeld(t *testing.T, readOnly, mutating int) (*testenv.Env, *heldReads) {
	t.Helper()
	held := newHeldReads()
	env := testenv.StartWith(t, testenv.Options{
		Server: apiserver.Config{MaxRequestsInflight: readOnly, MaxMutatingRequestsInflight: mutating},
		Storage: func(st *store.Store) apiserver.Storage {
			held.Store = st
			return held
		},
	})
	t.Cleanup(held.letGo) // before the server stops (cleanups run last first)
	return env, held
}

// background sends a request on its own and returns where its answer's
// code arrives (0 if it failed).
func background(t *testing.T, env *testenv.Env, method, path, contentType string, body io.Reader) <-chan int {
	t.Helper()
	done := make(chan int, 1)
	req, err := http.NewRequest(method, env.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	go func() {
		resp, err := env.Client().Do(req)
		if err != nil {
			done <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	return done
}

// doAs sends a request as one of minictl's own components would, under
// the User-Agent that names the user it acts as.
func doAs(t *testing.T, env *testenv.Env, user, method, path, contentType string, body []byte) *reply {
	t.Helper()
	req, err := http.NewRequest(method, env.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", apiserver.SystemUserAgent(user))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := env.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s as %s: %v", method, path, user, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &reply{code: resp.StatusCode, header: resp.Header, body: data}
}

// wantTooMany checks a refusal: 429 at once, Retry-After: 1, and
// kube-apiserver's Status.
func wantTooMany(t *testing.T, r *reply) {
	t.Helper()
	st := r.wantStatus(t, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests)
	if st.Message != "Too many requests, please try again later." {
		t.Errorf("message %q", st.Message)
	}
	if st.Details == nil || st.Details.RetryAfterSeconds != 1 {
		t.Errorf("details %+v, want retryAfterSeconds 1", st.Details)
	}
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
}

func leaseJSON(ns, name string) []byte {
	return []byte(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"` + name +
		`","namespace":"` + ns + `"},"spec":{"holderIdentity":"` + name + `"}}`)
}

// TestReadOnlyCap holds as many reads as --max-requests-inflight allows:
// the next read is refused with a 429 while writes, watches, probes and
// the system's own components go on, and /metrics counts it all.
func TestReadOnlyCap(t *testing.T) {
	env, held := startHeld(t, 2, 5)
	first, second := background(t, env, "GET", cmPath("default", "held-1"), "", nil),
		background(t, env, "GET", cmPath("default", "held-2"), "", nil)
	<-held.entered
	<-held.entered
	if got := metric(t, env, `apiserver_current_inflight_requests{request_kind="readOnly"}`); got != 2 {
		t.Errorf("readOnly requests in flight: %v, want 2", got)
	}
	if got := metric(t, env, `apiserver_flowcontrol_current_inflight_requests{flow_schema="global-default",priority_level="global-default"}`); got != 2 {
		t.Errorf("global-default requests in flight: %v, want 2", got)
	}

	wantTooMany(t, do(t, env, "GET", cmPath("default", "other"), "", nil))
	wantTooMany(t, do(t, env, "GET", cmPath("default", ""), "", nil))
	wantTooMany(t, do(t, env, "GET", "/api", "", nil)) // discovery counts too

	// Not counted: watches, probes and /metrics; nor writes, which have
	// seats of their own.
	w := watch(t, env, cmPath("default", "")+"?watch=true")
	healthy(t, env)
	do(t, env, "GET", "/readyz", "", nil).want(t, http.StatusOK)
	do(t, env, "GET", "/livez", "", nil).want(t, http.StatusOK)
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("written", nil, nil))
	w.expect(t, "ADDED written")

	// The system's own components read on, in their own priority levels.
	doAs(t, env, apiserver.NodeUser("node-1"), "GET", "/api/v1/nodes/node-1", "", nil).want(t, http.StatusNotFound)
	doAs(t, env, apiserver.NodeUser("node-1"), "GET", podPath("default", ""), "", nil).want(t, http.StatusOK)
	doAs(t, env, apiserver.UserKubeControllerManager, "GET", cmPath("default", "written"), "", nil).want(t, http.StatusOK)
	doAs(t, env, apiserver.UserKubeScheduler, "GET", podPath("default", ""), "", nil).want(t, http.StatusOK)

	if got := metric(t, env, `apiserver_dropped_requests_total{request_kind="readOnly"}`); got != 3 {
		t.Errorf("readOnly requests dropped: %v, want 3", got)
	}
	if got := metric(t, env, `apiserver_flowcontrol_rejected_requests_total{flow_schema="global-default",priority_level="global-default",reason="concurrency-limit"}`); got != 3 {
		t.Errorf("global-default rejections: %v, want 3", got)
	}
	if got := metric(t, env, `apiserver_dropped_requests_total{request_kind="mutating"}`); got != 0 {
		t.Errorf("mutating requests dropped: %v, want 0", got)
	}

	held.letGo()
	for _, done := range []<-chan int{first, second} {
		if code := <-done; code != http.StatusNotFound {
			t.Errorf("held read answered %d, want 404", code)
		}
	}
	do(t, env, "GET", cmPath("default", "written"), "", nil).want(t, http.StatusOK)
	if got := metric(t, env, `apiserver_current_inflight_requests{request_kind="readOnly"}`); got != 0 {
		t.Errorf("readOnly requests in flight after: %v, want 0", got)
	}
}

// TestMutatingCap holds as many writes as --max-mutating-requests-inflight
// allows, each an upload the client has not finished: the next write is
// refused with a 429, while reads and the kubelets' heartbeats go on.
func TestMutatingCap(t *testing.T) {
	env, _ := startHeld(t, 5, 1)
	body, upload := io.Pipe()
	done := background(t, env, "POST", cmPath("default", ""), jsonType, body)
	if _, err := upload.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap",`)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the upload holds the mutating seat", func() (bool, string) {
		n := metric(t, env, `apiserver_current_inflight_requests{request_kind="mutating"}`)
		return n == 1, fmt.Sprintf("%v mutating requests in flight", n)
	})

	wantTooMany(t, do(t, env, "POST", cmPath("default", ""), jsonType, configMap("refused", nil, nil)))
	wantTooMany(t, do(t, env, "DELETE", cmPath("default", "any"), "", nil))
	wantTooMany(t, do(t, env, "PATCH", cmPath("default", "any"), mergePatch, `{}`))
	get[corev1.ConfigMapList](t, env, cmPath("default", "")) // reads have seats of their own

	// A kubelet keeps its heartbeat and its node status.
	kubelet := apiserver.NodeUser("node-1")
	doAs(t, env, kubelet, "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", jsonType,
		leaseJSON("kube-node-lease", "node-1")).want(t, http.StatusCreated)
	doAs(t, env, kubelet, "POST", "/api/v1/nodes", jsonType,
		[]byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-1"}}`)).want(t, http.StatusCreated)
	doAs(t, env, kubelet, "PATCH", "/api/v1/nodes/node-1/status", mergePatch,
		[]byte(`{"status":{"capacity":{"pods":"110"}}}`)).want(t, http.StatusOK)
	// The controller manager keeps its leader election, and its writes.
	doAs(t, env, apiserver.UserKubeControllerManager, "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", jsonType,
		leaseJSON("kube-system", "kube-controller-manager")).want(t, http.StatusCreated)
	doAs(t, env, apiserver.UserKubeControllerManager, "DELETE", cmPath("default", "any"), "", nil).want(t, http.StatusNotFound)

	if got := metric(t, env, `apiserver_dropped_requests_total{request_kind="mutating"}`); got != 3 {
		t.Errorf("mutating requests dropped: %v, want 3", got)
	}
	if got := metric(t, env, `apiserver_flowcontrol_dispatched_requests_total{flow_schema="system-node-high",priority_level="node-high"}`); got != 3 {
		t.Errorf("kubelet requests served in node-high: %v, want 3", got)
	}
	for _, series := range []string{
		`apiserver_flowcontrol_rejected_requests_total{flow_schema="system-node-high",priority_level="node-high",reason="concurrency-limit"}`,
		`apiserver_flowcontrol_rejected_requests_total{flow_schema="system-leader-election",priority_level="leader-election",reason="concurrency-limit"}`,
		`apiserver_dropped_requests_total{request_kind="readOnly"}`,
	} {
		if got := metric(t, env, series); got != 0 {
			t.Errorf("%s: %v, want 0", series, got)
		}
	}

	if _, err := upload.Write([]byte(`"metadata":{"name":"uploaded"}}`)); err != nil {
		t.Fatal(err)
	}
	upload.Close()
	if code := <-done; code != http.StatusCreated {
		t.Fatalf("the slow upload answered %d, want 201", code)
	}
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("after", nil, nil))
}

// TestNoInflightLimit: a negative cap is no cap, as 0 is for
// kube-apiserver's flags.
func TestNoInflightLimit(t *testing.T) {
	env, held := startHeld(t, -1, -1)
	for i := range 5 {
		background(t, env, "GET", cmPath("default", fmt.Sprintf("held-%d", i)), "", nil)
		<-held.entered
	}
	do(t, env, "GET", cmPath("default", ""), "", nil).want(t, http.StatusOK)
}
