package apiserver_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/minictl/minictl/internal/testenv"
)

// benchPodBody is the pod the create benchmarks send, named by n.
func benchPodBody(n int64) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod-%07d","namespace":"bench",`+
		`"labels":{"app":"bench"}},"spec":{"schedulerName":"bench-unscheduled","containers":[{"name":"app",`+
		`"image":"registry.example.com/bench/app:1.0","ports":[{"name":"http","containerPort":8080}],`+
		`"env":[{"name":"MODE","value":"bench"}],"resources":{"requests":{"cpu":"10m","memory":"16Mi"},`+
		`"limits":{"cpu":"100m","memory":"64Mi"}}}]}}`, n)
}

// BenchmarkServeCreate is a pod create through the whole server, as
// `make bench` sends it: HTTP on loopback, decode, admission, validation,
// the etcd transaction on a real embedded etcd, the watch cache, and two
// protobuf watchers on pods (the controller manager's and the scheduler's
// informers, here only reading the bytes). 32 clients create at once.
// Its allocations per create are the whole process's, etcd's included:
// what the garbage collector has to keep up with.
func BenchmarkServeCreate(b *testing.B) {
	env := testenv.Start(b)
	createNamespace(b, env, "bench")
	ctx, cancel := context.WithCancel(context.Background())
	var watchers sync.WaitGroup
	defer func() {
		cancel()
		watchers.Wait()
	}()
	for range 2 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+"/api/v1/pods?watch=true", nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Accept", "application/vnd.kubernetes.protobuf;stream=watch")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("watch: %s", resp.Status)
		}
		watchers.Go(func() {
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
		})
	}
	benchCreates(b, env.URL+"/api/v1/namespaces/bench/pods", benchPodBody)
}

// benchCreates posts body(n) to url for n = 1, 2, ... from 32 clients at
// once (16 per CPU on 2 CPUs), each answer a 201.
func benchCreates(b *testing.B, url string, body func(n int64) []byte) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	b.SetParallelism(16) // 32 clients on 2 CPUs
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(url, "application/json", bytes.NewReader(body(next.Add(1))))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				b.Errorf("create: %s", resp.Status)
				return
			}
		}
	})
}
