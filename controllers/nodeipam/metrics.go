package nodeipam

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
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
	if m.usage, err = register(reg, m.usage); err != nil {
		return nil, err
	}
	if m.allocations, err = register(reg, m.allocations); err != nil {
		return nil, err
	}
	if m.releases, err = register(reg, m.releases); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c on reg, or returns the collector registered there
// already: the manager builds its controllers again on the same registry
// at each leadership term.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	if err != nil {
		return c, fmt.Errorf("register metrics: %w", err)
	}
	return c, nil
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
