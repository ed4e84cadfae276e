package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

// The overload test's shape: floodClients users, arriving over floodRamp
// and then all there for floodTime, against caps of a few seats; each
// kubelet renews its Lease every second (--fast) and must do so at least
// minRenewals times meanwhile. How long apart its renewals are is logged,
// not checked: on a loaded machine, CPU and disk rather than seats decide
// that. The node lifecycle controller judges whether a node is Ready, and
// the system's seats show in /metrics.
const (
	floodClients = 2000
	floodRamp    = 2 * time.Second
	floodTime    = 8 * time.Second
	minRenewals  = 6
)

// TestOverload floods `minictl up --fast` with 2,000 clients against
// in-flight caps of 20 reads and 10 writes: half send their writes a piece
// at a time, holding a seat for seconds, half list. Users beyond the caps
// get 429 with a Retry-After, while the system's own components, in seats
// of their own, are never refused: the kubelets keep renewing their Leases
// and every node stays Ready. Afterwards everything works.
func TestOverload(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast",
		"--max-requests-inflight", "20", "--max-mutating-requests-inflight", "10")
	c.WaitNodesReady(t, c.URL, 3, clusterTimeout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Watches take no seat: they see every heartbeat through the flood.
	hb := watchHeartbeats(ctx, t, c.client(t))
	served := metricValue(t, c.URL, nodeHighServed)

	start := time.Now()
	stats := flood(t, c.URL, floodClients, floodTime)
	end := time.Now()
	t.Logf("flood of %d clients for %s: %s", floodClients, end.Sub(start).Round(time.Millisecond), stats)

	// Users beyond the caps were refused with kube's 429; the others were
	// served. A 5xx or a dropped connection is logged, not failed: on a
	// loaded machine etcd may time out, which is not what this tests.
	for _, code := range []int{http.StatusOK, http.StatusCreated, http.StatusTooManyRequests} {
		if stats.codes[code] == 0 {
			t.Errorf("no request answered %d: %s", code, stats)
		}
	}
	if stats.firstRefusal != "" {
		t.Errorf("a 429 not in kube's form: %s", stats.firstRefusal)
	}
	for code, n := range stats.codes {
		if code >= 400 && code < 500 && code != http.StatusTooManyRequests {
			t.Errorf("%d requests answered %d", n, code)
		}
	}
	if stats.failed > 0 {
		t.Logf("%d requests failed, the first: %s", stats.failed, stats.firstFailure)
	}

	// A renewal of each Lease after the flood closes the record.
	hb.waitRenewedAfter(t, end)
	cancel()
	hb.check(t, start)

	// Afterwards, everything works.
	if code, st := c.do("POST", "/api/v1/namespaces/default/configmaps", "application/json",
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"after-the-flood"}}`); code != http.StatusCreated {
		t.Errorf("create after the flood: %d %v", code, st)
	}
	if ready, err := minitest.ReadyNodes(c.URL); err != nil || ready != 3 {
		t.Errorf("ready nodes after the flood: %d, %v", ready, err)
	}
	// The slow uploads hold the mutating seats for seconds, so writes are
	// always refused; whether lists are depends on how fast the machine
	// answers them from the watch cache (TestReadOnlyCap, in apiserver,
	// holds read seats on purpose).
	for _, series := range []string{
		`apiserver_dropped_requests_total{request_kind="mutating"}`,
		`apiserver_flowcontrol_rejected_requests_total{flow_schema="global-default",priority_level="global-default",reason="concurrency-limit"}`,
	} {
		if metricValue(t, c.URL, series) == 0 {
			t.Errorf("/metrics: %s is 0", series)
		}
	}
	t.Logf("read-only requests refused: %v", metricValue(t, c.URL, `apiserver_dropped_requests_total{request_kind="readOnly"}`))
	// The system's own requests were served in their own seats, and none
	// was refused.
	for line := range strings.SplitSeq(metricsText(t, c.URL), "\n") {
		if strings.HasPrefix(line, "apiserver_flowcontrol_rejected_requests_total{") && !strings.Contains(line, `flow_schema="global-default"`) {
			t.Errorf("a request of the system was refused: %s", line)
		}
	}
	if after := metricValue(t, c.URL, nodeHighServed); after < served+3*minRenewals {
		t.Errorf("kubelet requests served in node-high during the flood: %v, want at least %d", after-served, 3*minRenewals)
	}
}

// nodeHighServed counts the kubelets' heartbeats.
const nodeHighServed = `apiserver_flowcontrol_dispatched_requests_total{flow_schema="system-node-high",priority_level="node-high"}`

// metricValue reads one series from /metrics; a missing one is 0.
func metricValue(t *testing.T, server, series string) float64 {
	t.Helper()
	for line := range strings.SplitSeq(metricsText(t, server), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// floodStats counts how the flood's requests were answered.
type floodStats struct {
	mu           sync.Mutex
	codes        map[int]int
	failed       int
	firstFailure string
	firstRefusal string // a 429 not in kube's form: Retry-After: 1 and a TooManyRequests Status
}

func (s *floodStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("answers by code %v, %d failed", s.codes, s.failed)
}

func (s *floodStats) answered(resp *http.Response, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.failed++; s.failed == 1 {
			s.firstFailure = err.Error()
		}
		return
	}
	s.codes[resp.StatusCode]++
	if resp.StatusCode != http.StatusTooManyRequests || s.firstRefusal != "" {
		return
	}
	var st metav1.Status
	body, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(body, &st) != nil || st.Reason != metav1.StatusReasonTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		s.firstRefusal = fmt.Sprintf("Retry-After %q, body %s", resp.Header.Get("Retry-After"), body)
	}
}

// flood runs n clients, which arrive over floodRamp, for d, each on its
// own connection, and waits for them. Each honours Retry-After, as
// client-go does, and sends its next request at once otherwise. Even
// clients write a ConfigMap, sending the second half of its body two
// seconds after the first; odd ones list ConfigMaps from the watch cache.
func flood(t *testing.T, server string, n int, d time.Duration) *floodStats {
	t.Helper()
	transport := &http.Transport{MaxIdleConnsPerHost: n, MaxIdleConns: n}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	stats := &floodStats{codes: map[int]int{}}
	url := server + "/api/v1/namespaces/default/configmaps"
	deadline := time.Now().Add(floodRamp + d)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			time.Sleep(floodRamp * time.Duration(i) / time.Duration(n)) // they arrive over floodRamp
			for j := 0; time.Now().Before(deadline); j++ {
				req, _ := http.NewRequest("GET", url+"?resourceVersion=0", nil)
				if i%2 == 0 {
					body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"flood-` + strconv.Itoa(i) + "-" + strconv.Itoa(j) + `"}}`
					req, _ = http.NewRequest("POST", url, newSlowBody(body, 2*time.Second))
					req.Header.Set("Content-Type", "application/json")
				}
				resp, err := hc.Do(req)
				stats.answered(resp, err)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
					time.Sleep(time.Duration(s) * time.Second) // as client-go does
				}
			}
		})
	}
	wg.Wait()
	return stats
}

