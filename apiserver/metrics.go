package apiserver

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the API server's Prometheus series, named as kube-apiserver
// names them where it has an equivalent.
type metrics struct {
	requests       *prometheus.CounterVec   // verb, resource, subresource, code
	latency        *prometheus.HistogramVec // verb, resource
	watchers       *prometheus.GaugeVec     // resource: open HTTP watches
	etcdWatches    *prometheus.GaugeVec     // resource: watches held on etcd
	storageLatency *prometheus.HistogramVec // operation, resource
	cacheEvents    *prometheus.CounterVec   // resource: events the watch cache received
	closedSlow     *prometheus.CounterVec   // resource: watchers closed for not keeping up
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Requests by verb, resource, subresource and HTTP code.",
		}, []string{"verb", "resource", "subresource", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Request latency by verb and resource (watches count until their first byte).",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}, []string{"verb", "resource"}),
		watchers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_registered_watchers",
			Help: "Open HTTP watches by resource.",
		}, []string{"resource"}),
		etcdWatches: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "minictl_etcd_watches",
			Help: "Watches the API server holds on etcd, by resource (one per resource, whatever the number of clients).",
		}, []string{"resource"}),
		storageLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "etcd_request_duration_seconds",
			Help:    "Storage request latency by operation and resource.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1},
		}, []string{"operation", "type"}),
		cacheEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_watch_cache_events_received_total",
			Help: "Events the watch cache received from etcd, by resource.",
		}, []string{"resource"}),
		closedSlow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_terminated_watchers_total",
			Help: "Watchers closed because they did not keep up, by resource.",
		}, []string{"resource"}),
	}
	reg.MustRegister(m.requests, m.latency, m.watchers, m.etcdWatches, m.storageLatency, m.cacheEvents, m.closedSlow,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
