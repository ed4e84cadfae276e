package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// The loadbalancer scenario: on `minictl up --nodes 3` with its simulated
// cloud and cloud controller manager, LoadBalancer Services are created
// one at a time, and each one's latency is from its create returning to a
// watch of Services seeing its status.loadBalancer.ingress: the service
// controller's informer, its queue, the finalizer, the cloud's
// EnsureLoadBalancer over HTTP and the status write, end to end.

func (h *harness) runLoadBalancer(ctx context.Context, rep int) error {
	n := h.cfg.loadBalancers
	c, err := h.startCluster(ctx, clusterOptions{Args: []string{"--nodes", "3"}, Profiling: h.profiling()})
	if err != nil {
		return err
	}
	defer c.stop()
	if err := waitNodesReady(ctx, c, 3, 60*time.Second); err != nil {
		return err
	}
	const ns = "bench"
	if err := createNamespace(ctx, c, ns); err != nil {
		return err
	}
	svcURL := c.URL + "/api/v1/namespaces/" + ns + "/services"

	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	addressed := make(chan string, n)
	watchErr := make(chan error, 1)
	started := make(chan struct{})
	go func() { watchErr <- watchAddresses(wctx, svcURL+"?watch=true", addressed, started) }()
	select {
	case <-started:
	case err := <-watchErr:
		return err
	}

	prof := h.cpuProfile(ctx, c, rep, "loadbalancer", 1)
	lat := make([]time.Duration, 0, n)
	for i := range n {
		name := fmt.Sprintf("lb-%04d", i)
		body := loadBalancerBody(name)
		if _, err := expect(ctx, http.StatusCreated, http.MethodPost, svcURL, "application/json", body); err != nil {
			return err
		}
		created := time.Now()
		timeout := time.NewTimer(30 * time.Second)
	wait:
		for {
			select {
			case got := <-addressed:
				if got == name {
					lat = append(lat, time.Since(created))
					timeout.Stop()
					break wait
				}
			case err := <-watchErr:
				timeout.Stop()
				return fmt.Errorf("watch of Services ended: %v", err)
			case <-timeout.C:
				return fmt.Errorf("service %s has no load balancer address after 30s", name)
			case <-ctx.Done():
				timeout.Stop()
				return ctx.Err()
			}
		}
	}
	prof.wait()
	slices.Sort(lat)
	h.res.addDuration("loadbalancer", "create to ingress IP p50", percentile(lat, 50))
	h.res.addDuration("loadbalancer", "create to ingress IP p99", percentile(lat, 99))
	h.res.addDuration("loadbalancer", "create to ingress IP max", percentile(lat, 100))
	return nil
}

// watchAddresses reads a watch of Services and sends the name of each one
// the first time it is seen with a load balancer address. started is
// closed once the watch's response has begun.
func watchAddresses(ctx context.Context, url string, addressed chan<- string, started chan<- struct{}) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("watch: %s", resp.Status)
	}
	close(started)
	seen := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	for sc.Scan() {
		var ev struct {
			Object struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Status struct {
					LoadBalancer struct {
						Ingress []json.RawMessage `json:"ingress"`
					} `json:"loadBalancer"`
				} `json:"status"`
			} `json:"object"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return err
		}
		name := ev.Object.Metadata.Name
		if len(ev.Object.Status.LoadBalancer.Ingress) > 0 && !seen[name] {
			seen[name] = true
			select {
			case addressed <- name:
			default: // a Service the scenario no longer waits for
			}
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	return ctx.Err()
}

// loadBalancerBody is a LoadBalancer Service with one port.
func loadBalancerBody(name string) []byte {
	data, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"type":     "LoadBalancer",
			"selector": map[string]any{"app": name},
			"ports":    []any{map[string]any{"name": "http", "port": 80, "targetPort": 8080}},
		},
	})
	if err != nil {
		panic(err) // maps of strings and numbers always encode
	}
	return data
}
