package kubelet

import (
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// runningPod is a pod whose containers run since started, each asking for
// requests.
func runningPod(name string, started time.Time, requests corev1.ResourceList, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Resources: corev1.ResourceRequirements{Requests: requests}})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}},
		})
	}
	p.Status.Phase = corev1.PodRunning
	return p
}

func requests(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

func TestPodUsage(t *testing.T) {
	started := time.Unix(1_700_000_000, 0)
	annotated := func(p *corev1.Pod, cpu, memory string) *corev1.Pod {
		p.Annotations = map[string]string{AnnotationCPUUsage: cpu, AnnotationMemoryUsage: memory}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want []containerUsage // name, cpu, memory
	}{
		{"a tenth of the requests", runningPod("p", started, requests("500m", "256Mi"), "app"),
			[]containerUsage{{name: "app", cpu: 50_000_000, memory: 256 << 20 / 10}}},
		{"idle without requests", runningPod("p", started, nil, "app"),
			[]containerUsage{{name: "app", cpu: 1_000_000, memory: 8 << 20}}},
		{"the annotations are the pod's, shared evenly", annotated(runningPod("p", started, requests("1", "1Gi"), "b", "a", "c"), "350m", "300Mi"),
			[]containerUsage{{name: "a", cpu: 116_666_667, memory: 100 << 20}, {name: "b", cpu: 116_666_667, memory: 100 << 20}, {name: "c", cpu: 116_666_666, memory: 100 << 20}}},
		{"an annotation that does not parse is ignored", annotated(runningPod("p", started, requests("100m", "100Mi"), "app"), "lots", "-1"),
			[]containerUsage{{name: "app", cpu: 10_000_000, memory: 100 << 20 / 10}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := podUsage(tc.pod)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d containers, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.name != w.name || g.cpu != w.cpu || g.memory != w.memory || !g.startedAt.Equal(started) {
					t.Errorf("container %d: got %s cpu=%dn memory=%d, want %s cpu=%dn memory=%d", i, g.name, g.cpu, g.memory, w.name, w.cpu, w.memory)
				}
			}
		})
	}

	notRunning := runningPod("p", started, nil, "app")
	notRunning.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}
	if got := podUsage(notRunning); len(got) != 0 {
		t.Errorf("a container that does not run uses %+v", got)
	}
}

// The counters grow at the rate each container had since the reading
// before, and take the rate the pods now ask for from then on; a
// container seen for the first time has used its rate since it started,
// and one started again counts from zero.
func TestUsageMeterCountsAtTheRateOfEachInterval(t *testing.T) {
	boot := time.Unix(1_700_000_000, 0)
	m := newUsageMeter(boot)
	pod := runningPod("web", boot.Add(10*time.Second), requests("1", "1Gi"), "app")
	pod.Annotations = map[string]string{AnnotationCPUUsage: "350m"}

	s := m.read(boot.Add(20*time.Second), []*corev1.Pod{pod})
	if len(s.containers) != 1 || s.containers[0].cpuSeconds != 3.5 {
		t.Fatalf("after 10s at 350m: %+v, want 3.5 core-seconds", s.containers)
	}
	if want := 0.05*20 + 0.35*10; s.nodeCPUSeconds != want {
		t.Errorf("node: %v core-seconds, want %v (the system's 50m for 20s, the container's 350m for 10s)", s.nodeCPUSeconds, want)
	}
	if s.nodeMemoryBytes != 200<<20+1<<30/10 {
		t.Errorf("node working set %d", s.nodeMemoryBytes)
	}

	pod.Annotations[AnnotationCPUUsage] = "1500m"
	s = m.read(boot.Add(35*time.Second), []*corev1.Pod{pod})
	if got := s.containers[0].cpuSeconds; got != 3.5+0.35*15 {
		t.Errorf("15s later: %v core-seconds, want %v: the new rate counts from this reading on", got, 3.5+0.35*15)
	}
	s = m.read(boot.Add(50*time.Second), []*corev1.Pod{pod})
	if got := s.containers[0].cpuSeconds; got != 3.5+0.35*15+1.5*15 {
		t.Errorf("15s later again: %v core-seconds, want %v", got, 3.5+0.35*15+1.5*15)
	}
	node := s.nodeCPUSeconds

	restarted := pod.DeepCopy()
	restarted.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(boot.Add(55 * time.Second))
	s = m.read(boot.Add(60*time.Second), []*corev1.Pod{restarted})
	if got := s.containers[0].cpuSeconds; got != 1.5*5 {
		t.Errorf("after a restart: %v core-seconds, want %v", got, 1.5*5)
	}
	s = m.read(boot.Add(70*time.Second), nil)
	if len(s.containers) != 0 || s.nodeCPUSeconds < node {
		t.Errorf("pod gone: containers %+v, node counter %v (was %v): it must never go back", s.containers, s.nodeCPUSeconds, node)
	}
}

