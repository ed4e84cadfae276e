package apiserver

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/store"
)

// TestWaitFresh waits, on a clock the test moves, for revisions a real
// etcd reaches and for one it never does: a wait ends when the cache sees
// the revision; meanwhile it asks etcd for progress at once and again
// every progressRetry; after freshTimeout it answers Timeout (504).
func TestWaitFresh(t *testing.T) {
	ctx := t.Context()
	st := openTestStore(t)
	counted := &progressCounter{Store: st}
	clk := clock.NewFake(time.Unix(0, 0))
	c := runWatchCache(t, api.ConfigMaps, counted, watchCacheOptions{clock: clk})
	cm := &corev1.ConfigMap{}
	cm.Name, cm.Namespace = "a", "default"
	setTypeMeta(api.ConfigMaps, cm)
	data, err := encodeForStorage(api.ConfigMaps, cm)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := st.Create(ctx, registryPrefix(api.ConfigMaps)+"default/a", data)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.waitFresh(ctx, rev); err != nil {
		t.Fatalf("wait for a write's revision %d: %v", rev, err)
	}

	asked := counted.requests.Load()
	never := rev + 1000
	done := make(chan error, 1)
	go func() { done <- c.waitFresh(ctx, never) }()
	waitUntil(t, "the first progress request", func() bool { return counted.requests.Load() == asked+1 })
	for i := range int64(3) {
		clk.Step(progressRetry)
		waitUntil(t, "a progress request after progressRetry", func() bool { return counted.requests.Load() == asked+2+i })
	}
	select {
	case err := <-done:
		t.Fatalf("wait for revision %d returned before freshTimeout: %v", never, err)
	default:
	}
	clk.Step(freshTimeout - 3*progressRetry)
	select {
	case err := <-done:
		if !apierrors.IsTimeout(err) {
			t.Fatalf("wait for revision %d = %v, want a Timeout", never, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("wait for revision %d did not end at freshTimeout", never)
	}
}

// progressCounter is a real store that counts the progress requests made
// through it.
type progressCounter struct {
	*store.Store
	requests atomic.Int64
}

func (p *progressCounter) RequestProgress(ctx context.Context, prefix string) error {
	p.requests.Add(1)
	return p.Store.RequestProgress(ctx, prefix)
}

// waitUntil polls cond until it holds, failing the test after 10s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// openTestStore opens a store on an embedded etcd of its own, closed when
// the test ends.
func openTestStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir(), ClientURL: "http://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// runWatchCache starts a watch cache of res on st, running until the test
// ends, and returns it once it has first filled. opts.metrics is set here.
func runWatchCache(t *testing.T, res *api.Resource, st Storage, opts watchCacheOptions) *watchCache {
	t.Helper()
	opts.metrics = newMetrics(prometheus.NewRegistry())
	c := newWatchCache(res, st, opts)
	ctx, stop := context.WithCancel(t.Context())
	var running sync.WaitGroup
	running.Go(func() { c.run(ctx) })
	t.Cleanup(func() {
		stop()
		running.Wait()
	})
	if err := c.waitFresh(t.Context(), 0); err != nil {
		t.Fatalf("wait for the first fill: %v", err)
	}
	return c
}
