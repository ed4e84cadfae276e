package nodelifecycle

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/minictl/minictl/controllers/internal/controller"
)

// metrics are the controller's own metrics, under upstream's names.
type metrics struct {
	zoneSize       *prometheus.GaugeVec
	zoneHealth     *prometheus.GaugeVec
	unhealthyNodes *prometheus.GaugeVec
	evictions      *prometheus.CounterVec
	podDeletions   prometheus.Counter
}

// newMetrics creates the metrics and registers them on reg, if set.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		zoneSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "node_collector", Name: "zone_size",
			Help: "Number of nodes in the zone.",
		}, []string{"zone"}),
		zoneHealth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "node_collector", Name: "zone_health",
			Help: "Percentage of healthy (Ready) nodes in the zone.",
		}, []string{"zone"}),
		unhealthyNodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "node_collector", Name: "unhealthy_nodes_in_zone",
			Help: "Number of not-ready nodes in the zone.",
		}, []string{"zone"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "node_collector", Name: "evictions_total",
			Help: "Number of nodes given a NoExecute taint (not-ready or unreachable) by the controller, by zone.",
		}, []string{"zone"}),
		podDeletions: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "taint_eviction_controller", Name: "pod_deletions_total",
			Help: "Number of pods deleted because of NoExecute taints they do not tolerate (any longer).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.zoneSize, err = controller.Register(reg, m.zoneSize); err != nil {
		return nil, err
	}
	if m.zoneHealth, err = controller.Register(reg, m.zoneHealth); err != nil {
		return nil, err
	}
	if m.unhealthyNodes, err = controller.Register(reg, m.unhealthyNodes); err != nil {
		return nil, err
	}
	if m.evictions, err = controller.Register(reg, m.evictions); err != nil {
		return nil, err
	}
	if m.podDeletions, err = controller.Register(reg, m.podDeletions); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) setZone(zone string, size, notReady int) {
	m.zoneSize.WithLabelValues(zone).Set(float64(size))
	m.unhealthyNodes.WithLabelValues(zone).Set(float64(notReady))
	health := 100.0
	if size > 0 {
		health = float64(100*(size-notReady)) / float64(size)
	}
	m.zoneHealth.WithLabelValues(zone).Set(health)
}

func (m *metrics) deleteZone(zone string) {
	m.zoneSize.DeleteLabelValues(zone)
	m.unhealthyNodes.DeleteLabelValues(zone)
	m.zoneHealth.DeleteLabelValues(zone)
}
