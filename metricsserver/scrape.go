package metricsserver

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// point is one sample of a node or container.
type point struct {
	timestamp time.Time
	startTime time.Time // containers only
	cpuNs     uint64    // cumulative CPU time, core-nanoseconds
	memory    uint64    // working set, bytes
}

// containerPoints are the points of a pod's containers, by container
// name: a short list, not a map, for a pod has few containers and the
// server keeps two of these for every pod of the cluster (a map of one
// entry takes several times the bytes).
type containerPoints []containerPoint

type containerPoint struct {
	name string
	point
}

// get returns container name's point: zero and false if it has none.
func (cs containerPoints) get(name string) (point, bool) {
	for _, c := range cs {
		if c.name == name {
			return c.point, true
		}
	}
	return point{}, false
}

// at returns container name's point to change, added (zero) if it has
// none, and the list it is in.
func (cs containerPoints) at(name string) (containerPoints, *point) {
	for i := range cs {
		if cs[i].name == name {
			return cs, &cs[i].point
		}
	}
	cs = append(cs, containerPoint{name: name})
	return cs, &cs[len(cs)-1].point
}

// nodeBatch is what one scrape of a kubelet found.
type nodeBatch struct {
	node *point // nil if the kubelet did not report its node
	pods map[types.NamespacedName]containerPoints
}

// maxResponseBytes bounds what is read of one kubelet's answer.
const maxResponseBytes = 10 << 20

// kubeletURL is where the kubelet of node serves its resource metrics.
func kubeletURL(node *corev1.Node) (string, error) {
	var host string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && host == "" {
			host = a.Address
		}
	}
	if host == "" {
		return "", fmt.Errorf("node %s has no InternalIP", node.Name)
	}
	port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port <= 0 {
		return "", fmt.Errorf("node %s reports no kubelet port", node.Name)
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: "/metrics/resource"}
	return u.String(), nil
}

// scrape reads the resource metrics of node's kubelet.
func scrape(ctx context.Context, c *http.Client, node *corev1.Node) (*nodeBatch, error) {
	u, err := kubeletURL(node)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("request failed: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("request failed, status: %q", resp.Status)
	}
	return decode(io.LimitReader(resp.Body, maxResponseBytes))
}

// decode reads a /metrics/resource answer into points. Samples without a
// timestamp, or with a counter that is not a number, are skipped, as
// metrics-server skips them.
func decode(r io.Reader) (*nodeBatch, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("decode resource metrics: %w", err)
	}
	b := &nodeBatch{pods: map[types.NamespacedName]containerPoints{}}
	for _, m := range fams["container_cpu_usage_seconds_total"].GetMetric() {
		if v := m.GetCounter().GetValue(); m.TimestampMs != nil && validSample(v) {
			b.update(m, func(pt *point) { pt.cpuNs, pt.timestamp = seconds(v), time.UnixMilli(m.GetTimestampMs()) })
		}
	}
	for _, m := range fams["container_memory_working_set_bytes"].GetMetric() {
		if v := m.GetGauge().GetValue(); validSample(v) {
			b.update(m, func(pt *point) { pt.memory = uint64(v) })
		}
	}
	for _, m := range fams["container_start_time_seconds"].GetMetric() {
		if v := m.GetGauge().GetValue(); validSample(v) {
			sec, frac := math.Modf(v)
			b.update(m, func(pt *point) { pt.startTime = time.Unix(int64(sec), int64(frac*1e9)) })
		}
	}
	// A container with no CPU sample has no point.
	for ref, cs := range b.pods {
		cs = slices.DeleteFunc(cs, func(c containerPoint) bool { return c.timestamp.IsZero() })
		if len(cs) == 0 {
			delete(b.pods, ref)
		} else {
			b.pods[ref] = cs
		}
	}
	cpu, mem := fams["node_cpu_usage_seconds_total"].GetMetric(), fams["node_memory_working_set_bytes"].GetMetric()
	if len(cpu) == 1 && len(mem) == 1 && cpu[0].TimestampMs != nil && validSample(cpu[0].GetCounter().GetValue()) && validSample(mem[0].GetGauge().GetValue()) {
		b.node = &point{
			timestamp: time.UnixMilli(cpu[0].GetTimestampMs()),
			cpuNs:     seconds(cpu[0].GetCounter().GetValue()),
			memory:    uint64(mem[0].GetGauge().GetValue()),
		}
	}
	return b, nil
}

// update changes the point of the container m is about; m without a
// namespace, pod and container is not about one.
func (b *nodeBatch) update(m *dto.Metric, change func(*point)) {
	var ref types.NamespacedName
	var name string
	for _, l := range m.GetLabel() {
		switch l.GetName() {
		case "namespace":
			ref.Namespace = l.GetValue()
		case "pod":
			ref.Name = l.GetValue()
		case "container":
			name = l.GetValue()
		}
	}
	if ref.Namespace == "" || ref.Name == "" || name == "" {
		return
	}
	cs, pt := b.pods[ref].at(name)
	change(pt)
	b.pods[ref] = cs
}

func validSample(v float64) bool { return v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

// seconds is v core-seconds in core-nanoseconds, to the nearest one: the
// text format's decimal seconds are not always exact in binary.
func seconds(v float64) uint64 { return uint64(math.Round(v * 1e9)) }
