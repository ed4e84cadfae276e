package main

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/informer"
)

// runCreate is the create scenario and the ones that need its pods: on a
// fresh `minictl up` (defaults, 3 nodes), idle memory; then raw etcd
// transactions against its etcd and the same number of pod creates
// through the API; then lists of those pods, memory after the creates,
// and the bytes an informer spends per cached pod.
func (h *harness) runCreate(ctx context.Context, rep int) error {
	n, clients := h.cfg.createPods, 32
	c, err := h.startCluster(ctx, clusterOptions{Profiling: h.profiling()})
	if err != nil {
		return err
	}
	defer c.stop()

	// Idle: let the nodes register and the controllers start.
	time.Sleep(h.cfg.settle)
	rss, err := c.rssMB()
	if err != nil {
		return err
	}
	h.res.add("memory", "minictl up idle RSS", "MB", rss)

	const ns = "bench"
	if err := createNamespace(ctx, c, ns); err != nil {
		return err
	}
	etcd, err := c.etcd()
	if err != nil {
		return err
	}
	defer etcd.Close()
	size, err := storedPodSize(ctx, c, etcd, ns)
	if err != nil {
		return err
	}

	cpu, own := c.cpuTime(), harnessCPU()
	etcdLat, etcdElapsed, err := rawPuts(ctx, etcd, n, clients, size)
	if err != nil {
		return err
	}
	etcdCPU, etcdOwn := c.cpuTime()-cpu, harnessCPU()-own
	etcdRate := float64(n) / etcdElapsed.Seconds()
	h.res.add("create", "raw etcd txn puts", "puts/s", etcdRate)
	h.res.addDuration("create", "raw etcd txn p99", percentile(etcdLat, 99))

	bodies := podBodies(ns, "pod-%05d", unscheduled, n)
	prof := h.cpuProfile(ctx, c, rep, "create", max(2, n/2500))
	cpu, own = c.cpuTime(), harnessCPU()
	start := time.Now()
	lat, err := createPods(ctx, c, ns, bodies, clients)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	createCPU, createOwn := c.cpuTime()-cpu, harnessCPU()-own
	prof.wait()
	slices.Sort(lat)
	rate := float64(n) / elapsed.Seconds()
	h.res.add("create", "pods created", "pods/s", rate)
	h.res.add("create", "minictl / raw etcd", "%", 100*rate/etcdRate)
	h.res.addDuration("create", "create p50", percentile(lat, 50))
	h.res.addDuration("create", "create p99", percentile(lat, 99))
	h.res.add("create", "stored pod size", "bytes", float64(size))
	h.res.add("create", "minictl CPU per raw etcd put", "µs", float64(etcdCPU.Microseconds())/float64(n))
	h.res.add("create", "minictl CPU per pod create", "µs", float64(createCPU.Microseconds())/float64(n))
	h.res.add("create", "load generator CPU per raw etcd put", "µs", float64(etcdOwn.Microseconds())/float64(n))
	h.res.add("create", "load generator CPU per pod create", "µs", float64(createOwn.Microseconds())/float64(n))
	h.allocProfile(ctx, c, rep, "create")

	if err := h.runList(ctx, c, ns, n); err != nil {
		return err
	}

	time.Sleep(h.cfg.settle)
	if rss, err = c.rssMB(); err != nil {
		return err
	}
	h.res.add("memory", fmt.Sprintf("RSS after %d creates", n), "MB", rss)

	per, err := informerBytesPerPod(ctx, c, ns, n)
	if err != nil {
		return err
	}
	h.res.add("memory", "informer bytes per cached pod", "bytes", per)
	return nil
}

// storedPodSize creates one pod and reads how many bytes etcd holds for
// it, then deletes it: the raw puts write values of that size.
func storedPodSize(ctx context.Context, c *cluster, etcd *clientv3.Client, ns string) (int, error) {
	if _, err := expect(ctx, http.StatusCreated, http.MethodPost, podsURL(c, ns), "application/json", podJSON(ns, "probe", unscheduled)); err != nil {
		return 0, err
	}
	resp, err := etcd.Get(ctx, "/registry/core/pods/"+ns+"/probe")
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) != 1 {
		return 0, fmt.Errorf("probe pod not found in etcd")
	}
	if _, err := expect(ctx, http.StatusOK, http.MethodDelete, podsURL(c, ns)+"/probe", "", nil); err != nil {
		return 0, err
	}
	return len(resp.Kvs[0].Value), nil
}

// rawPuts writes n new keys of size bytes with clients concurrent
// goroutines over one etcd client, each put a transaction "create if
// absent" as minictl's store writes a create.
func rawPuts(ctx context.Context, etcd *clientv3.Client, n, clients, size int) ([]time.Duration, time.Duration, error) {
	value := string(make([]byte, size))
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				key := fmt.Sprintf("/bench/raw/%06d", i)
				t := time.Now()
				resp, err := etcd.Txn(ctx).
					If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
					Then(clientv3.OpPut(key, value)).
					Commit()
				if err == nil && !resp.Succeeded {
					err = fmt.Errorf("key %s exists", key)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				lat[i] = time.Since(t)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, 0, err
	}
	// Leave etcd as it was, bar the revisions.
	if _, err := etcd.Delete(ctx, "/bench/raw/", clientv3.WithPrefix()); err != nil {
		return nil, 0, err
	}
	slices.Sort(lat)
	return lat, elapsed, nil
}

// runList times lists of the n pods of ns: from the watch cache
// (resourceVersion=0) and consistent (no resourceVersion: etcd's current
// revision). Each repetition's figure is the median of several lists.
func (h *harness) runList(ctx context.Context, c *cluster, ns string, n int) error {
	for _, v := range []struct {
		name, query string
	}{
		{"from watch cache (resourceVersion=0)", "?resourceVersion=0"},
		{"consistent (from etcd)", ""},
	} {
		url := podsURL(c, ns) + v.query
		// A warm-up list, which also checks the count. resourceVersion=0
		// may be served by a cache a few events behind the last create:
		// wait until it has them all.
		for deadline := time.Now().Add(10 * time.Second); ; {
			data, err := expect(ctx, http.StatusOK, http.MethodGet, url, "", nil)
			if err != nil {
				return err
			}
			got, err := countItems(data)
			if err != nil {
				return err
			}
			if got == n {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("list %s: %d items, want %d", url, got, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
		var lat []time.Duration
		for range h.cfg.lists {
			start := time.Now()
			if _, err := expect(ctx, http.StatusOK, http.MethodGet, url, "", nil); err != nil {
				return err
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		h.res.addDuration("list", fmt.Sprintf("%d pods %s", n, v.name), percentile(lat, 50))
	}
	return nil
}

// informerBytesPerPod runs an informer on ns in this process and measures
// the heap it holds once synced, per pod.
func informerBytesPerPod(ctx context.Context, c *cluster, ns string, n int) (float64, error) {
	rc, err := client.New(&client.Config{Server: c.URL, UserAgent: "minictl-bench"})
	if err != nil {
		return 0, err
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{Namespace: ns})
	inf := informer.For[*corev1.Pod](factory)
	ictx, cancel := context.WithCancel(ctx)
	factory.Start(ictx)
	synced := informer.WaitForCacheSync(ictx, inf.HasSynced)
	if !synced {
		cancel()
		factory.Shutdown()
		return 0, fmt.Errorf("informer did not sync")
	}
	got := len(inf.GetIndexer().ListKeys())
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(inf)
	cancel()
	factory.Shutdown()
	if got != n {
		return 0, fmt.Errorf("informer holds %d pods, want %d", got, n)
	}
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n), nil
}
