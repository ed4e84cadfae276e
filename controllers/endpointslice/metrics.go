package endpointslice

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/minictl/minictl/controllers/internal/controller"
)

// metrics are the controller's own, under kube's endpoint_slice_controller_*
// names.
type metrics struct {
	added          prometheus.Histogram
	removed        prometheus.Histogram
	changedPerSync prometheus.Histogram
	changes        *prometheus.CounterVec
	syncs          *prometheus.CounterVec
}

const subsystem = "endpoint_slice_controller"

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		added: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: subsystem, Name: "endpoints_added_per_sync",
			Help:    "Number of endpoints added on each Service sync",
			Buckets: prometheus.ExponentialBuckets(2, 2, 15),
		}),
		removed: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: subsystem, Name: "endpoints_removed_per_sync",
			Help:    "Number of endpoints removed on each Service sync",
			Buckets: prometheus.ExponentialBuckets(2, 2, 15),
		}),
		changedPerSync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: subsystem, Name: "endpointslices_changed_per_sync",
			Help: "Number of EndpointSlices changed on each Service sync",
		}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: subsystem, Name: "changes",
			Help: "Number of EndpointSlice changes",
		}, []string{"operation"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: subsystem, Name: "syncs",
			Help: "Number of EndpointSlice syncs",
		}, []string{"result"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	for _, h := range []*prometheus.Histogram{&m.added, &m.removed, &m.changedPerSync} {
		if *h, err = controller.Register(reg, *h); err != nil {
			return nil, err
		}
	}
	if m.changes, err = controller.Register(reg, m.changes); err != nil {
		return nil, err
	}
	if m.syncs, err = controller.Register(reg, m.syncs); err != nil {
		return nil, err
	}
	return m, nil
}
