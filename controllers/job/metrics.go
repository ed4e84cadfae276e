package job

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/minictl/minictl/controllers/internal/controller"
)

// metrics are the controller's own, under kube's job_controller_* names.
type metrics struct {
	syncDuration     prometheus.Histogram
	finished         *prometheus.CounterVec
	podsFinished     *prometheus.CounterVec
	failuresByPolicy *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "job_controller", Name: "job_sync_duration_seconds",
			Help:    "The time it took to sync a job",
			Buckets: prometheus.ExponentialBuckets(0.004, 2, 15),
		}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "job_controller", Name: "jobs_finished_total",
			Help: "The number of finished jobs",
		}, []string{"completion_mode", "result", "reason"}),
		podsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "job_controller", Name: "job_pods_finished_total",
			Help: "The number of finished Pods that are fully tracked",
		}, []string{"completion_mode", "result"}),
		failuresByPolicy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "job_controller", Name: "pod_failures_handled_by_failure_policy_total",
			Help: "The number of failed Pods handled by failure policy with respect to the failure policy action applied based on the matched rule.",
		}, []string{"action"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.syncDuration, err = controller.Register(reg, m.syncDuration); err != nil {
		return nil, err
	}
	if m.finished, err = controller.Register(reg, m.finished); err != nil {
		return nil, err
	}
	if m.podsFinished, err = controller.Register(reg, m.podsFinished); err != nil {
		return nil, err
	}
	if m.failuresByPolicy, err = controller.Register(reg, m.failuresByPolicy); err != nil {
		return nil, err
	}
	return m, nil
}
