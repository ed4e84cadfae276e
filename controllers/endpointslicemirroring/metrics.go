package endpointslicemirroring

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/minictl/minictl/controllers/internal/controller"
)

// metrics are the controller's own, under kube's
// endpoint_slice_mirroring_controller_* names.
type metrics struct {
	skipped prometheus.Histogram
	changes *prometheus.CounterVec
}

const subsystem = "endpoint_slice_mirroring_controller"

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		skipped: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: subsystem, Name: "addresses_skipped_per_sync",
			Help:    "Number of addresses skipped on each Endpoints sync due to being invalid or exceeding MaxEndpointsPerSubset",
			Buckets: prometheus.ExponentialBuckets(2, 2, 15),
		}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: subsystem, Name: "changes",
			Help: "Number of EndpointSlice changes",
		}, []string{"operation"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.skipped, err = controller.Register(reg, m.skipped); err != nil {
		return nil, err
	}
	if m.changes, err = controller.Register(reg, m.changes); err != nil {
		return nil, err
	}
	return m, nil
}
