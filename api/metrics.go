package api

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// The resource metrics API, metrics.k8s.io/v1beta1: what nodes and pods
// use now, as metrics-server serves it to kubectl top and the
// HorizontalPodAutoscaler. Nothing of it is stored: the API server
// answers from its scrapes of the kubelets (ReadOnly; package
// metricsserver). As metrics-server's, the kinds have no singular name
// and select on metadata.name (and metadata.namespace) only.
var (
	NodeMetrics = &Resource{
		Group: "metrics.k8s.io", Version: "v1beta1", Kind: "NodeMetrics", Plural: "nodes",
		ReadOnly: true, New: func() Object { return &metricsv1beta1.NodeMetrics{} },
		Table: printer(metricsColumns, nodeMetricsRow),
	}
	PodMetrics = &Resource{
		Group: "metrics.k8s.io", Version: "v1beta1", Kind: "PodMetrics", Plural: "pods", Namespaced: true,
		ReadOnly: true, New: func() Object { return &metricsv1beta1.PodMetrics{} },
		Table: printer(metricsColumns, podMetricsRow),
	}
)

// metricsColumns are metrics-server's: the name, each resource used and
// the window it was measured over.
var metricsColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the resource"},
	{Name: "cpu", Type: "string", Format: "quantity"},
	{Name: "memory", Type: "string", Format: "quantity"},
	{Name: "Window", Type: "string", Format: "duration"},
}

func nodeMetricsRow(m *metricsv1beta1.NodeMetrics, _ time.Time) []any {
	return usageRow(m.Name, m.Window.Duration, m.Usage)
}

func podMetricsRow(m *metricsv1beta1.PodMetrics, _ time.Time) []any {
	total := corev1.ResourceList{}
	for _, c := range m.Containers {
		for name, q := range c.Usage {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	return usageRow(m.Name, m.Window.Duration, total)
}

func usageRow(name string, window time.Duration, usage corev1.ResourceList) []any {
	cpu, memory := usage[corev1.ResourceCPU], usage[corev1.ResourceMemory]
	return []any{name, cpu.String(), memory.String(), window.String()}
}
