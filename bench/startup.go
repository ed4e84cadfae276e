package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
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
	// The API server stores a pod in protobuf, as kube-apiserver does.
	_, _, msg, err := api.ProtobufObject(resp.Kvs[0].Value)
	if err != nil {
		return fmt.Errorf("template pod: %w", err)
	}
	var pod corev1.Pod
	if err := api.UnmarshalProtobuf(msg, &pod); err != nil {
		return fmt.Errorf("template pod: %w", err)
	}
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
					p := pod.DeepCopy()
					p.Name = fmt.Sprintf("stored-%06d", i)
					p.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
					v, err := api.MarshalProtobufAs("v1", "Pod", p)
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					ops = append(ops, clientv3.OpPut(prefix+p.Name, string(v)))
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
