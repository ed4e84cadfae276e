package apiserver_test

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/minictl/minictl/internal/testenv"
)

// applyBenchManifest is the harness's apply scenario's Deployment: labels,
// two containers with ports, env and resources.
const applyBenchManifest = `apiVersion: apps/v1
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

// BenchmarkServeApplyUnchanged is the harness's apply scenario in
// process: one Deployment applied with server-side apply, then applied
// unchanged by one client, each answer a 200 that wrote nothing. Its
// allocations per apply are the whole process's; p50 and p99 are
// reported for a look, not to be compared across machines.
func BenchmarkServeApplyUnchanged(b *testing.B) {
	env := testenv.Start(b)
	createNamespace(b, env, "bench")
	url := env.URL + "/apis/apps/v1/namespaces/bench/deployments/web?fieldManager=bench"
	client := &http.Client{}
	defer client.CloseIdleConnections()
	apply := func(want int) {
		req, err := http.NewRequest(http.MethodPatch, url, bytes.NewReader([]byte(applyBenchManifest)))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", applyType)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			b.Fatalf("apply: %s, want %d", resp.Status, want)
		}
	}
	apply(http.StatusCreated)
	for range 20 {
		apply(http.StatusOK)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t := time.Now()
		apply(http.StatusOK)
		lat = append(lat, time.Since(t))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
