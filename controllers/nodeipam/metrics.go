package nodeipam

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/minictl/minictl/controllers/internal/controller"
)

// metrics are the controller's own metrics, under upstream's names, for
// one cluster CIDR.
type metrics struct {
	usage       prometheus.Gauge
	allocations prometheus.Counter
	releases    prometheus.Counter
}

// newMetrics creates the metrics of clusterCIDR and registers them on reg,
// if set.
func newMetrics(reg prometheus.Registerer, clusterCIDR string) (*metrics, error) {
	labels := prometheus.Labels{"clusterCIDR": clusterCIDR}
	m := &metrics{
		usage: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "node_ipam_controller", Name: "cidrset_usage_cidrs",
			Help: "Fraction of the cluster CIDR's node ranges in use.", ConstLabels: labels,
		}),
		allocations: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "node_ipam_controller", Name: "cidrset_cidrs_allocations_total",
			Help: "Node ranges allocated (or found in use).", ConstLabels: labels,
		}),
		releases: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "node_ipam_controller", Name: "cidrset_cidrs_releases_total",
			Help: "Node ranges released.", ConstLabels: labels,
		}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.usage, err = controller.Register(reg, m.usage); err != nil {
		return nil, err
	}
	if m.allocations, err = controller.Register(reg, m.allocations); err != nil {
		return nil, err
	}
	if m.releases, err = controller.Register(reg, m.releases); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) allocated(s *cidrSet) {
	m.allocations.Inc()
	m.setUsage(s)
}

func (m *metrics) released(s *cidrSet) {
	m.releases.Inc()
	m.setUsage(s)
}

func (m *metrics) setUsage(s *cidrSet) {
	m.usage.Set(float64(s.count-s.free()) / float64(s.count))
}
