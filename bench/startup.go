package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// runStartup is the start-up scenario: `minictl up` (defaults) to the
// first 200 on /readyz on an empty data dir; then, with stored pods
// written into its etcd, a restart on that data dir, timed the same way.
// The pods are written straight into etcd (100 per transaction, each a
// copy of a pod the API server stored, with its own name and uid): the
// figure is the restart, not how they got there.
func (h *harness) runStartup(ctx context.Context, rep int) error {
	n := h.cfg.storedPods
	c, err := h.startCluster(ctx, clusterOptions{})
	if err != nil {
		return err
	}
	dir := c.DataDir
	defer func() {
		if c != nil { // nil when the restart failed
			c.stop()
		}
	}()
	h.res.addDuration("start-up", "ready, empty data dir", c.Ready)

	const ns = "stored"
	if err := createNamespace(ctx, c, ns); err != nil {
		return err
	}
	if _, err := expect(ctx, http.StatusCreated, http.MethodPost, podsURL(c, ns), "application/json",
		podJSON(ns, "template-pod", unscheduled)); err != nil {
		return err
	}
	etcd, err := c.etcd()
	if err != nil {
		return err
	}
	err = bulkPods(ctx, etcd, ns, "template-pod", n)
	etcd.Close()
	if err != nil {
		return err
	}
	c.keepData()
	c.stop()

	c, err = h.startCluster(ctx, clusterOptions{DataDir: dir, Profiling: h.profiling()})
	if err != nil {
		return err
	}
	c.ownDir = true // removed on stop, with the restarted cluster
	h.res.addDuration("start-up", fmt.Sprintf("ready, %d stored pods", n), c.Ready)

	data, err := expect(ctx, http.StatusOK, http.MethodGet, podsURL(c, ns)+"?resourceVersion=0", "", nil)
	if err != nil {
		return err
	}
	got, err := countItems(data)
	if err != nil {
		return err
	}
	if got != n+1 {
		return fmt.Errorf("after restart: %d pods in the cache, want %d", got, n+1)
	}
	if rss, err := c.rssMB(); err == nil {
		h.res.add("memory", fmt.Sprintf("RSS just after ready with %d stored pods", n), "MB", rss)
	}
	return nil
}

// bulkPods writes n copies of the stored pod tmpl of ns, named
// stored-<i>, each with its own uid.
func bulkPods(ctx context.Context, etcd *clientv3.Client, ns, tmpl string, n int) error {
	prefix := "/registry/core/pods/" + ns + "/"
	resp, err := etcd.Get(ctx, prefix+tmpl)
	if err != nil {
		return err
	}
	if len(resp.Kvs) != 1 {
		return fmt.Errorf("template pod %s not in etcd", tmpl)
	}
	value := resp.Kvs[0].Value
	uidAt := bytes.Index(value, []byte(`"uid":"`))
	if uidAt < 0 {
		return fmt.Errorf("template pod has no uid")
	}
	uidAt += len(`"uid":"`)
	uidEnd := uidAt + bytes.IndexByte(value[uidAt:], '"')
	const batch = 100
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range 4 {
		wg.Go(func() {
			for {
				from := int(next.Add(batch)) - batch
				if from >= n {
					return
				}
				ops := make([]clientv3.Op, 0, batch)
				for i := from; i < min(from+batch, n); i++ {
					name := fmt.Sprintf("stored-%06d", i)
					v := make([]byte, 0, len(value)+16)
					v = append(v, value[:uidAt]...)
					v = fmt.Appendf(v, "00000000-0000-4000-8000-%012d", i)
					v = append(v, value[uidEnd:]...)
					v = bytes.Replace(v, []byte(`"name":"`+tmpl+`"`), []byte(`"name":"`+name+`"`), 1)
					ops = append(ops, clientv3.OpPut(prefix+name, string(v)))
				}
				if _, err := etcd.Txn(ctx).Then(ops...).Commit(); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	return nil
}
