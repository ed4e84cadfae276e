package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// The services scenario: Services created by 32 clients, each given a
// cluster IP (an IPAddress written in the Service's own transaction), and
// pods created by 32 clients in the same run and cluster, alternating
// (pods, Services, Services, pods) so that neither has the fresher etcd.
// What allocation costs a create is the ratio of the two rates.

func (h *harness) runServices(ctx context.Context, rep int) error {
	n, clients := h.cfg.services, 32
	c, err := h.startCluster(ctx, clusterOptions{Profiling: h.profiling()})
	if err != nil {
		return err
	}
	defer c.stop()
	const ns = "bench"
	if err := createNamespace(ctx, c, ns); err != nil {
		return err
	}
	half := n / 2
	svcURL := c.URL + "/api/v1/namespaces/" + ns + "/services"
	bodies := [][][]byte{
		podBodies(ns, "pod-a-%05d", unscheduled, half), serviceBodies("svc-a-%05d", half),
		serviceBodies("svc-b-%05d", half), podBodies(ns, "pod-b-%05d", unscheduled, half),
	}
	prof := h.cpuProfile(ctx, c, rep, "services", 2)
	var podTime, svcTime time.Duration
	var svcLat []time.Duration
	for i, services := range []bool{false, true, true, false} {
		url := podsURL(c, ns)
		if services {
			url = svcURL
		}
		start := time.Now()
		lat, err := createAt(ctx, url, bodies[i], clients)
		if err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
		if services {
			svcTime += time.Since(start)
			svcLat = append(svcLat, lat...)
		} else {
			podTime += time.Since(start)
		}
	}
	prof.wait()
	slices.Sort(svcLat)
	podRate := float64(2*half) / podTime.Seconds()
	svcRate := float64(2*half) / svcTime.Seconds()
	h.res.add("services", "pods created", "pods/s", podRate)
	h.res.add("services", "Services created", "services/s", svcRate)
	h.res.add("services", "Services / pods", "%", 100*svcRate/podRate)
	h.res.addDuration("services", "Service create p50", percentile(svcLat, 50))
	h.res.addDuration("services", "Service create p99", percentile(svcLat, 99))
	return nil
}

// serviceBodies are n ClusterIP Services, each with a port and selector,
// whose cluster IP the server picks.
func serviceBodies(nameFmt string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		name := fmt.Sprintf(nameFmt, i)
		data, err := json.Marshal(map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"selector": map[string]any{"app": name},
				"ports":    []any{map[string]any{"name": "http", "port": 80, "targetPort": 8080}},
			},
		})
		if err != nil {
			panic(err) // maps of strings and numbers always encode
		}
		out[i] = data
	}
	return out
}
