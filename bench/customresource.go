package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/minictl/minictl/internal/benchdata"
)

// The custom resource scenarios. Their objects are BenchPods of the
// group bench.minictl.io: a pod as the API server stores it (spec and
// status, its defaults included) under another kind, served through a
// CustomResourceDefinition whose schema names every field of it, so a
// custom object weighs what a pod weighs and is validated field by field.

const crGroup = benchdata.Group

// crdJSON is a namespaced definition of kind, plural plural, whose one
// version v1 has schema.
func crdJSON(plural, kind string, schema map[string]any) []byte {
	data, err := json.Marshal(benchdata.CRD(plural, kind, schema))
	if err != nil {
		panic(err) // maps of strings and schemas always encode
	}
	return data
}

func crdsURL(c *cluster) string {
	return c.URL + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
}

func customURL(c *cluster, ns, plural string) string {
	return c.URL + "/apis/" + crGroup + "/v1/namespaces/" + ns + "/" + plural
}

// storedPodShape creates one pod of the create scenario, reads back its
// spec and status as the API server stored them, and deletes it.
func storedPodShape(ctx context.Context, c *cluster, ns string) (spec, status map[string]any, err error) {
	if _, err := expect(ctx, http.StatusCreated, http.MethodPost, podsURL(c, ns), "application/json", podJSON(ns, "shape", unscheduled)); err != nil {
		return nil, nil, err
	}
	data, err := expect(ctx, http.StatusOK, http.MethodGet, podsURL(c, ns)+"/shape", "", nil)
	if err != nil {
		return nil, nil, err
	}
	if _, err := expect(ctx, http.StatusOK, http.MethodDelete, podsURL(c, ns)+"/shape", "", nil); err != nil {
		return nil, nil, err
	}
	var pod struct {
		Spec   map[string]any `json:"spec"`
		Status map[string]any `json:"status"`
	}
	if err := json.Unmarshal(data, &pod); err != nil {
		return nil, nil, err
	}
	return pod.Spec, pod.Status, nil
}

// benchPodJSON is a BenchPod named name with the pods' labels, spec and
// status.
func benchPodJSON(ns, name string, spec, status map[string]any) []byte {
	data, err := json.Marshal(map[string]any{
		"apiVersion": crGroup + "/v1", "kind": "BenchPod",
		"metadata": map[string]any{"name": name, "namespace": ns,
			"labels": map[string]any{"app": "bench", "tier": "web"}},
		"spec": spec, "status": status,
	})
	if err != nil {
		panic(err) // decoded JSON always encodes
	}
	return data
}

// benchPodBodies are n BenchPods named fmt.Sprintf(nameFmt, i).
func benchPodBodies(ns, nameFmt string, spec, status map[string]any, n int) [][]byte {
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = benchPodJSON(ns, fmt.Sprintf(nameFmt, i), spec, status)
	}
	return bodies
}

// runCRCreate is the custom object create scenario: on a fresh `minictl
// up`, a BenchPod definition; then pods and BenchPods created alternately
// (pods, custom objects, custom objects, pods; half of n each time, 32
// clients), so that both rates see the same machine and the same etcd
// history. The ratio is of the two rates in this run.
func (h *harness) runCRCreate(ctx context.Context, rep int) error {
	n, clients := h.cfg.createPods, 32
	c, err := h.startCluster(ctx, clusterOptions{Profiling: h.profiling()})
	if err != nil {
		return err
	}
	defer c.stop()
	const ns = "bench"
	if err := createNamespace(ctx, c, ns); err != nil {
		return err
	}
	spec, status, err := storedPodShape(ctx, c, ns)
	if err != nil {
		return err
	}
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"spec": benchdata.SchemaOf(spec), "status": benchdata.SchemaOf(status),
	}}
	if _, err := expect(ctx, http.StatusCreated, http.MethodPost, crdsURL(c), "application/json", crdJSON("benchpods", "BenchPod", schema)); err != nil {
		return err
	}
	if err := waitServed(ctx, customURL(c, ns, "benchpods"), 30*time.Second); err != nil {
		return err
	}
	etcd, err := c.etcd()
	if err != nil {
		return err
	}
	defer etcd.Close()
	podSize, crSize, err := storedSizes(ctx, c, etcd, ns, spec, status)
	if err != nil {
		return err
	}

	half := n / 2
	pods := [][][]byte{podBodies(ns, "pod-a-%05d", unscheduled, half), podBodies(ns, "pod-b-%05d", unscheduled, half)}
	crs := [][][]byte{benchPodBodies(ns, "cr-a-%05d", spec, status, half), benchPodBodies(ns, "cr-b-%05d", spec, status, half)}
	prof := h.cpuProfile(ctx, c, rep, "crcreate", max(2, n/2500))
	var podTime, crTime time.Duration
	var podLat, crLat []time.Duration
	for i, step := range []struct {
		custom bool
		bodies [][]byte
	}{{false, pods[0]}, {true, crs[0]}, {true, crs[1]}, {false, pods[1]}} {
		url := podsURL(c, ns)
		if step.custom {
			url = customURL(c, ns, "benchpods")
		}
		start := time.Now()
		lat, err := createAt(ctx, url, step.bodies, clients)
		if err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
		if step.custom {
			crTime += time.Since(start)
			crLat = append(crLat, lat...)
		} else {
			podTime += time.Since(start)
			podLat = append(podLat, lat...)
		}
	}
	prof.wait()
	slices.Sort(podLat)
	slices.Sort(crLat)
	podRate := float64(2*half) / podTime.Seconds()
	crRate := float64(2*half) / crTime.Seconds()
	h.res.add("crcreate", "pods created", "pods/s", podRate)
	h.res.add("crcreate", "custom objects created", "objects/s", crRate)
	h.res.add("crcreate", "custom objects / pods", "%", 100*crRate/podRate)
	h.res.addDuration("crcreate", "custom object create p50", percentile(crLat, 50))
	h.res.addDuration("crcreate", "custom object create p99", percentile(crLat, 99))
	h.res.addDuration("crcreate", "pod create p99", percentile(podLat, 99))
	h.res.add("crcreate", "stored pod size", "bytes", float64(podSize))
	h.res.add("crcreate", "stored custom object size", "bytes", float64(crSize))
	h.allocProfile(ctx, c, rep, "crcreate")
	return nil
}

