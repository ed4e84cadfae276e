package kubelet

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// serveResourceMetrics answers GET /metrics/resource as a kubelet does for
// metrics-server: the Prometheus text of the node's and its running
// containers' CPU (a cumulative counter, in core-seconds) and working set
// memory, each sample stamped with the moment of the reading.
func (k *Kubelet) serveResourceMetrics(w http.ResponseWriter, r *http.Request) {
	now := k.clock.Now().Truncate(time.Millisecond)
	s := k.usage.read(now, k.podLister.List(labels.Everything()))
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	bw := bufio.NewWriter(w)
	writeResourceMetrics(bw, s)
	_ = bw.Flush()
}

// writeResourceMetrics writes s in the Prometheus text format, its
// families in the order and with the help texts of the kubelet's resource
// metrics endpoint.
func writeResourceMetrics(w io.Writer, s usageSample) {
	ts := strconv.FormatInt(s.at.UnixMilli(), 10)
	family := func(name, typ, help string) {
		fmt.Fprintf(w, "# HELP %s [STABLE] %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	containers := func(name string, value func(containerSample) float64) {
		for _, c := range s.containers {
			fmt.Fprintf(w, "%s{container=%q,namespace=%q,pod=%q} %s %s\n", name, c.container, c.namespace, c.pod, float(value(c)), ts)
		}
	}
	pods := func(name string, value func(i int) float64) {
		for i, p := range s.pods {
			fmt.Fprintf(w, "%s{namespace=%q,pod=%q} %s %s\n", name, p.Namespace, p.Name, float(value(i)), ts)
		}
	}
	family("container_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the container in core-seconds")
	containers("container_cpu_usage_seconds_total", func(c containerSample) float64 { return c.cpuSeconds })
	family("container_memory_working_set_bytes", "gauge", "Current working set of the container in bytes")
	containers("container_memory_working_set_bytes", func(c containerSample) float64 { return float64(c.memoryBytes) })
	family("container_start_time_seconds", "gauge", "Start time of the container since unix epoch in seconds")
	containers("container_start_time_seconds", func(c containerSample) float64 { return float64(c.startedAt.Unix()) })
	family("node_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the node in core-seconds")
	fmt.Fprintf(w, "node_cpu_usage_seconds_total %s %s\n", float(s.nodeCPUSeconds), ts)
	family("node_memory_working_set_bytes", "gauge", "Current working set of the node in bytes")
	fmt.Fprintf(w, "node_memory_working_set_bytes %s %s\n", float(float64(s.nodeMemoryBytes)), ts)
	family("pod_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the pod in core-seconds")
	pods("pod_cpu_usage_seconds_total", func(i int) float64 { return s.podCPUSeconds[s.pods[i]] })
	family("pod_memory_working_set_bytes", "gauge", "Current working set of the pod in bytes")
	pods("pod_memory_working_set_bytes", func(i int) float64 { return float64(s.podMemoryBytes[s.pods[i]]) })
	family("resource_scrape_error", "gauge", "1 if there was an error while getting container metrics, 0 otherwise")
	fmt.Fprintln(w, "resource_scrape_error 0")
}

// float writes v as Prometheus' text format does.
func float(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
