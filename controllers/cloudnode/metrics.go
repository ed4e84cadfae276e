package cloudnode

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/minictl/minictl/controllers/internal/controller"
)

// metrics are kube's node_controller histograms of the cloud-node
// controller: how long after a Node's creation its taint came off, and
// its initialization finished.
type metrics struct {
	taintRemovalDelay prometheus.Histogram
	initialSyncDelay  prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	buckets := prometheus.ExponentialBuckets(1, 4, 6) // 1s to about 17m
	m := &metrics{
		taintRemovalDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "node_controller",
			Name:      "cloud_provider_taint_removal_delay_seconds",
			Help:      "Number of seconds after node creation when NodeController removed the cloud-provider taint of a single node.",
			Buckets:   buckets,
		}),
		initialSyncDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "node_controller",
			Name:      "initial_node_sync_delay_seconds",
			Help:      "Number of seconds after node creation when NodeController finished the initial synchronization of a single node.",
			Buckets:   buckets,
		}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.taintRemovalDelay, err = controller.Register(reg, m.taintRemovalDelay); err != nil {
		return nil, err
	}
	if m.initialSyncDelay, err = controller.Register(reg, m.initialSyncDelay); err != nil {
		return nil, err
	}
	return m, nil
}
