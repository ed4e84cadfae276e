package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minictl/minictl/internal/minitest"
)

// scaleStep is one cluster of the scale scenario: pods on nodes.
type scaleStep struct{ pods, nodes int }

func (s scaleStep) String() string { return fmt.Sprintf("%d pods / %d nodes", s.pods, s.nodes) }

// defaultScaleSteps climb to Kubernetes' scalability envelope: 150,000
// pods on 5,000 nodes.
const defaultScaleSteps = "15000/150,50000/500,150000/5000"

// quickScaleSteps is -quick's: enough nodes to show that a many-node
// cluster starts, few pods.
const quickScaleSteps = "2000/500"

// parseScaleSteps reads -scale-steps: pods/nodes pairs, comma-separated.
func parseScaleSteps(s string) ([]scaleStep, error) {
	var steps []scaleStep
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		p, n, ok := strings.Cut(part, "/")
		pods, err1 := strconv.Atoi(p)
		nodes, err2 := strconv.Atoi(n)
		if !ok || err1 != nil || err2 != nil || pods <= 0 || nodes <= 0 {
			return nil, fmt.Errorf("-scale-steps: %q is not pods/nodes (e.g. 15000/150)", part)
		}
		steps = append(steps, scaleStep{pods: pods, nodes: nodes})
	}
	if len(steps) == 0 {
		return nil, errors.New("-scale-steps: no step")
	}
	return steps, nil
}

// scaleConfig is the scale scenario's: its steps and bounds.
type scaleConfig struct {
	steps       []scaleStep
	rate        float64       // pods per second the creator asks for
	rsSize      int           // replicas per ReplicaSet
	rssLimitMB  float64       // a step stops when minictl's RSS passes it
	stepTimeout time.Duration // 0: 10 minutes more than the creates take at rate
	settle      time.Duration // at least this long between all Running and the steady figures
	idle        time.Duration // the window the idle cluster's CPU is measured over
	heapDir     string        // where scale-<pods>.heap.pb.gz go
}

// The probes' periods: a small steady load beside the creator's.
const (
	scaleUpdateEvery = 200 * time.Millisecond // ConfigMap updates
	scaleGetEvery    = 100 * time.Millisecond // single-pod GETs
	scaleListEvery   = 10 * time.Second       // LISTs of every pod
	scaleRSSEvery    = time.Second            // the memory bound's check
)

// runScale is the scale scenario: for each step its own `minictl up
// --nodes N --profiling` (the node count is a flag of up, and a process
// of its own makes each step's peak RSS its own), pods created through
// ReplicaSets at a steady rate while probes measure the API's latencies,
// then the memory and CPU of the cluster at rest. A step that passes the
// RSS limit ends the scenario (the larger ones would too); one that runs
// out of time is reported as far as it got, and the next one starts.
func (h *harness) runScale(ctx context.Context, rep int) error {
	for _, st := range h.scale.steps {
		fmt.Printf("  scale     %s: starting\n", st)
		stop, err := h.runScaleStep(ctx, st)
		if err != nil {
			return fmt.Errorf("%s: %w", st, err)
		}
		if stop {
			fmt.Printf("  scale     %s passed the RSS limit of %.0f MB: no larger step runs\n", st, h.scale.rssLimitMB)
			return nil
		}
	}
	return nil
}

// scaleTargets are Kubernetes' SLOs and the memory envelope, by figure
// name after the step's label.
func scaleTargets(st scaleStep) map[string]*target {
	t := map[string]*target{
		"mutating call p99":    {op: "<", value: 1000},
		"pod GET p99":          {op: "<", value: 1000},
		"LIST all pods p99":    {op: "<", value: 30000},
		"pod startup p99":      {op: "<", value: 5},
		"RSS limit passed":     {op: "==", value: 0},
		"pods Running reached": {op: ">=", value: float64(st.pods)},
	}
	switch st {
	case scaleStep{15000, 150}:
		t["RSS steady"] = &target{op: "<", value: 500}
	case scaleStep{150000, 5000}:
		t["RSS steady"] = &target{op: "<", value: 4000}
		t["RSS peak (VmHWM)"] = &target{op: "<", value: 6000}
		t["RSS steady per pod"] = &target{op: "<=", value: 25}
		t["idle CPU"] = &target{op: "<", value: 0.5}
	}
	return t
}

