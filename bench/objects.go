package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minictl/minictl/internal/minitest"
)

// unscheduled is the schedulerName of pods no scheduler places: the
// create, list, watch and start-up scenarios measure the API server, not
// the scheduler and kubelets acting on what it stores.
const unscheduled = "bench-unscheduled"

// httpClient is shared by every request that is not a watch: enough idle
// connections for 32 concurrent clients to keep theirs.
var httpClient = &http.Client{Transport: &http.Transport{
	MaxIdleConns:        256,
	MaxIdleConnsPerHost: 256,
	IdleConnTimeout:     30 * time.Second,
	DisableCompression:  true,
}}

// do sends one request and reads the whole answer.
func do(ctx context.Context, method, url, contentType string, body []byte) (int, []byte, error) {
	return doWith(ctx, httpClient, method, url, contentType, body)
}

// doWith is do through hc.
func doWith(ctx context.Context, hc *http.Client, method, url, contentType string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// expect sends one request and fails unless the answer has code want.
func expect(ctx context.Context, want int, method, url, contentType string, body []byte) ([]byte, error) {
	code, data, err := do(ctx, method, url, contentType, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	if code != want {
		return nil, fmt.Errorf("%s %s: %d, want %d: %.300s", method, url, code, want, data)
	}
	return data, nil
}

func createNamespace(ctx context.Context, c *cluster, name string) error {
	_, err := expect(ctx, http.StatusCreated, http.MethodPost, c.URL+"/api/v1/namespaces", "application/json",
		fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, name))
	return err
}

// podSpec is the spec of every pod the scenarios create: one container
// with requests and limits, a port and an environment variable, about
// what a small real workload declares.
const podSpec = `"containers":[{"name":"app","image":"registry.example.com/bench/app:1.0",` +
	`"ports":[{"name":"http","containerPort":8080}],"env":[{"name":"MODE","value":"bench"}],` +
	`"resources":{"requests":{"cpu":"10m","memory":"16Mi"},"limits":{"cpu":"100m","memory":"64Mi"}}}]`

// podJSON is a pod named name in namespace ns; schedulerName "" leaves the
// default scheduler to place it.
func podJSON(ns, name, schedulerName string) []byte {
	sched := ""
	if schedulerName != "" {
		sched = fmt.Sprintf(`"schedulerName":%q,`, schedulerName)
	}
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q,`+
		`"labels":{"app":"bench","tier":"web"}},"spec":{%s%s}}`, name, ns, sched, podSpec)
}

func podsURL(c *cluster, ns string) string { return c.URL + "/api/v1/namespaces/" + ns + "/pods" }

// podBodies are the bodies of n pods named fmt.Sprintf(nameFmt, i), made
// before a measurement starts, as the raw puts' value is.
func podBodies(ns, nameFmt, schedulerName string, n int) [][]byte {
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = podJSON(ns, fmt.Sprintf(nameFmt, i), schedulerName)
	}
	return bodies
}

// createPods creates the pods of bodies in ns with clients concurrent
// clients, and returns each create's latency (send to last byte of the
// 201), in no particular order.
func createPods(ctx context.Context, c *cluster, ns string, bodies [][]byte, clients int) ([]time.Duration, error) {
	return createAt(ctx, podsURL(c, ns), bodies, clients)
}

// createAt POSTs bodies to url with clients concurrent clients, and
// returns each create's latency, in no particular order.
func createAt(ctx context.Context, url string, bodies [][]byte, clients int) ([]time.Duration, error) {
	return createAtWith(ctx, httpClient, url, bodies, clients)
}

// createAtWith is createAt through hc.
func createAtWith(ctx context.Context, hc *http.Client, url string, bodies [][]byte, clients int) ([]time.Duration, error) {
	n := len(bodies)
	lat := make([]time.Duration, n)
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
				start := time.Now()
				code, data, err := doWith(ctx, hc, http.MethodPost, url, "application/json", bodies[i])
				if err == nil && code != http.StatusCreated {
					err = fmt.Errorf("POST %s: %d, want %d: %.300s", url, code, http.StatusCreated, data)
				}
				if err != nil {
					errs <- err
					return
				}
				lat[i] = time.Since(start)
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	return lat, nil
}

// listMeta reads the resourceVersion of a list.
func listRV(ctx context.Context, url string) (string, error) {
	data, err := expect(ctx, http.StatusOK, http.MethodGet, url+"?limit=1", "", nil)
	if err != nil {
		return "", err
	}
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return "", err
	}
	return l.Metadata.ResourceVersion, nil
}

// countItems decodes a list and counts its items.
func countItems(data []byte) (int, error) {
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	err := json.Unmarshal(data, &l)
	return len(l.Items), err
}

// waitNodesReady waits until n nodes report Ready=True.
func waitNodesReady(ctx context.Context, c *cluster, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ready, err := minitest.ReadyNodes(c.URL)
		if err != nil {
			return err
		}
		if ready >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d nodes ready after %s", ready, n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitLeader waits until the controller manager holds its lease.
func waitLeader(ctx context.Context, c *cluster, timeout time.Duration) error {
	url := c.URL + "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"
	deadline := time.Now().Add(timeout)
	for {
		code, data, err := do(ctx, http.MethodGet, url, "", nil)
		if err != nil {
			return err
		}
		if code == http.StatusOK {
			var l struct {
				Spec struct {
					HolderIdentity string `json:"holderIdentity"`
				} `json:"spec"`
			}
			if json.Unmarshal(data, &l) == nil && l.Spec.HolderIdentity != "" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("controller manager not leading after %s", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