// parseResourceMetrics reads a /metrics/resource answer as metrics-server
// does.
func parseResourceMetrics(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics/resource: %v\n%s", err, body)
	}
	return fams
}

// sample finds the sample of family name whose labels are labels.
func sample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		if len(m.Label) != len(labels) {
			continue
		}
		for _, l := range m.Label {
			if labels[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		return m
	}
	return nil
}

// The kubelet serves /metrics/resource as kube's does: Prometheus text with
// the container, pod and node families, every sample stamped; two scrapes
// of a pod annotated 350m give 350m as the rate of its counter.
func TestResourceMetricsEndpoint(t *testing.T) {
	rc := newClient(t)
	startKubelet(t, rc, "node-3", nil)
	base := kubeletURL(t, rc, "node-3")
	p := newPod("web", "node-3")
	p.Annotations = map[string]string{AnnotationCPUUsage: "350m", AnnotationMemoryUsage: "200Mi"}
	createPod(t, rc, p)
	pod := waitPod(t, rc, "web", "Running", runningAndReady)
	var fams map[string]*dto.MetricFamily
	waitFor(t, "web in the kubelet's resource metrics", func() (bool, error) {
		code, body := get(t, base+"/metrics/resource")
		if code != http.StatusOK {
			t.Fatalf("/metrics/resource: %d %s", code, body)
		}
		fams = parseResourceMetrics(t, body)
		return sample(fams, "container_cpu_usage_seconds_total", map[string]string{"container": "app", "namespace": "default", "pod": "web"}) != nil, nil
	})
	for name, typ := range map[string]dto.MetricType{
		"container_cpu_usage_seconds_total": dto.MetricType_COUNTER, "container_memory_working_set_bytes": dto.MetricType_GAUGE,
		"container_start_time_seconds": dto.MetricType_GAUGE, "node_cpu_usage_seconds_total": dto.MetricType_COUNTER,
		"node_memory_working_set_bytes": dto.MetricType_GAUGE, "pod_cpu_usage_seconds_total": dto.MetricType_COUNTER,
		"pod_memory_working_set_bytes": dto.MetricType_GAUGE, "resource_scrape_error": dto.MetricType_GAUGE,
	} {
		f := fams[name]
		if f == nil || f.GetType() != typ || !strings.HasPrefix(f.GetHelp(), "[STABLE] ") {
			t.Errorf("family %s: %v, want type %v with a [STABLE] help", name, f, typ)
		}
	}
	web := map[string]string{"container": "app", "namespace": "default", "pod": "web"}
	if m := sample(fams, "container_memory_working_set_bytes", web); m == nil || m.GetGauge().GetValue() != 200<<20 || m.GetTimestampMs() == 0 {
		t.Errorf("working set: %v, want 200Mi with a timestamp", m)
	}
	if m := sample(fams, "container_start_time_seconds", web); m == nil || int64(m.GetGauge().GetValue()) != pod.Status.ContainerStatuses[0].State.Running.StartedAt.Unix() {
		t.Errorf("start time: %v, want the container's startedAt", m)
	}
	first := sample(fams, "container_cpu_usage_seconds_total", web)
	firstNode := sample(fams, "node_cpu_usage_seconds_total", nil)
	var second, secondNode *dto.Metric
	waitFor(t, "a later scrape", func() (bool, error) {
		_, body := get(t, base+"/metrics/resource")
		fams = parseResourceMetrics(t, body)
		second, secondNode = sample(fams, "container_cpu_usage_seconds_total", web), sample(fams, "node_cpu_usage_seconds_total", nil)
		return second.GetTimestampMs() > first.GetTimestampMs()+10, nil
	})
	window := float64(second.GetTimestampMs()-first.GetTimestampMs()) / 1000
	if rate := (second.GetCounter().GetValue() - first.GetCounter().GetValue()) / window; rate < 0.349999 || rate > 0.350001 {
		t.Errorf("container rate over %vs: %v cores, want 0.35", window, rate)
	}
	if rate := (secondNode.GetCounter().GetValue() - firstNode.GetCounter().GetValue()) / window; rate < 0.399999 || rate > 0.400001 {
		t.Errorf("node rate over %vs: %v cores, want 0.4 (350m and the system's 50m)", window, rate)
	}
}