// scaleNotes say how the figures are taken.
var scaleNotes = map[string]string{
	"mutating call p99":  "ReplicaSet creates and ConfigMap updates (5/s)",
	"pod GET p99":        "10/s, a random existing pod",
	"LIST all pods p99":  "every 10 s, GET /api/v1/pods, no limit (paging off), JSON",
	"pod startup p99":    "first ADDED to first Running, as the harness's watch sees them",
	"all Running":        "from the first ReplicaSet create",
	"RSS steady":         "VmRSS once all Running, the settle time passed and RSS stopped falling",
	"RSS steady per pod": "steady VmRSS / pods Running",
	"heap in use":        "HeapInuse after a forced GC",
	"heap alloc":         "HeapAlloc after a forced GC (the live heap)",
	"idle CPU":           "minictl's CPU time over the idle window, all Running and nothing created",
	"idle CPU per node":  "the idle CPU divided by the nodes",
}

func (h *harness) runScaleStep(ctx context.Context, st scaleStep) (stop bool, err error) {
	label := st.String()
	for name, t := range scaleTargets(st) {
		h.res.targets["scale/"+label+": "+name] = t
	}
	for name, n := range scaleNotes {
		h.res.notes["scale/"+label+": "+name] = n
	}
	add := func(name, unit string, v float64) { h.res.add("scale", label+": "+name, unit, v) }

	c, err := h.startCluster(ctx, clusterOptions{Profiling: true, Args: []string{"--nodes", strconv.Itoa(st.nodes)}})
	if err != nil {
		return false, err
	}
	defer c.stop()
	started := time.Now().Add(-c.Ready)

	// The memory bound: every step's phase runs under stepCtx, which
	// ends when RSS passes the limit or the step's time is up.
	timeout := h.scale.stepTimeout
	if timeout <= 0 {
		timeout = time.Duration(float64(st.pods)/h.scale.rate*float64(time.Second)) + 10*time.Minute
	}
	stepCtx, cancel := context.WithCancelCause(ctx)
	// The time bound is the load's: from start-up to every pod Running.
	// What follows is bounded by its own waits.
	loadPhase, cancelTimed := context.WithTimeoutCause(stepCtx, timeout, fmt.Errorf("the step's time (%s) is up", timeout))
	defer cancelTimed()
	var overLimit bool
	monitorDone := make(chan struct{})
	go func() {
		defer close(monitorDone)
		tick := time.NewTicker(scaleRSSEvery)
		defer tick.Stop()
		for {
			select {
			case <-stepCtx.Done():
				return
			case <-tick.C:
			}
			if rss, err := c.rssMB(); err == nil && rss > h.scale.rssLimitMB {
				overLimit = true
				cancel(fmt.Errorf("RSS %.0f MB passed the limit", rss))
				return
			}
		}
	}()
	defer func() {
		cut := ctx.Err() == nil && loadPhase.Err() != nil
		cancel(nil)
		<-monitorDone
		if overLimit {
			stop = true
		}
		if cut && err != nil {
			// The limit or the step's time cut a phase short: what was
			// reached is reported; the run goes on.
			fmt.Printf("  scale     %s: stopped (%v): %v\n", label, context.Cause(loadPhase), err)
			err = nil
		}
		add("RSS limit passed", "", map[bool]float64{true: 1, false: 0}[overLimit])
		if peak, e := c.procStatusMB("VmHWM"); e == nil {
			add("RSS peak (VmHWM)", "MB", peak)
		}
	}()

	if err := waitNodesReadyEvery(loadPhase, c, st.nodes, 2*time.Second); err != nil {
		return false, fmt.Errorf("nodes: %w", err)
	}
	add("nodes Ready", "s", time.Since(started).Seconds())
	if err := waitLeader(loadPhase, c, 5*time.Minute); err != nil {
		return false, err
	}
	const ns = "scale"
	if err := createNamespace(loadPhase, c, ns); err != nil {
		return false, err
	}
	w, err := watchStartup(loadPhase, c, ns, st.pods)
	if err != nil {
		return false, err
	}
	defer w.stop()

	// The load: the creator and the probes, until every pod runs.
	lat := &latencies{}
	loadCtx, stopLoad := context.WithCancel(loadPhase)
	var wg sync.WaitGroup
	createStart := time.Now()
	wg.Go(func() { h.createReplicaSets(loadCtx, c, ns, st.pods, lat) })
	if err := probeScale(loadCtx, &wg, c, ns, w, lat); err != nil {
		stopLoad()
		wg.Wait()
		return false, err
	}
	var reached time.Time
	select {
	case <-w.allRunning:
		reached = w.allAt
	case <-loadPhase.Done():
	case <-w.done:
	}
	stopLoad()
	wg.Wait()
	if err := w.failed(); err != nil && loadPhase.Err() == nil {
		return false, err
	}

	add("pods Running reached", "", float64(w.running()))
	if !reached.IsZero() {
		add("all Running", "s", reached.Sub(createStart).Seconds())
	}
	lat.report(add)
	add("pod startup p50", "s", percentile(w.startups(), 50).Seconds())
	add("pod startup p99", "s", percentile(w.startups(), 99).Seconds())
	if loadPhase.Err() != nil {
		fmt.Printf("  scale     %s: stopped with %d pods Running: %v\n", label, w.running(), context.Cause(loadPhase))
		if !overLimit { // the heap as far as it got, unless memory is what ran out
			hctx, done := context.WithTimeout(ctx, 2*time.Minute)
			defer done()
			if path, err := h.saveHeap(hctx, c, st); err == nil {
				fmt.Printf("  scale     %s: heap profile in %s\n", label, path)
			}
		}
		return false, nil
	}
	fmt.Printf("  scale     %s: all Running after %s; settling\n", label, reached.Sub(createStart).Round(time.Second))

	// At rest: the watch cache's history has turned over (only nodes and
	// leases change now) and the garbage collector has run.
	rss, err := settleRSS(stepCtx, c, h.scale.settle)
	if err != nil {
		return false, err
	}
	add("RSS steady", "MB", rss)
	add("RSS steady per pod", "KB", rss*1024/float64(max(w.running(), 1)))
	cpu0, t0 := c.cpuTime(), time.Now()
	select {
	case <-stepCtx.Done():
		return false, context.Cause(stepCtx)
	case <-time.After(h.scale.idle):
	}
	cores := c.cpuTime().Seconds() - cpu0.Seconds()
	cores /= time.Since(t0).Seconds()
	add("idle CPU", "cores", cores)
	add("idle CPU per node", "millicores", cores*1000/float64(st.nodes))

	path, err := h.saveHeap(stepCtx, c, st)
	if err != nil {
		return false, err
	}
	stats, err := c.get(stepCtx, "/debug/pprof/heap?debug=1")
	if err != nil {
		return false, err
	}
	mem := memStats(stats)
	add("heap alloc", "MB", mem["HeapAlloc"]/(1<<20))
	add("heap in use", "MB", mem["HeapInuse"]/(1<<20))
	fmt.Printf("  scale     %s: heap profile in %s\n", label, path)
	return false, nil
}