// storedSizes creates one pod and one BenchPod and reads how many bytes
// etcd holds for each, then deletes them.
func storedSizes(ctx context.Context, c *cluster, etcd *clientv3.Client, ns string, spec, status map[string]any) (pod, cr int, err error) {
	for _, o := range []struct {
		url, key string
		body     []byte
		size     *int
	}{
		{podsURL(c, ns), "/registry/core/pods/" + ns + "/probe", podJSON(ns, "probe", unscheduled), &pod},
		{customURL(c, ns, "benchpods"), "", benchPodJSON(ns, "probe", spec, status), &cr},
	} {
		if _, err := expect(ctx, http.StatusCreated, http.MethodPost, o.url, "application/json", o.body); err != nil {
			return 0, 0, err
		}
		resp, err := etcd.Get(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return 0, 0, err
		}
		key := o.key
		if key == "" {
			for _, kv := range resp.Kvs {
				if k := string(kv.Key); strings.Contains(k, "benchpods") && strings.HasSuffix(k, "/"+ns+"/probe") {
					key = k
				}
			}
		}
		got, err := etcd.Get(ctx, key)
		if err != nil {
			return 0, 0, err
		}
		if len(got.Kvs) != 1 {
			return 0, 0, fmt.Errorf("probe %s not found in etcd", o.url)
		}
		*o.size = len(got.Kvs[0].Value)
		if _, err := expect(ctx, http.StatusOK, http.MethodDelete, o.url+"/probe", "", nil); err != nil {
			return 0, 0, err
		}
	}
	return pod, cr, nil
}

// waitServed waits until a list of url answers 200: the definition's
// resource is served.
func waitServed(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		code, _, err := do(ctx, http.MethodGet, url, "", nil)
		if err != nil {
			return err
		}
		if code == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not served after %s: %d", url, timeout, code)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runCRDEstablish is the definition scenario: definitions created one
// after another on one `minictl up`, each followed at once by creates of
// one of its objects, retried every millisecond until one is 201. The
// figure is the time from the definition's 201 reaching the client to
// the object's.
func (h *harness) runCRDEstablish(ctx context.Context, rep int) error {
	c, err := h.startCluster(ctx, clusterOptions{Profiling: h.profiling()})
	if err != nil {
		return err
	}
	defer c.stop()
	const ns = "bench"
	if err := createNamespace(ctx, c, ns); err != nil {
		return err
	}
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"spec": map[string]any{"type": "object", "properties": map[string]any{
			"replicas": map[string]any{"type": "integer"},
			"image":    map[string]any{"type": "string"},
		}},
	}}
	var lat []time.Duration
	for i := range h.cfg.crds {
		plural, kind := fmt.Sprintf("things%03d", i), fmt.Sprintf("Thing%03d", i)
		obj := fmt.Appendf(nil, `{"apiVersion":%q,"kind":%q,"metadata":{"name":"first"},"spec":{"replicas":1,"image":"app:1.0"}}`,
			crGroup+"/v1", kind)
		if _, err := expect(ctx, http.StatusCreated, http.MethodPost, crdsURL(c), "application/json", crdJSON(plural, kind, schema)); err != nil {
			return err
		}
		start := time.Now()
		url := customURL(c, ns, plural)
		for {
			code, body, err := do(ctx, http.MethodPost, url, "application/json", obj)
			if err != nil {
				return err
			}
			if code == http.StatusCreated {
				break
			}
			if code != http.StatusNotFound {
				return fmt.Errorf("POST %s: %d before the definition is served: %.300s", url, code, body)
			}
			if time.Since(start) > 30*time.Second {
				return fmt.Errorf("POST %s: still 404 30s after the definition was created", url)
			}
			time.Sleep(time.Millisecond)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	h.res.addDuration("crdestablish", "definition to first object p50", percentile(lat, 50))
	h.res.addDuration("crdestablish", "definition to first object p99", percentile(lat, 99))
	return nil
}
