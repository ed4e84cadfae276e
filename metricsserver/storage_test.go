package metricsserver

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Unix(1_700_000_000, 0)

// kubeletText is a /metrics/resource answer at the moment at, with the node's
// counter and one container "app" of default/web started at started.
func kubeletText(at, started time.Time, nodeCPU, appCPU float64, appMemory uint64) string {
	ts := at.UnixMilli()
	return fmt.Sprintf(`# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} %v %d
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="default",pod="web"} %d %d
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="default",pod="web"} %d %d
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total %v %d
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 1.073741824e+09 %d
`, appCPU, ts, appMemory, ts, started.Unix(), ts, nodeCPU, ts, ts)
}

func batchOf(t *testing.T, text string) map[string]*nodeBatch {
	t.Helper()
	b, err := decode(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*nodeBatch{"node-1": b}
}

var web = types.NamespacedName{Namespace: "default", Name: "web"}

func cpuOf(t *testing.T, s *storage) string {
	t.Helper()
	cs, u, ok := s.pod(web)
	if !ok {
		return "none"
	}
	q := cs[0].resources[corev1.ResourceCPU]
	return fmt.Sprintf("%dm over %v", q.MilliValue(), u.window)
}

// The usage is the counter's rate between the last two scrapes; a pod
// with one point has none, unless its container started lately; a
// restart starts over; a node missing from a scrape loses its points.
func TestStorage(t *testing.T) {
	s := &storage{resolution: 15 * time.Second}
	started := t0.Add(-time.Hour)

	s.store(batchOf(t, kubeletText(t0, started, 100, 10, 200<<20)))
	if got := cpuOf(t, s); got != "none" {
		t.Fatalf("after one scrape: %s, want none", got)
	}
	if _, ok := s.node("node-1"); ok {
		t.Fatalf("node usage after one scrape")
	}

	s.store(batchOf(t, kubeletText(t0.Add(15*time.Second), started, 106, 15.25, 300<<20)))
	if got := cpuOf(t, s); got != "350m over 15s" {
		t.Errorf("after two scrapes: %s, want 350m over 15s", got)
	}
	cs, _, _ := s.pod(web)
	if mem := cs[0].resources[corev1.ResourceMemory]; mem.Cmp(resource.MustParse("300Mi")) != 0 {
		t.Errorf("memory %v, want the last point's 300Mi", mem.String())
	}
	if u, ok := s.node("node-1"); !ok || u.resources.Cpu().MilliValue() != 400 || u.resources.Memory().Value() != 1<<30 {
		t.Errorf("node usage %+v, want 400m and 1Gi", u)
	}

	// A scrape no newer than the last keeps the two points there were.
	s.store(batchOf(t, kubeletText(t0.Add(15*time.Second), started, 106, 15.25, 300<<20)))
	if got := cpuOf(t, s); got != "350m over 15s" {
		t.Errorf("after a repeated scrape: %s", got)
	}

	// The container restarted 5s before the scrape: its new run has one
	// point, too fresh to count from its start.
	restarted := t0.Add(25 * time.Second)
	s.store(batchOf(t, kubeletText(t0.Add(30*time.Second), restarted, 112, 1, 300<<20)))
	if got := cpuOf(t, s); got != "none" {
		t.Errorf("after a restart: %s, want none", got)
	}
	s.store(batchOf(t, kubeletText(t0.Add(45*time.Second), restarted, 118, 4, 300<<20)))
	if got := cpuOf(t, s); got != "200m over 15s" {
		t.Errorf("two scrapes into the new run: %s, want 200m over 15s", got)
	}

	// A node that fails a scrape has nothing kept.
	s.store(map[string]*nodeBatch{})
	if got := cpuOf(t, s); got != "none" {
		t.Errorf("after a failed scrape: %s, want none", got)
	}
}

// A container started less than one resolution, and at least 10s, before
// its first point counts from its start, as metrics-server counts it.
func TestStorageFreshContainer(t *testing.T) {
	s := &storage{resolution: 15 * time.Second}
	s.store(batchOf(t, kubeletText(t0, t0.Add(-12*time.Second), 100, 1.2, 1<<20)))
	if got := cpuOf(t, s); got != "100m over 12s" {
		t.Errorf("fresh container: %s, want 100m over 12s", got)
	}
	s = &storage{resolution: 15 * time.Second}
	s.store(batchOf(t, kubeletText(t0, t0.Add(-5*time.Second), 100, 0.5, 1<<20)))
	if got := cpuOf(t, s); got != "none" {
		t.Errorf("a container 5s old: %s, want none", got)
	}
}

// A counter that went back gives no usage for that container.
func TestStorageCounterDecrease(t *testing.T) {
	s := &storage{resolution: 15 * time.Second}
	started := t0.Add(-time.Hour)
	s.store(batchOf(t, kubeletText(t0, started, 100, 10, 1<<20)))
	s.store(batchOf(t, kubeletText(t0.Add(15*time.Second), started, 90, 5, 1<<20)))
	if cs, _, ok := s.pod(web); ok && len(cs) != 0 {
		t.Errorf("containers %+v, want none", cs)
	}
	if _, ok := s.node("node-1"); ok {
		t.Errorf("node usage from a counter that went back")
	}
}

// decode skips what it cannot use: samples without a timestamp or pod
// labels, and refuses what is not the text format.
func TestDecode(t *testing.T) {
	b, err := decode(strings.NewReader(`# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 1
container_cpu_usage_seconds_total{container="app"} 1 1700000000000
`))
	if err != nil || len(b.pods) != 0 || b.node != nil {
		t.Errorf("decode: %+v, %v; want nothing", b, err)
	}
	if _, err := decode(strings.NewReader("this is { not prometheus\n")); err == nil {
		t.Errorf("decode of garbage: no error")
	}
}

// BenchmarkStorageBytesPerPod is what the server keeps for each pod of
// the cluster once it has scraped twice: the last two points of its
// container (here one a pod, as in most clusters), and the scrape's
// batches it was made from.
func BenchmarkStorageBytesPerPod(b *testing.B) {
	const pods = 2000
	scrape := func(at time.Time) string {
		var sb strings.Builder
		ts := at.UnixMilli()
		for _, m := range []struct{ metric, typ string }{
			{"container_cpu_usage_seconds_total", "counter"},
			{"container_memory_working_set_bytes", "gauge"},
			{"container_start_time_seconds", "gauge"},
		} {
			metric := m.metric
			fmt.Fprintf(&sb, "# TYPE %s %s\n", metric, m.typ)
			for i := range pods {
				fmt.Fprintf(&sb, "%s{container=\"app\",namespace=\"default\",pod=\"web-7d9f8c6b5-%05d\"} %d %d\n", metric, i, t0.Unix(), ts)
			}
		}
		return sb.String()
	}
	var bytes float64
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := &storage{resolution: 15 * time.Second}
		for i := range 2 {
			batch, err := decode(strings.NewReader(scrape(t0.Add(time.Duration(i+1) * 20 * time.Second))))
			if err != nil {
				b.Fatal(err)
			}
			s.store(map[string]*nodeBatch{"node-1": batch})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		bytes = float64(after.HeapAlloc-before.HeapAlloc) / pods
		if len(s.lastPods) != pods || len(s.prevPods) != pods {
			b.Fatalf("kept %d pods' last points and %d pods' previous ones, want %d of each", len(s.lastPods), len(s.prevPods), pods)
		}
	}
	b.ReportMetric(bytes, "B/pod")
}
