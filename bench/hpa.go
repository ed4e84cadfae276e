package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// hpaSyncPeriod is the autoscaler's sync period in the hpa scenario:
// long enough that the patches of every autoscaler fit between two
// passes, so that one pass sees them all.
const hpaSyncPeriod = 10 * time.Second

// runHPA is the autoscaler scenario, on `minictl up --fast --nodes N`
// (metrics scraped every 2s) with the autoscaler passing every 10s:
// hpas Deployments of one pod requesting 100m CPU, idle at a tenth of
// it, and one autoscaling/v2 autoscaler at 50% on each (1 to 2 replicas).
// Once every autoscaler has read its pod's 10%, the figures are the
// controller's own horizontal_pod_autoscaler_controller_last_pass_duration_seconds,
// the wall time of one pass over all of them, from its read of the pod
// metrics to its last status write:
//
//   - a steady pass: every autoscaler reads its scale and its metrics and
//     has nothing to change;
//   - a pass in which every autoscaler rescales: right after a pass ends,
//     every autoscaler's target is patched to 5%, so the next pass writes
//     200 scales (replicas 2), 200 statuses and 200 events. The scenario
//     checks that this pass did scale every one of them.
func (h *harness) runHPA(ctx context.Context, rep int) error {
	n := h.cfg.hpas
	const ns = "hpa"
	cmAddr, err := freeAddr()
	if err != nil {
		return err
	}
	c, err := h.startCluster(ctx, clusterOptions{Profiling: h.profiling(), Args: []string{"--fast", "--nodes", fmt.Sprint(h.cfg.hpaNodes),
		"--horizontal-pod-autoscaler-sync-period", hpaSyncPeriod.String(), "--controller-manager-address", cmAddr}})
	if err != nil {
		return err
	}
	defer c.stop()
	if err := waitNodesReady(ctx, c, h.cfg.hpaNodes, 60*time.Second); err != nil {
		return err
	}
	if err := waitLeader(ctx, c, 60*time.Second); err != nil {
		return err
	}
	if err := createNamespace(ctx, c, ns); err != nil {
		return err
	}
	tr, err := trackPods(ctx, c, ns)
	if err != nil {
		return err
	}
	defer tr.stop()

	deployments, hpas := make([][]byte, n), make([][]byte, n)
	for i := range n {
		name := fmt.Sprintf("web-%d", i)
		deployments[i] = fmt.Appendf(nil, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q},`+
			`"spec":{"replicas":1,"selector":{"matchLabels":{"app":%q}},"template":{"metadata":{"labels":{"app":%q}},`+
			`"spec":{"containers":[{"name":"app","image":"registry.example.com/bench/app:1.0","resources":{"requests":{"cpu":"100m"}}}]}}}}`,
			name, name, name)
		hpas[i] = fmt.Appendf(nil, `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":%q},`+
			`"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":%q},"minReplicas":1,"maxReplicas":2,`+
			`"metrics":[%s]}}`, name, name, cpuTarget(50))
	}
	timeout := h.cfg.reconcileTimeout
	running := tr.when(func(t *podTracker) bool { return t.runningLocked() >= n })
	if _, err := createAt(ctx, c.URL+"/apis/apps/v1/namespaces/"+ns+"/deployments", deployments, 16); err != nil {
		return err
	}
	if _, err := tr.wait(running, timeout); err != nil {
		return fmt.Errorf("%d pods running: %w", n, err)
	}
	hpaURL := c.URL + "/apis/autoscaling/v2/namespaces/" + ns + "/horizontalpodautoscalers"
	if _, err := createAt(ctx, hpaURL, hpas, 16); err != nil {
		return err
	}
	if err := waitAutoscalers(ctx, hpaURL, n, timeout, func(s hpaStatus) bool { return s.utilization() == 10 }); err != nil {
		return fmt.Errorf("every autoscaler reading 10%%: %w", err)
	}

	cm := &passWatch{metricsURL: "http://" + cmAddr + "/metrics"}
	if err := cm.next(ctx, 3*hpaSyncPeriod); err != nil { // a pass that began before the last autoscaler read 10%
		return err
	}
	steady, err := cm.nextDuration(ctx, 3*hpaSyncPeriod)
	if err != nil {
		return err
	}
	h.res.addSeconds("hpa", fmt.Sprintf("one pass over %d autoscalers, steady", n), steady)

	if err := cm.next(ctx, 3*hpaSyncPeriod); err != nil {
		return err
	}
	patchStart := time.Now()
	patch := fmt.Appendf(nil, `{"spec":{"metrics":[%s]}}`, cpuTarget(5))
	if err := patchAll(ctx, hpaURL, n, patch, 16); err != nil {
		return err
	}
	if took := time.Since(patchStart); took > hpaSyncPeriod/2 {
		return fmt.Errorf("patching %d autoscalers took %s, too long to be sure one pass sees them all", n, took.Round(time.Millisecond))
	}
	prof := h.cpuProfile(ctx, c, rep, "hpa", int(hpaSyncPeriod/time.Second)+2) // covers the next pass
	upBefore := cm.scaleUps
	rescaling, err := cm.nextDuration(ctx, 3*hpaSyncPeriod)
	if err != nil {
		return err
	}
	if ups := cm.scaleUps - upBefore; ups != float64(n) {
		return fmt.Errorf("the pass after the patch scaled up %v of %d autoscalers", ups, n)
	}
	if err := waitAutoscalers(ctx, hpaURL, n, timeout, func(s hpaStatus) bool { return s.DesiredReplicas == 2 }); err != nil {
		return fmt.Errorf("every autoscaler's desiredReplicas 2: %w", err)
	}
	h.res.addSeconds("hpa", fmt.Sprintf("one pass over %d autoscalers, each rescaling", n), rescaling)
	if mean, err := cm.meanReconcile(ctx, "scale_up"); err == nil && mean > 0 {
		h.res.addDuration("hpa", "one rescaling autoscaler's sync, mean", mean)
	}
	prof.wait()
	return nil
}

