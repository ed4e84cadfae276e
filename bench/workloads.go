package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// runJob is the Job scenario, on `minictl up --nodes N`: a Job of
// jobCompletions completions at jobParallelism, each pod a container that
// exits 0 at once (`sh -c "exit 0"`, which the simulated kubelet runs);
// the time from the Job's create until the pods have all succeeded, and
// until the Job is Complete.
func (h *harness) runJob(ctx context.Context, rep int) error {
	completions, parallelism := h.cfg.jobCompletions, h.cfg.jobParallelism
	const ns = "job"
	c, tr, err := h.startWithNodes(ctx, h.cfg.jobNodes, ns)
	if err != nil {
		return err
	}
	defer c.stop()
	defer tr.stop()

	jobsURL := c.URL + "/apis/batch/v1/namespaces/" + ns + "/jobs"
	job := fmt.Appendf(nil, `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"work"},`+
		`"spec":{"completions":%d,"parallelism":%d,"backoffLimit":0,`+
		`"template":{"metadata":{"labels":{"app":"work"}},"spec":{"restartPolicy":"Never",`+
		`"containers":[{"name":"work","image":"registry.example.com/bench/work:1.0","command":["sh","-c","exit 0"]}]}}}}`,
		completions, parallelism)
	succeeded := tr.when(func(t *podTracker) bool { return t.succeededLocked() >= completions })
	timeout := h.cfg.reconcileTimeout
	prof := h.cpuProfile(ctx, c, rep, "job", 10)
	start := time.Now()
	if _, err := expect(ctx, http.StatusCreated, http.MethodPost, jobsURL, "application/json", job); err != nil {
		return err
	}
	at, err := tr.wait(succeeded, timeout)
	if err != nil {
		return fmt.Errorf("%d pods succeeded: %w", completions, err)
	}
	h.res.addSeconds("job", fmt.Sprintf("Job of %d completions: pods Succeeded", completions), at.Sub(start))
	if at, err = waitJobComplete(ctx, jobsURL+"/work", start.Add(timeout)); err != nil {
		return err
	}
	h.res.addSeconds("job", fmt.Sprintf("Job of %d completions: Complete", completions), at.Sub(start))
	prof.wait()
	return nil
}

// waitJobComplete polls the Job at url until its Complete condition is
// True, and returns when it first saw it so.
func waitJobComplete(ctx context.Context, url string, deadline time.Time) (time.Time, error) {
	for {
		data, err := expect(ctx, http.StatusOK, http.MethodGet, url, "", nil)
		if err != nil {
			return time.Time{}, err
		}
		now := time.Now()
		var job struct {
			Status struct {
				Succeeded  int `json:"succeeded"`
				Failed     int `json:"failed"`
				Conditions []struct {
					Type, Status string
				} `json:"conditions"`
			} `json:"status"`
		}
		if err := json.Unmarshal(data, &job); err != nil {
			return time.Time{}, err
		}
		for _, c := range job.Status.Conditions {
			switch {
			case c.Type == "Complete" && c.Status == "True":
				return now, nil
			case c.Type == "Failed" && c.Status == "True":
				return time.Time{}, fmt.Errorf("the Job failed: %d succeeded, %d failed", job.Status.Succeeded, job.Status.Failed)
			}
		}
		if now.After(deadline) {
			return time.Time{}, fmt.Errorf("the Job not Complete in time: %d succeeded, %d failed", job.Status.Succeeded, job.Status.Failed)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runDaemonSet is the DaemonSet scenario, on `minictl up --nodes N`: a
// DaemonSet created once every node is Ready; the time until it has a
// pod on every node, and until they all run.
func (h *harness) runDaemonSet(ctx context.Context, rep int) error {
	nodes := h.cfg.dsNodes
	const ns = "ds"
	c, tr, err := h.startWithNodes(ctx, nodes, ns)
	if err != nil {
		return err
	}
	defer c.stop()
	defer tr.stop()

	dsURL := c.URL + "/apis/apps/v1/namespaces/" + ns + "/daemonsets"
	ds := fmt.Appendf(nil, `{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"agent"},`+
		`"spec":{"selector":{"matchLabels":{"app":"agent"}},`+
		`"template":{"metadata":{"labels":{"app":"agent"}},"spec":{%s}}}}`, podSpec)
	created := tr.when(func(t *podTracker) bool { return t.countLocked() >= nodes })
	running := tr.when(func(t *podTracker) bool { return t.runningLocked() >= nodes })
	timeout := h.cfg.reconcileTimeout
	prof := h.cpuProfile(ctx, c, rep, "daemonset", 5)
	start := time.Now()
	if _, err := expect(ctx, http.StatusCreated, http.MethodPost, dsURL, "application/json", ds); err != nil {
		return err
	}
	at, err := tr.wait(created, timeout)
	if err != nil {
		return fmt.Errorf("%d pods: %w", nodes, err)
	}
	h.res.addSeconds("daemonset", fmt.Sprintf("DaemonSet on %d nodes: pods created", nodes), at.Sub(start))
	if at, err = tr.wait(running, timeout); err != nil {
		return fmt.Errorf("%d pods running: %w", nodes, err)
	}
	h.res.addSeconds("daemonset", fmt.Sprintf("DaemonSet on %d nodes: all Running", nodes), at.Sub(start))
	prof.wait()
	return nil
}

// runStatefulSet is the StatefulSet scenario, on `minictl up --nodes N`:
// a Parallel StatefulSet of stsReplicas pods with one claim each, which the
// standard class provisions on the pod's node; the time from its create
// until every pod is Running.
func (h *harness) runStatefulSet(ctx context.Context, rep int) error {
	n := h.cfg.stsReplicas
	const ns = "statefulset"
	c, tr, err := h.startWithNodes(ctx, h.cfg.jobNodes, ns)
	if err != nil {
		return err
	}
	defer c.stop()
	defer tr.stop()

	setsURL := c.URL + "/apis/apps/v1/namespaces/" + ns + "/statefulsets"
	set := fmt.Appendf(nil, `{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"db"},`+
		`"spec":{"replicas":%d,"serviceName":"db","podManagementPolicy":"Parallel","selector":{"matchLabels":{"app":"db"}},`+
		`"template":{"metadata":{"labels":{"app":"db"}},"spec":{"containers":[{"name":"db","image":"registry.example.com/bench/db:1.0"}]}},`+
		`"volumeClaimTemplates":[{"metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}]}}`, n)
	running := tr.when(func(t *podTracker) bool { return t.runningLocked() >= n })
	prof := h.cpuProfile(ctx, c, rep, "statefulset", 10)
	start := time.Now()
	if _, err := expect(ctx, http.StatusCreated, http.MethodPost, setsURL, "application/json", set); err != nil {
		return err
	}
	at, err := tr.wait(running, h.cfg.reconcileTimeout)
	if err != nil {
		return fmt.Errorf("%d pods Running: %w", n, err)
	}
	h.res.addSeconds("statefulset", fmt.Sprintf("Parallel StatefulSet of %d pods with a claim each: all Running", n), at.Sub(start))
	prof.wait()
	return nil
}
