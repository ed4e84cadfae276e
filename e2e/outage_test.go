package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/etcdtest"
	"github.com/minictl/minictl/internal/minitest"
)

// TestUpRidesOutAnEtcdOutage runs a whole cluster (`minictl up`: API
// server, controller manager, scheduler, kubelets) on an etcd that it
// pauses, then kills and starts again on its data. During the outage
// /readyz fails and requests end with 503 or 504 within the request
// timeout; the process stays up. Afterwards, without a restart, /readyz
// passes, the nodes are Ready, the controller manager has taken its lease
// again and its controllers act: a scaled Deployment gets its pods.
func TestUpRidesOutAnEtcdOutage(t *testing.T) {
	const requestTimeout = 3 * time.Second
	e := etcdtest.Start(t)
	addr := minitest.FreeAddr(t)
	p := minitest.Start(t, false, "up", "--listen", addr, "--etcd-endpoints", e.URL,
		"--data-dir", t.TempDir(), "--secure-listen", "127.0.0.1:0",
		"--controller-manager-address", "127.0.0.1:0", "--fast", "--nodes", "2",
		"--request-timeout", requestTimeout.String())
	c := &cluster{Process: p, t: t, URL: "http://" + addr}
	t.Cleanup(c.stop)
	p.WaitReady(t, c.URL, clusterTimeout)
	p.WaitNodesReady(t, c.URL, 2, clusterTimeout)
	rc := c.client(t)
	ctx := context.Background()
	deps, pods := client.For[*appsv1.Deployment](rc), client.For[*corev1.Pod](rc)
	if _, err := deps.Create(ctx, deploymentObj("web", 2, "nginx:1.27")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "2 pods running", func() (bool, string) {
		l := livePods(t, pods, "web")
		return len(l) == 2 && runningReady(l) == 2, fmt.Sprintf("%d pods, %d running", len(l), runningReady(l))
	})

	e.Pause()
	paused := time.Now()
	for {
		resp, err := http.Get(c.URL + "/readyz")
		if err != nil {
			t.Fatalf("/readyz while etcd is paused: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusInternalServerError {
			break
		}
		if time.Since(paused) > 5*time.Second {
			t.Fatalf("/readyz still %d 5s after etcd was paused", resp.StatusCode)
		}
		time.Sleep(100 * time.Millisecond) // polling interval, not synchronisation
	}
	start := time.Now()
	code, status := c.do("POST", "/api/v1/namespaces/default/configmaps", "application/json", `{"metadata":{"name":"during"}}`)
	if code != http.StatusServiceUnavailable && code != http.StatusGatewayTimeout {
		t.Errorf("create while etcd is paused: %d %v, want 503 or 504", code, status)
	}
	if took := time.Since(start); took > requestTimeout+time.Second {
		t.Errorf("create while etcd is paused took %s, more than the %s request timeout", took, requestTimeout)
	}
	// Long enough for the leader's renewals to fail past its deadline and
	// the kubelets' heartbeats to go stale.
	time.Sleep(5 * time.Second)
	e.Kill()
	e.Restart()
	e.Resume()

	p.WaitReady(t, c.URL, clusterTimeout)
	p.WaitNodesReady(t, c.URL, 2, clusterTimeout)
	if _, err := deps.Patch(ctx, "default", "web", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "3 pods running after the outage", func() (bool, string) {
		l := livePods(t, pods, "web")
		return len(l) == 3 && runningReady(l) == 3, fmt.Sprintf("%d pods, %d running", len(l), runningReady(l))
	})
	if n := strings.Count(p.Stderr.String(), "became leader"); n < 2 {
		t.Errorf("the controller manager became leader %d times, want a second time after the outage cost it the lease:\n%s", n, p.Stderr)
	}
}
