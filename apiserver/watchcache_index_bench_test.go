package apiserver

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
)

// BenchmarkWatchCacheNodeFanOut is one pod event (a status update of a pod
// bound to node-0042) handed to the watchers of a cluster of 5,000 nodes:
// every kubelet watches its own pods (fieldSelector=spec.nodeName=<node>),
// and a controller manager and a scheduler watch every pod. Only three of
// the watchers want the event; the cost per event is what finding them
// takes.
func BenchmarkWatchCacheNodeFanOut(b *testing.B) {
	const nodes = 5000
	ctx := context.Background()
	// A small buffer per watcher: what is measured is the dispatch, and
	// 5,000 default buffers would hold a lot of memory for nothing.
	c := newWatchCache(api.Pods, nil, watchCacheOptions{metrics: newMetrics(prometheus.NewRegistry()), buffer: 100})
	c.ready = true
	done := make(chan struct{})
	register := func(label, field string) {
		_, _, w, err := c.watch(ctx, 0, true, *benchFilter(b, "", label, field), false, false)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for range w.ch {
			}
			done <- struct{}{}
		}()
	}
	for i := range nodes {
		register("", fmt.Sprintf("spec.nodeName=node-%04d", i))
	}
	register("", "")                     // the controller manager's informer
	register("", "status.phase!=Failed") // a scheduler-like watch
	watchers := nodes + 2

	pod := benchPod("pod-1")
	pod.Spec.NodeName = "node-0042"
	const key = "/registry/core/pods/bench/pod-1"
	obj, err := c.wrap(api.Pods, key, pod, nil)
	if err != nil {
		b.Fatal(err)
	}
	rev := int64(1)
	b.ReportAllocs()
	for b.Loop() {
		rev++
		c.apply(&cachedEvent{key: key, typ: watch.Modified, rv: rev, obj: obj, prev: obj})
	}
	b.StopTimer()
	c.stopAll()
	for range watchers {
		<-done
	}
}