// slowBody is a request body that sends its first half at once and the
// rest after a pause: a slow client.
type slowBody struct {
	first, rest []byte
	pause       time.Duration
}

func newSlowBody(body string, pause time.Duration) *slowBody {
	half := len(body) / 2
	return &slowBody{first: []byte(body[:half]), rest: []byte(body[half:]), pause: pause}
}

func (b *slowBody) Read(p []byte) (int, error) {
	if len(b.first) > 0 {
		n := copy(p, b.first)
		b.first = b.first[n:]
		return n, nil
	}
	if len(b.rest) == 0 {
		return 0, io.EOF
	}
	if b.pause > 0 {
		time.Sleep(b.pause) // the client is slow: that is the point
		b.pause = 0
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

// heartbeats records, from watches, every node Lease renewal and every
// node that is not Ready.
type heartbeats struct {
	mu       sync.Mutex
	renewals map[string][]time.Time // by node, in order
	notReady []string
	done     sync.WaitGroup
}

// watchHeartbeats lists the node Leases and the nodes, then watches both
// until ctx ends.
func watchHeartbeats(ctx context.Context, t *testing.T, rc *client.RESTClient) *heartbeats {
	t.Helper()
	hb := &heartbeats{renewals: map[string][]time.Time{}}
	leases := client.For[*coordinationv1.Lease](rc)
	ll, err := leases.List(ctx, "kube-node-lease", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ll.Items {
		hb.renewed(l)
	}
	lw, err := leases.Watch(ctx, "kube-node-lease", metav1.ListOptions{ResourceVersion: ll.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	nodes := client.For[*corev1.Node](rc)
	nl, err := nodes.List(ctx, "", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nw, err := nodes.Watch(ctx, "", metav1.ListOptions{ResourceVersion: nl.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	hb.done.Add(2)
	go func() {
		defer hb.done.Done()
		for ev := range lw.Events() {
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				hb.renewed(ev.Object)
			}
		}
	}()
	go func() {
		defer hb.done.Done()
		for ev := range nw.Events() {
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				hb.node(ev.Object)
			}
		}
	}()
	return hb
}

func (hb *heartbeats) renewed(l *coordinationv1.Lease) {
	if l.Spec.RenewTime == nil {
		return
	}
	hb.mu.Lock()
	defer hb.mu.Unlock()
	r := hb.renewals[l.Name]
	if at := l.Spec.RenewTime.Time; len(r) == 0 || at.After(r[len(r)-1]) {
		hb.renewals[l.Name] = append(r, at)
	}
}

func (hb *heartbeats) node(n *corev1.Node) {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
			hb.mu.Lock()
			hb.notReady = append(hb.notReady, fmt.Sprintf("%s %s (%s) at rv %s", n.Name, cond.Status, cond.Reason, n.ResourceVersion))
			hb.mu.Unlock()
		}
	}
}

// waitRenewedAfter waits until every node's Lease has been renewed after
// at.
func (hb *heartbeats) waitRenewedAfter(t *testing.T, at time.Time) {
	t.Helper()
	eventually(t, "every Lease renewed after the flood", func() (bool, string) {
		hb.mu.Lock()
		defer hb.mu.Unlock()
		renewed := 0
		for _, times := range hb.renewals {
			if times[len(times)-1].After(at) {
				renewed++
			}
		}
		return renewed == 3, fmt.Sprintf("%d of %d Leases", renewed, len(hb.renewals))
	})
}

// check waits for the watches to end (ctx cancelled) and fails the test if
// a node was not Ready at any time, or if some node's Lease was renewed
// fewer than minRenewals times from start on.
func (hb *heartbeats) check(t *testing.T, start time.Time) {
	t.Helper()
	hb.done.Wait()
	hb.mu.Lock()
	defer hb.mu.Unlock()
	for _, nr := range hb.notReady {
		t.Errorf("node not Ready during the flood: %s", nr)
	}
	if len(hb.renewals) != 3 {
		t.Fatalf("Leases of %d nodes seen, want 3", len(hb.renewals))
	}
	for node, times := range hb.renewals {
		var last time.Time
		var during int
		var longest time.Duration
		for _, at := range times {
			if at.After(start) {
				during++
				if !last.IsZero() {
					longest = max(longest, at.Sub(last))
				}
			}
			last = at
		}
		if during < minRenewals {
			t.Errorf("node %s: Lease renewed %d times from the start of the flood, want at least %d", node, during, minRenewals)
		}
		t.Logf("node %s: %d Lease renewals from the start of the flood, at most %s apart", node, during, longest.Round(time.Millisecond))
	}
}

func metricsText(t *testing.T, server string) string {
	t.Helper()
	resp, err := http.Get(server + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
