package main

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/minictl/minictl/internal/benchdata"
)

// runApply is the server-side apply scenario: one Deployment is applied
// (created), then applied unchanged again and again by one client, as a
// controller or a GitOps loop does; the figures are the latencies of the
// unchanged applies, which write nothing.
func (h *harness) runApply(ctx context.Context, rep int) error {
	n := h.cfg.applies
	c, err := h.startCluster(ctx, clusterOptions{Profiling: h.profiling()})
	if err != nil {
		return err
	}
	defer c.stop()
	const ns = "bench"
	if err := createNamespace(ctx, c, ns); err != nil {
		return err
	}
	url := c.URL + "/apis/apps/v1/namespaces/" + ns + "/deployments/web?fieldManager=bench"
	body := []byte(benchdata.ApplyManifest)
	if _, err := expect(ctx, http.StatusCreated, http.MethodPatch, url, "application/apply-patch+yaml", body); err != nil {
		return err
	}
	for range 50 { // warm up connections and caches
		if _, err := expect(ctx, http.StatusOK, http.MethodPatch, url, "application/apply-patch+yaml", body); err != nil {
			return err
		}
	}
	prof := h.cpuProfile(ctx, c, rep, "apply", 2)
	lat := make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		if _, err := expect(ctx, http.StatusOK, http.MethodPatch, url, "application/apply-patch+yaml", body); err != nil {
			return err
		}
		lat = append(lat, time.Since(t))
	}
	prof.wait()
	slices.Sort(lat)
	h.res.addDuration("apply", "unchanged Deployment p50", percentile(lat, 50))
	h.res.addDuration("apply", "unchanged Deployment p99", percentile(lat, 99))
	return nil
}
