package apiserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/internal/benchdata"
	"github.com/minictl/minictl/internal/testenv"
)

// BenchmarkServeCreateCustom is BenchmarkServeCreate's create of a custom
// object the size of its pod, as the harness's crcreate scenario makes
// them: a BenchPod whose spec and status are the pod's as the server
// stored it (defaults included), served by a definition whose schema
// names every one of their fields, so that each create is decoded into
// unstructured, pruned, defaulted and validated field by field. No one
// watches BenchPods. Read its figures beside BenchmarkServeCreate's.
func BenchmarkServeCreateCustom(b *testing.B) {
	env := testenv.Start(b)
	createNamespace(b, env, "bench")
	shape := create[corev1.Pod](b, env, "/api/v1/namespaces/bench/pods", json.RawMessage(benchPodBody(0)))
	var stored struct {
		Spec   map[string]any `json:"spec"`
		Status map[string]any `json:"status"`
	}
	do(b, env, http.MethodGet, podPath("bench", shape.Name), "", nil).want(b, http.StatusOK).into(b, &stored)
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"spec": benchdata.SchemaOf(stored.Spec), "status": benchdata.SchemaOf(stored.Status),
	}}
	createCRD(b, env, benchdata.CRD("benchpods", "BenchPod", schema))
	url := env.URL + "/apis/bench.minictl.io/v1/namespaces/bench/benchpods"
	waitServing(b, env, url)
	spec, status := []byte(mustJSON(b, stored.Spec)), []byte(mustJSON(b, stored.Status))
	benchCreates(b, url, func(n int64) []byte {
		return slices.Concat(fmt.Appendf(nil, `{"apiVersion":"bench.minictl.io/v1","kind":"BenchPod","metadata":{"name":"cr-%07d",`+
			`"namespace":"bench","labels":{"app":"bench"}},"spec":`, n), spec, []byte(`,"status":`), status, []byte(`}`))
	})
}

// waitServing waits until a list of url answers 200: the definition's
// resource is served by the server's current snapshot.
func waitServing(t testing.TB, env *testenv.Env, url string) {
	t.Helper()
	eventuallyWithin(t, 30*time.Second, url+" served", func() (bool, string) {
		resp, err := http.Get(url)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}