// cpuTarget is a metric spec of CPU at pct% of the pods' requests.
func cpuTarget(pct int) string {
	return fmt.Sprintf(`{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":%d}}}`, pct)
}

// patchAll merge-patches the autoscalers web-0 … web-(n-1) at url with
// body, clients at a time.
func patchAll(ctx context.Context, url string, n int, body []byte, clients int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				u := fmt.Sprintf("%s/web-%d", url, i)
				if _, err := expect(ctx, http.StatusOK, http.MethodPatch, u, "application/merge-patch+json", body); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

type hpaStatus struct {
	DesiredReplicas int32 `json:"desiredReplicas"`
	CurrentMetrics  []struct {
		Resource *struct {
			Current struct {
				AverageUtilization *int32 `json:"averageUtilization"`
			} `json:"current"`
		} `json:"resource"`
	} `json:"currentMetrics"`
}

func (s hpaStatus) utilization() int32 {
	if len(s.CurrentMetrics) == 0 || s.CurrentMetrics[0].Resource == nil || s.CurrentMetrics[0].Resource.Current.AverageUtilization == nil {
		return -1
	}
	return *s.CurrentMetrics[0].Resource.Current.AverageUtilization
}

// waitAutoscalers lists the autoscalers at url until n of them satisfy
// cond, or the timeout passes (0: look once).
func waitAutoscalers(ctx context.Context, url string, n int, timeout time.Duration, cond func(hpaStatus) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		data, err := expect(ctx, http.StatusOK, http.MethodGet, url, "", nil)
		if err != nil {
			return err
		}
		var list struct {
			Items []struct {
				Status hpaStatus `json:"status"`
			} `json:"items"`
		}
		if err := json.Unmarshal(data, &list); err != nil {
			return err
		}
		ok := 0
		for _, it := range list.Items {
			if cond(it.Status) {
				ok++
			}
		}
		if ok >= n {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%d of %d", ok, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// passWatch follows the autoscaler's passes on the controller manager's
// /metrics: a pass has ended when its reconciliations_total has grown
// and last_pass_duration_seconds changed, which the controller sets
// after the pass's last reconcile.
type passWatch struct {
	metricsURL string
	count      float64
	duration   float64
	scaleUps   float64 // reconciliations_total{action="scale_up"} at the last pass's end
	seen       bool
}

const (
	hpaReconciliations  = "horizontal_pod_autoscaler_controller_reconciliations_total"
	hpaLastPass         = "horizontal_pod_autoscaler_controller_last_pass_duration_seconds"
	hpaReconcileSeconds = "horizontal_pod_autoscaler_controller_reconciliation_duration_seconds"
)

// read takes the two series now.
func (w *passWatch) read(ctx context.Context) (count, duration, scaleUps float64, err error) {
	_, body, err := do(ctx, http.MethodGet, w.metricsURL, "", nil)
	if err != nil {
		return 0, 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, perr := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if perr != nil {
			continue
		}
		base, labels, _ := strings.Cut(name, "{")
		switch base {
		case hpaReconciliations:
			count += v
			if strings.Contains(labels, `action="scale_up"`) {
				scaleUps += v
			}
		case hpaLastPass:
			duration = v
		}
	}
	return count, duration, scaleUps, sc.Err()
}

// meanReconcile is the mean of reconciliation_duration_seconds over the
// reconciles that ended in action, every one so far.
func (w *passWatch) meanReconcile(ctx context.Context, action string) (time.Duration, error) {
	_, body, err := do(ctx, http.MethodGet, w.metricsURL, "", nil)
	if err != nil {
		return 0, err
	}
	var sum, count float64
	label := `action="` + action + `"`
	for line := range strings.Lines(string(body)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !strings.Contains(name, label) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, hpaReconcileSeconds+"_sum{"):
			sum += v
		case strings.HasPrefix(name, hpaReconcileSeconds+"_count{"):
			count += v
		}
	}
	if count == 0 {
		return 0, nil
	}
	return time.Duration(sum / count * float64(time.Second)), nil
}

// next waits for the end of the next pass.
func (w *passWatch) next(ctx context.Context, timeout time.Duration) error {
	_, err := w.nextDuration(ctx, timeout)
	return err
}

// nextDuration waits for the end of the next pass and returns how long
// the controller says it took.
func (w *passWatch) nextDuration(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	if !w.seen {
		count, duration, scaleUps, err := w.read(ctx)
		if err != nil {
			return 0, err
		}
		w.count, w.duration, w.scaleUps, w.seen = count, duration, scaleUps, true
	}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond): // each read gathers the whole registry
		}
		count, duration, scaleUps, err := w.read(ctx)
		if err != nil {
			return 0, err
		}
		if count > w.count && duration != w.duration {
			w.count, w.duration, w.scaleUps = count, duration, scaleUps
			return time.Duration(duration * float64(time.Second)), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no autoscaler pass ended within %s", timeout)
		}
	}
}
