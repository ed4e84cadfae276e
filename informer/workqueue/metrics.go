package workqueue

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/minictl/minictl/clock"
)

// queueMetrics are one queue's Prometheus metrics, all labelled
// name=<queue name>, with client-go's metric names:
//
//	workqueue_depth                               gauge: items queued
//	workqueue_adds_total                          counter: items added (not deduplicated away)
//	workqueue_queue_duration_seconds              histogram: time from Add to Get
//	workqueue_work_duration_seconds               histogram: time from Get to Done
//	workqueue_retries_total                       counter: AddAfter calls (AddRateLimited uses it)
//	workqueue_unfinished_work_seconds             gauge: summed age of the items being processed
//	workqueue_longest_running_processor_seconds   gauge: age of the oldest item being processed
//
// The two "processing" gauges are computed when scraped. queueMetrics is a
// prometheus.Collector, registered and unregistered as one.
//
// Every method is a no-op on a nil *queueMetrics, which is what a queue
// without a registerer holds.
type queueMetrics[T comparable] struct {
	clock      clock.Clock
	registerer prometheus.Registerer

	depthGauge    prometheus.Gauge
	adds          prometheus.Counter
	queueLatency  prometheus.Histogram
	workDuration  prometheus.Histogram
	retries       prometheus.Counter
	unfinished    prometheus.GaugeFunc
	longestRunner prometheus.GaugeFunc

	// mu guards addedAt and startedAt. It is taken after the queue's lock,
	// never before.
	mu sync.Mutex
	// addedAt holds, for every dirty item, when it was added.
	addedAt map[T]time.Time
	// startedAt holds, for every processing item, when Get handed it out.
	startedAt map[T]time.Time
}

func newQueueMetrics[T comparable](name string, clk clock.Clock, reg prometheus.Registerer) *queueMetrics[T] {
	m := &queueMetrics[T]{
		clock:      clk,
		registerer: reg,
		addedAt:    map[T]time.Time{},
		startedAt:  map[T]time.Time{},
	}
	labels := prometheus.Labels{"name": name}
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12) // 10ns .. 1000s
	m.depthGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "workqueue", Name: "depth", ConstLabels: labels,
		Help: "Number of items waiting in the queue.",
	})
	m.adds = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "workqueue", Name: "adds_total", ConstLabels: labels,
		Help: "Number of adds handled by the queue.",
	})
	m.queueLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "workqueue", Name: "queue_duration_seconds", ConstLabels: labels, Buckets: buckets,
		Help: "Seconds an item waits in the queue before a worker gets it.",
	})
	m.workDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "workqueue", Name: "work_duration_seconds", ConstLabels: labels, Buckets: buckets,
		Help: "Seconds a worker takes to process an item.",
	})
	m.retries = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "workqueue", Name: "retries_total", ConstLabels: labels,
		Help: "Number of delayed (retried) adds handled by the queue.",
	})
	m.unfinished = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "workqueue", Name: "unfinished_work_seconds", ConstLabels: labels,
		Help: "Seconds of work in progress not yet Done, summed over the items being processed. " +
			"A value that keeps growing means stuck workers.",
	}, m.unfinishedSeconds)
	m.longestRunner = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "workqueue", Name: "longest_running_processor_seconds", ConstLabels: labels,
		Help: "Seconds the longest-running item being processed has been running.",
	}, m.longestSeconds)
	return m
}

func (m *queueMetrics[T]) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.depthGauge, m.adds, m.queueLatency, m.workDuration,
		m.retries, m.unfinished, m.longestRunner}
}

// Describe implements prometheus.Collector.
func (m *queueMetrics[T]) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *queueMetrics[T]) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *queueMetrics[T]) unregister() {
	if m == nil {
		return
	}
	m.registerer.Unregister(m)
}

func (m *queueMetrics[T]) add(item T) {
	if m == nil {
		return
	}
	m.adds.Inc()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.addedAt[item]; !ok {
		m.addedAt[item] = m.clock.Now()
	}
}

func (m *queueMetrics[T]) depth(n int) {
	if m == nil {
		return
	}
	m.depthGauge.Set(float64(n))
}

func (m *queueMetrics[T]) get(item T) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	if t, ok := m.addedAt[item]; ok {
		m.queueLatency.Observe(now.Sub(t).Seconds())
		delete(m.addedAt, item)
	}
	m.startedAt[item] = now
}

func (m *queueMetrics[T]) done(item T) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.startedAt[item]; ok {
		m.workDuration.Observe(m.clock.Now().Sub(t).Seconds())
		delete(m.startedAt, item)
	}
}

func (m *queueMetrics[T]) retry() {
	if m == nil {
		return
	}
	m.retries.Inc()
}

func (m *queueMetrics[T]) unfinishedSeconds() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	var total float64
	for _, t := range m.startedAt {
		total += now.Sub(t).Seconds()
	}
	return total
}

func (m *queueMetrics[T]) longestSeconds() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	var longest float64
	for _, t := range m.startedAt {
		longest = max(longest, now.Sub(t).Seconds())
	}
	return longest
}
