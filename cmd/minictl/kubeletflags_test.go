package main

import (
	"context"
	"testing"
	"time"
)

// The report frequency defaults as kube's kubelet defaults
// nodeStatusReportFrequency, and --fast scales it as the other timings.
func TestNodeStatusReportFrequencyDefaults(t *testing.T) {
	for _, c := range []struct {
		args []string
		fast bool
		want time.Duration
	}{
		{nil, false, 5 * time.Minute},
		{[]string{"--node-status-update-frequency", "20s"}, false, 20 * time.Second},
		{[]string{"--node-status-update-frequency", "20s", "--node-status-report-frequency", "1m"}, false, time.Minute},
		{[]string{"--node-status-report-frequency", "2m"}, false, 2 * time.Minute},
		{nil, true, 30 * time.Second},
		{[]string{"--node-status-update-frequency", "2s"}, true, 2 * time.Second},
		{[]string{"--node-status-report-frequency", "3m"}, true, 3 * time.Minute},
	} {
		fs := newFlagSet("kubelet")
		var cf clusterFlags
		cf.bindKubelet(fs)
		if err := parseFlags(context.Background(), fs, c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		cf.kubeletDefaults(setFlags(fs))
		if c.fast {
			cf.fastKubelet(setFlags(fs))
		}
		if cf.reportFrequency != c.want {
			t.Errorf("%v (fast %v): report frequency %v, want %v", c.args, c.fast, cf.reportFrequency, c.want)
		}
	}
}
