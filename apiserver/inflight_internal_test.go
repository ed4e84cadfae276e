package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/minictl/minictl/api"
)

// TestClassify puts requests in kube's flow schemas by the user their
// User-Agent names and what they ask for.
func TestClassify(t *testing.T) {
	fc := newFlowControl(api.Resources, flowControlConfig{levels: systemLevels}, newMetrics(prometheus.NewRegistry()))
	cm, sched, kubelet := SystemUserAgent(UserKubeControllerManager), SystemUserAgent(UserKubeScheduler), SystemUserAgent(NodeUser("node-1"))
	for _, tc := range []struct {
		agent, method, path string
		schema              string // "": exempt
		mutating            bool
	}{
		{"curl/8.5.0", "GET", "/healthz", "", false},
		{"curl/8.5.0", "GET", "/readyz?verbose", "", false},
		{"curl/8.5.0", "GET", "/livez", "", false},
		{"curl/8.5.0", "GET", "/metrics", "", false},
		{"curl/8.5.0", "GET", "/debug/pprof/heap", "", false},
		{"curl/8.5.0", "GET", "/api/v1/namespaces/default/pods?watch=true", "", false},
		{"curl/8.5.0", "GET", "/apis/apps/v1/deployments?watch=1", "", false},
		{kubelet, "GET", "/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dnode-1", "", false},
		// A GET of one object with watch=true is a get, not a watch.
		{"curl/8.5.0", "GET", "/api/v1/namespaces/default/pods/web?watch=true", "global-default", false},
		{"curl/8.5.0", "GET", "/api/v1/namespaces/default/pods", "global-default", false},
		{"curl/8.5.0", "GET", "/apis", "global-default", false},
		{"curl/8.5.0", "GET", "/openapi/v2", "global-default", false},
		{"curl/8.5.0", "POST", "/api/v1/namespaces/default/pods", "global-default", true},
		{"curl/8.5.0", "DELETE", "/api/v1/namespaces/default/pods/web", "global-default", true},
		{"kubectl/v1.32.0 (linux/amd64) kubernetes/abc", "PATCH", "/apis/apps/v1/namespaces/default/deployments/web", "global-default", true},
		// What a user claims is a system user only in minictl's form.
		{"minictl (linux/amd64) minictl", "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1", "global-default", true},
		{"minictl/someone", "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1", "global-default", true},
		{kubelet, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1", "system-node-high", true},
		{kubelet, "GET", "/api/v1/nodes/node-1", "system-node-high", false},
		{kubelet, "PATCH", "/api/v1/nodes/node-1/status", "system-node-high", true},
		{kubelet, "PUT", "/api/v1/namespaces/default/pods/web/status", "system-nodes", true},
		{kubelet, "POST", "/api/v1/namespaces/default/events", "system-nodes", true},
		{cm, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager", "system-leader-election", true},
		{cm, "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager", "system-leader-election", false},
		{cm, "POST", "/api/v1/namespaces/default/pods", "kube-controller-manager", true},
		{cm, "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", "kube-controller-manager", false},
		{cm, "PATCH", "/api/v1/nodes/node-1/status", "kube-controller-manager", true},
		{sched, "POST", "/api/v1/namespaces/default/pods/web/binding", "kube-scheduler", true},
		{sched, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler", "system-leader-election", true},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		r.Header.Set("User-Agent", tc.agent)
		fs, mutating := fc.classify(r)
		got := ""
		if fs != nil {
			got = fs.name
		}
		if got != tc.schema || mutating != tc.mutating {
			t.Errorf("%s %s as %q: flow schema %q, mutating %v; want %q, %v", tc.method, tc.path, tc.agent, got, mutating, tc.schema, tc.mutating)
		}
	}
}

// heldHandler holds each request until the test lets one go.
type heldHandler struct {
	started chan struct{} // receives as each request starts
	finish  chan struct{} // each receive lets one request finish
}

func (h *heldHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.started <- struct{}{}
	<-h.finish
	w.WriteHeader(http.StatusOK)
}

// TestSystemLevelQueues: a request of a system level that finds its seats
// taken waits for one, in a queue of bounded length, for a bounded time;
// each refusal is counted with its reason.
func TestSystemLevelQueues(t *testing.T) {
	m := newMetrics(prometheus.NewRegistry())
	levels := map[string]levelConfig{"node-high": {seats: 1, queue: 1}}
	fc := newFlowControl(api.Resources, flowControlConfig{maxReadOnly: 1, maxMutating: 1, levels: levels, queueWait: 200 * time.Millisecond}, m)
	next := &heldHandler{started: make(chan struct{}, 10), finish: make(chan struct{})}
	h := fc.limitInflight(next)
	heartbeat := func(ctx context.Context) <-chan int {
		code := make(chan int, 1)
		r := httptest.NewRequestWithContext(ctx, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1", nil)
		r.Header.Set("User-Agent", SystemUserAgent(NodeUser("node-1")))
		go func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			code <- w.Code
		}()
		return code
	}
	inqueue := m.flowInqueue.WithLabelValues("node-high", "system-node-high")
	rejected := func(reason string) float64 {
		return value(m.flowRejected.WithLabelValues("system-node-high", "node-high", reason))
	}
	waitQueued := func(n float64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for value(inqueue) != n {
			if time.Now().After(deadline) {
				t.Fatalf("requests in queue: %v, want %v", value(inqueue), n)
			}
			time.Sleep(time.Millisecond) // polling interval
		}
	}

	// One runs, one waits, a third finds the queue full.
	first := heartbeat(context.Background())
	<-next.started
	second := heartbeat(context.Background())
	waitQueued(1)
	if code := <-heartbeat(context.Background()); code != http.StatusTooManyRequests || rejected(rejectQueueFull) != 1 {
		t.Fatalf("third heartbeat: %d, queue-full rejections %v; want 429, 1", code, rejected(rejectQueueFull))
	}
	// The one waiting gets the seat when the first gives it back.
	next.finish <- struct{}{}
	<-next.started
	waitQueued(0)
	if code := <-first; code != http.StatusOK {
		t.Fatalf("first heartbeat: %d", code)
	}

	// While the second runs, a third waits out its time, and a fourth
	// gives up when its client goes away.
	if code := <-heartbeat(context.Background()); code != http.StatusTooManyRequests || rejected(rejectTimeOut) != 1 {
		t.Fatalf("heartbeat after the wait: %d, time-out rejections %v; want 429, 1", code, rejected(rejectTimeOut))
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := heartbeat(ctx)
	waitQueued(1)
	cancel()
	if code := <-gone; code != http.StatusTooManyRequests || rejected(rejectCancelled) != 1 {
		t.Fatalf("cancelled heartbeat: %d, cancelled rejections %v; want 429, 1", code, rejected(rejectCancelled))
	}
	next.finish <- struct{}{}
	if code := <-second; code != http.StatusOK {
		t.Fatalf("second heartbeat: %d", code)
	}
	if n := value(m.flowInflight.WithLabelValues("node-high", "system-node-high")); n != 0 {
		t.Errorf("node-high requests in flight at the end: %v", n)
	}
	if n := value(m.dropped.WithLabelValues("mutating")); n != 3 {
		t.Errorf("mutating requests dropped: %v, want 3", n)
	}
}

// value reads a gauge or a counter.
func value(m prometheus.Metric) float64 {
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		panic(err)
	}
	if out.Gauge != nil {
		return out.Gauge.GetValue()
	}
	return out.Counter.GetValue()
}

// BenchmarkLimitInflight is what the bound adds to every request: its
// classification, a seat and the series that count it.
func BenchmarkLimitInflight(b *testing.B) {
	fc := newFlowControl(api.Resources, flowControlConfig{maxReadOnly: 400, maxMutating: 200, levels: systemLevels, queueWait: queueWait},
		newMetrics(prometheus.NewRegistry()))
	h := fc.limitInflight(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest("POST", "/api/v1/namespaces/default/pods?fieldManager=kubectl", nil)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.ServeHTTP(w, r)
		}
	})
}
