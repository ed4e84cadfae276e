package cluster

import (
	"time"

	"github.com/minictl/minictl/controllers"
)

// FastControllerManager scales the controller manager's timings down, as
// `minictl up --fast` does: leader election and the controllers' periods
// in seconds rather than minutes, so that what takes a real cluster
// minutes (a node going Unknown, a failed Job's retries) plays out in
// seconds. A timing whose flag name is in set was chosen by the user and
// is kept.
func FastControllerManager(cm *controllers.Config, set map[string]bool) {
	fast := func(name string, apply func()) {
		if !set[name] {
			apply()
		}
	}
	fast("leader-elect-lease-duration", func() { cm.LeaseDuration = 3 * time.Second })
	fast("leader-elect-renew-deadline", func() { cm.RenewDeadline = 2 * time.Second })
	fast("leader-elect-retry-period", func() { cm.RetryPeriod = 500 * time.Millisecond })
	fast("node-monitor-period", func() { cm.Timings.NodeMonitorPeriod = 500 * time.Millisecond })
	fast("node-monitor-grace-period", func() { cm.Timings.NodeMonitorGracePeriod = 5 * time.Second })
	fast("node-startup-grace-period", func() { cm.Timings.NodeStartupGracePeriod = 10 * time.Second })
	fast("node-eviction-rate", func() { cm.Timings.NodeEvictionRate = 1 })
	fast("horizontal-pod-autoscaler-sync-period", func() { cm.Timings.HPASyncPeriod = 2 * time.Second })
	cm.Timings.PodGCPeriod = 2 * time.Second
	cm.Timings.PodGCQuarantine = 2 * time.Second
	cm.Timings.JobBackoffBase = time.Second // a failed Job's retries in seconds, not minutes
	cm.Timings.JobBackoffMax = 36 * time.Second
}

// FastKubelet scales the simulated kubelets' timings down, as `minictl up
// --fast` does: heartbeats and status every second (an unchanged status
// posted every 30s), a container restart
// back-off of 1s doubling to 10s. A timing whose flag name is in set is
// kept.
func FastKubelet(k *KubeletConfig, set map[string]bool) {
	if !set["node-lease-renew-interval"] {
		k.HeartbeatInterval = time.Second
	}
	if !set["node-status-update-frequency"] {
		k.StatusUpdateInterval = time.Second
		if !set["node-status-report-frequency"] {
			k.NodeStatusReportFrequency = 30 * time.Second
		}
	}
	k.BackOffBase, k.MaxBackOff = time.Second, 10*time.Second
	k.VolumeMountTimeout = 10 * time.Second
}

// FastBindTimeout is the scheduler's volume binding timeout under --fast.
const FastBindTimeout = 20 * time.Second
