package store

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// etcdWatchStreams reads etcd's own count of open watch streams (one per
// gRPC Watch call it serves), from the process's default registry, where
// the embedded etcd registers its metrics.
func etcdWatchStreams(t *testing.T) float64 {
	t.Helper()
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "etcd_debugging_mvcc_watch_stream_total" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("etcd_debugging_mvcc_watch_stream_total is not registered")
	return 0
}

func waitStreams(t *testing.T, want float64) {
	t.Helper()
	deadline := time.Now().Add(watchDeadline)
	for {
		got := etcdWatchStreams(t)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd has %v watch streams, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Not parallel: it counts every watch stream of the process.
func TestEveryWatchHasAStreamOfItsOwn(t *testing.T) {
	s := openStore(t, Config{})
	base := etcdWatchStreams(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	for range 3 {
		s.Watch(ctx, "/same/", 0)
	}
	// Three watches of one prefix, three streams: a stream that stalls
	// stalls one watch, not every watch of the Store.
	waitStreams(t, base+3)
	cancel()
	waitStreams(t, base)
}

func TestRequestProgressReachesEveryWatchOnThePrefix(t *testing.T) {
	t.Parallel()
	// No periodic progress within the test: what arrives was asked for.
	s, err := Open(testCtx(t), Config{DataDir: t.TempDir(), CompactionInterval: -1, ProgressNotifyInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })

	start := mustCreate(t, s, "/a/0", "v")
	a1 := s.Watch(testCtx(t), "/a/", start+1)
	a2 := s.Watch(testCtx(t), "/a/", start+1)
	other := mustCreate(t, s, "/b/0", "v") // moves the revision, not /a/

	for i, ch := range []<-chan WatchEvent{a1, a2} {
		// A watch still being set up may miss a request; ask until each
		// watch has heard.
		deadline := time.After(watchDeadline)
		ask := time.NewTicker(100 * time.Millisecond)
		for heard := false; !heard; {
			if err := s.RequestProgress(testCtx(t), "/a/"); err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-ch:
				if !ev.Progress {
					t.Fatalf("watch %d: got %s, want a progress notification", i, describe(ev))
				}
				if ev.Revision < other {
					t.Fatalf("watch %d: progress at %d, want >= %d", i, ev.Revision, other)
				}
				heard = true
			case <-ask.C:
			case <-deadline:
				t.Fatalf("watch %d: no progress notification within %s", i, watchDeadline)
			}
		}
		ask.Stop()
	}
	if err := s.RequestProgress(testCtx(t), "/none/"); err != nil {
		t.Errorf("progress on a prefix nobody watches: %v", err)
	}
}
