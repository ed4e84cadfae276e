package main

import (
	"context"
	"net/http"
	"slices"
	"time"
)

// applyManifest is the Deployment the apply scenario applies: what a
// GitOps tool or `kubectl apply --server-side` sends for a small web
// service, labels, two containers with ports, env and resources.
const applyManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, tier: front}
spec:
  replicas: 0
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web, tier: front}
    spec:
      containers:
      - name: web
        image: registry.example.com/bench/web:1.0
        ports:
        - {name: http, containerPort: 8080, protocol: TCP}
        - {name: dns, containerPort: 53, protocol: UDP}
        env:
        - {name: MODE, value: bench}
        resources:
          requests: {cpu: 10m, memory: 16Mi}
          limits: {cpu: 100m, memory: 64Mi}
      - name: sidecar
        image: registry.example.com/bench/sidecar:1.0
`

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
	body := []byte(applyManifest)
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
