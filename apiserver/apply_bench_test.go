package apiserver_test

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/minictl/minictl/internal/benchdata"
	"github.com/minictl/minictl/internal/testenv"
)

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
		req, err := http.NewRequest(http.MethodPatch, url, bytes.NewReader([]byte(benchdata.ApplyManifest)))
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
