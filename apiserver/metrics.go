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

	// The bound on requests in flight (inflight.go, flowschema.go).
	inflight     *prometheus.GaugeVec   // request_kind: requests holding a seat
	dropped      *prometheus.CounterVec // request_kind: requests refused
	flowInflight *prometheus.GaugeVec   // priority_level, flow_schema: requests holding a seat
	flowInqueue  *prometheus.GaugeVec   // priority_level, flow_schema: requests waiting for one
	flowServed   *prometheus.CounterVec // priority_level, flow_schema: requests given a seat
	flowRejected *prometheus.CounterVec // flow_schema, priority_level, reason

	// Admission webhooks (webhook_admission.go).
	webhookLatency    *prometheus.HistogramVec // name, type, operation, rejected
	webhookRejections *prometheus.CounterVec   // name, type, operation, error_type, rejection_code

	// Conversion webhooks (conversion_webhook.go).
	conversionLatency *prometheus.HistogramVec // crd_name, from_version, to_version, succeeded

	// Authentication and authorization (auth.go).
	authnAttempts  *prometheus.CounterVec // result: success, failure, error
	authzDecisions *prometheus.CounterVec // decision: allowed, denied
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		authnAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authentication_attempts",
			Help: "Authentication attempts on the secure port, by result (success, failure: a credential that proves nothing, error).",
		}, []string{"result"}),
		authzDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_authorization_decisions_total",
			Help: "Authorization decisions, by decision (allowed, denied).",
		}, []string{"decision"}),
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
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_current_inflight_requests",
			Help: "Requests running now and holding a seat, by kind (readOnly, mutating); watches and health probes take none.",
		}, []string{"request_kind"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_dropped_requests_total",
			Help: "Requests refused with 429 TooManyRequests, by kind (readOnly, mutating).",
		}, []string{"request_kind"}),
		flowInflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_flowcontrol_current_inflight_requests",
			Help: "Requests running now and holding a seat, by priority level and flow schema.",
		}, []string{"priority_level", "flow_schema"}),
		flowInqueue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_flowcontrol_current_inqueue_requests",
			Help: "Requests waiting for a seat, by priority level and flow schema.",
		}, []string{"priority_level", "flow_schema"}),
		flowServed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_flowcontrol_dispatched_requests_total",
			Help: "Requests given a seat and served, by priority level and flow schema.",
		}, []string{"priority_level", "flow_schema"}),
		flowRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_flowcontrol_rejected_requests_total",
			Help: "Requests refused with 429 TooManyRequests, by flow schema, priority level and reason (concurrency-limit, queue-full, time-out, cancelled).",
		}, []string{"flow_schema", "priority_level", "reason"}),
		webhookLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_admission_webhook_admission_duration_seconds",
			Help:    "Admission webhook latency by webhook name, type (admit or validating), operation and whether it rejected the request.",
			Buckets: []float64{0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10, 25},
		}, []string{"name", "type", "operation", "rejected"}),
		webhookRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_admission_webhook_rejection_count",
			Help: "Requests admission webhooks rejected, by webhook name, type, operation, error type (calling_webhook_error, apiserver_internal_error, no_error) and code.",
		}, []string{"name", "type", "operation", "error_type", "rejection_code"}),
		conversionLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_crd_conversion_webhook_duration_seconds",
			Help:    "Conversion webhook latency by definition, the version converted from and to, and whether it succeeded.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"crd_name", "from_version", "to_version", "succeeded"}),
	}
	reg.MustRegister(m.requests, m.latency, m.watchers, m.etcdWatches, m.storageLatency, m.cacheEvents, m.closedSlow,
		m.authnAttempts, m.authzDecisions, m.inflight, m.dropped, m.flowInflight, m.flowInqueue, m.flowServed, m.flowRejected,
		m.webhookLatency, m.webhookRejections, m.conversionLatency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