// saveHeap saves the heap profile of step st, taken right after a
// forced garbage collection, and returns its path.
func (h *harness) saveHeap(ctx context.Context, c *cluster, st scaleStep) (string, error) {
	heap, err := c.get(ctx, "/debug/pprof/heap?gc=1")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(h.scale.heapDir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(h.scale.heapDir, fmt.Sprintf("scale-%d.heap.pb.gz", st.pods))
	return path, os.WriteFile(path, heap, 0o644)
}

// createReplicaSets creates pods through ReplicaSets of rsSize replicas
// (the last one smaller), one every rsSize/rate seconds, so that pods are
// asked for at rate on average. A create that fails is tried again at
// the next tick; its latency counts all the same.
func (h *harness) createReplicaSets(ctx context.Context, c *cluster, ns string, pods int, lat *latencies) {
	url := c.URL + "/apis/apps/v1/namespaces/" + ns + "/replicasets"
	every := time.Duration(float64(h.scale.rsSize) / h.scale.rate * float64(time.Second))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i, created := 0, 0; created < pods; {
		n := min(h.scale.rsSize, pods-created)
		name := fmt.Sprintf("rs-%05d", i)
		body := fmt.Appendf(nil, `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":%q},`+
			`"spec":{"replicas":%d,"selector":{"matchLabels":{"rs":%q}},`+
			`"template":{"metadata":{"labels":{"rs":%q,"app":"bench","tier":"web"}},"spec":{%s}}}}`,
			name, n, name, name, podSpec)
		start := time.Now()
		code, _, err := do(ctx, http.MethodPost, url, "application/json", body)
		if ctx.Err() != nil {
			return
		}
		lat.add(&lat.mutating, time.Since(start), err == nil && (code == http.StatusCreated || code == http.StatusConflict))
		if err == nil && (code == http.StatusCreated || code == http.StatusConflict) { // 409: an earlier try got through
			i, created = i+1, created+n
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// probeScale starts the probes beside the creator, each until ctx ends:
// ConfigMap updates, single-pod GETs and LISTs of every pod.
func probeScale(ctx context.Context, wg *sync.WaitGroup, c *cluster, ns string, w *startupWatch, lat *latencies) error {
	cmURL := c.URL + "/api/v1/namespaces/" + ns + "/configmaps"
	if _, err := expect(ctx, http.StatusCreated, http.MethodPost, cmURL, "application/json",
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"probe"},"data":{"n":"0"}}`)); err != nil {
		return err
	}
	every := func(d time.Duration, f func(i int)) {
		wg.Go(func() {
			tick := time.NewTicker(d)
			defer tick.Stop()
			for i := 1; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				f(i)
			}
		})
	}
	timed := func(list *[]time.Duration, method, url, contentType string, body []byte) {
		start := time.Now()
		code, err := stream(ctx, method, url, contentType, body)
		if ctx.Err() == nil {
			lat.add(list, time.Since(start), err == nil && code == http.StatusOK)
		}
	}
	every(scaleUpdateEvery, func(i int) {
		timed(&lat.mutating, http.MethodPatch, cmURL+"/probe", "application/merge-patch+json", fmt.Appendf(nil, `{"data":{"n":"%d"}}`, i))
	})
	every(scaleGetEvery, func(int) {
		if name := w.randomPod(); name != "" {
			timed(&lat.get, http.MethodGet, podsURL(c, ns)+"/"+name, "", nil)
		}
	})
	every(scaleListEvery, func(int) { timed(&lat.list, http.MethodGet, c.URL+"/api/v1/pods", "", nil) })
	return nil
}

// stream sends one request and reads the answer to the end without
// keeping it: a LIST of 150,000 pods is hundreds of MB.
func stream(ctx context.Context, method, url, contentType string, body []byte) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// latencies are the load's, by kind of call; failed calls are counted.
type latencies struct {
	mu                  sync.Mutex
	mutating, get, list []time.Duration
	failed              map[*[]time.Duration]int
}

func (l *latencies) add(list *[]time.Duration, d time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*list = append(*list, d)
	if !ok {
		if l.failed == nil {
			l.failed = map[*[]time.Duration]int{}
		}
		l.failed[list]++
	}
}

func (l *latencies) report(add func(name, unit string, v float64)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range []struct {
		name, calls string
		list        *[]time.Duration
	}{{"mutating call", "mutating calls", &l.mutating}, {"pod GET", "pod GETs", &l.get}, {"LIST all pods", "LISTs of all pods", &l.list}} {
		ds := slices.Clone(*k.list)
		slices.Sort(ds)
		add(k.calls, "", float64(len(ds)))
		add(k.calls+" failed", "", float64(l.failed[k.list]))
		if len(ds) > 0 {
			add(k.name+" p50", "ms", float64(percentile(ds, 50).Microseconds())/1000)
			add(k.name+" p99", "ms", float64(percentile(ds, 99).Microseconds())/1000)
		}
	}
}

// settleRSS waits at least settle, then until RSS has stopped falling
// (less than 1% lower than 15 s before; at most settle more), and returns
// it.
func settleRSS(ctx context.Context, c *cluster, settle time.Duration) (float64, error) {
	const step = 5 * time.Second
	var samples []float64
	deadline := time.Now().Add(2 * settle)
	for start := time.Now(); ; {
		rss, err := c.rssMB()
		if err != nil {
			return 0, err
		}
		samples = append(samples, rss)
		if time.Since(start) >= settle {
			if n := len(samples); n > 3 && samples[n-4]*0.99 <= rss || time.Now().After(deadline) {
				return rss, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		case <-time.After(step):
		}
	}
}

// waitNodesReadyEvery waits until n nodes are Ready, listing the nodes
// every period: listing 5,000 nodes is itself a load. A failed list is
// tried again (while thousands of kubelets register, the server may shed
// load with a 429 or 503, as kube-apiserver does).
func waitNodesReadyEvery(ctx context.Context, c *cluster, n int, period time.Duration) error {
	for {
		ready, err := minitest.ReadyNodes(c.URL)
		if err == nil && ready >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("nodes not all Ready (the last list: %v): %w", err, context.Cause(ctx))
			}
			return fmt.Errorf("%d of %d nodes Ready: %w", ready, n, context.Cause(ctx))
		case <-time.After(period):
		}
	}
}

// get reads path on the cluster and fails unless it answers 200.
func (c *cluster) get(ctx context.Context, path string) ([]byte, error) {
	return expect(ctx, http.StatusOK, http.MethodGet, c.URL+path, "", nil)
}

// procStatusMB is a kB line of /proc/<pid>/status (VmRSS, VmHWM) in MB.
func (c *cluster) procStatusMB(field string) (float64, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(c.cmd.Process.Pid), "status"))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			kb, err := strconv.ParseFloat(f[0], 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/<pid>/status", field)
}

// memStats reads the "# Name = value" lines of /debug/pprof/heap?debug=1,
// runtime.MemStats as the process saw them.
func memStats(text []byte) map[string]float64 {
	m := map[string]float64{}
	for line := range strings.Lines(string(text)) {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "# "), " = ")
		if !ok || !strings.HasPrefix(line, "# ") {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			m[k] = f
		}
	}
	return m
}

// randomIndex is a random index below n.
func randomIndex(n int) int { return rand.IntN(n) }
