package apiserver_test

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/minictl/minictl/internal/testenv"
)

// BenchmarkServeListPodsTable is the list the web view sends for its pods
// table: 2,000 running pods as kubectl's Table, metadata per row, answered
// whole from the watch cache (resourceVersion=0), through the real HTTP
// handler. Each pod carries what a running pod does: a node, a status with
// conditions and a container status, and two field managers.
func BenchmarkServeListPodsTable(b *testing.B) {
	env := benchRunningPods(b, 2000)
	benchList(b, env, "application/json;as=Table;v=v1;g=meta.k8s.io")
}

// BenchmarkServeListPods is the same list as whole pods: in JSON, as
// kubectl get -o json and curl ask for it, and in protobuf, as an
// informer's relist does.
func BenchmarkServeListPods(b *testing.B) {
	env := benchRunningPods(b, 2000)
	for _, accept := range []struct{ name, header string }{
		{"json", "application/json"},
		{"protobuf", "application/vnd.kubernetes.protobuf"},
	} {
		b.Run(accept.name, func(b *testing.B) { benchList(b, env, accept.header) })
	}
}

// benchRunningPods starts a server holding n running pods in namespace
// bench.
func benchRunningPods(b *testing.B, pods int) *testenv.Env {
	env := testenv.Start(b)
	createNamespace(b, env, "bench")
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				name := fmt.Sprintf("pod-%07d", i)
				if r := do(b, env, http.MethodPost, "/api/v1/namespaces/bench/pods", "application/json", benchPodBody(int64(i))); r.code != http.StatusCreated {
					b.Errorf("create %s: %d %s", name, r.code, truncate(r.body))
					continue
				}
				if r := do(b, env, http.MethodPatch, "/api/v1/namespaces/bench/pods/"+name+"/status?fieldManager=kubelet",
					"application/merge-patch+json", benchRunningStatus(i)); r.code != http.StatusOK {
					b.Errorf("status %s: %d %s", name, r.code, truncate(r.body))
				}
			}
		})
	}
	for i := range pods {
		work <- i
	}
	close(work)
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return env
}

// benchList lists every pod of env, 500 a page from the watch cache
// (resourceVersion=0, which answers whole), in the form accept asks for.
func benchList(b *testing.B, env *testenv.Env, accept string) {
	req, err := http.NewRequest(http.MethodGet, env.URL+"/api/v1/pods?limit=500&resourceVersion=0", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	client := env.Client()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("list: %s, %v", resp.Status, err)
		}
		b.SetBytes(n)
	}
}

// benchRunningStatus is the status a kubelet reports for the i-th bench
// pod once its container runs.
func benchRunningStatus(i int) []byte {
	return fmt.Appendf(nil, `{"status":{"phase":"Running","hostIP":"10.1.0.%d","podIP":"10.244.%d.%d",`+
		`"podIPs":[{"ip":"10.244.%d.%d"}],"startTime":"2026-01-02T03:04:05Z","qosClass":"Burstable",`+
		`"conditions":[{"type":"PodReadyToStartContainers","status":"True","lastTransitionTime":"2026-01-02T03:04:06Z"},`+
		`{"type":"Initialized","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z"},`+
		`{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T03:04:07Z"},`+
		`{"type":"ContainersReady","status":"True","lastTransitionTime":"2026-01-02T03:04:07Z"},`+
		`{"type":"PodScheduled","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z"}],`+
		`"containerStatuses":[{"name":"app","ready":true,"started":true,"restartCount":0,`+
		`"image":"registry.example.com/bench/app:1.0","imageID":"registry.example.com/bench/app@sha256:0123456789abcdef",`+
		`"containerID":"containerd://%064x","state":{"running":{"startedAt":"2026-01-02T03:04:06Z"}}}]}}`,
		i%20, i/250, i%250, i/250, i%250, i)
}
