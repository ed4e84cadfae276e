package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/minictl/minictl/internal/minitest"
)

// TestWatchPromise runs watchers that, like an informer, resume from the
// last resourceVersion they saw, while writers write and `minictl up` is
// restarted on its data dir (stopped, or killed with SIGKILL) and etcd is
// compacted every second. Checked against the writers' ledger, each
// watcher receives every change exactly once and in order, or is told 410
// Gone and lists again, and then its list holds the state as of the list's
// resourceVersion.
func TestWatchPromise(t *testing.T) {
	const restarts, watchers = 6, 3
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx := minitest.Context(t)
	addr, dir := minitest.FreeAddr(t), t.TempDir()
	url := "http://" + addr
	// A watch cache of 100 events, so that a watcher that pauses for
	// 2.5s while the writers write hundreds of events a second resumes
	// from before the cache's window, which etcd has compacted since.
	compaction := []string{"--etcd-compaction-interval", "1s", "--default-watch-cache-size", "100"}

	p := startUp(t, addr, dir, compaction...)
	p.WaitReady(t, url, 60*time.Second)
	l := newLedger(t, "watch")
	servers := configMaps(t, url)
	stop := make(chan struct{})
	wait := l.writers(ctx, stop, 3, 4, seed, servers)
	var stopOnce sync.Once
	stopWriters := func() { stopOnce.Do(func() { close(stop); wait() }) }
	defer stopWriters()

	watchCtx, cancelWatchers := context.WithCancel(ctx)
	defer cancelWatchers()
	logs := make([]*watchLog, watchers)
	var wg sync.WaitGroup
	for i := range logs {
		wg.Go(func() {
			logs[i] = l.watch(watchCtx, fmt.Sprint(i), watchOptions{servers: servers, pause: 2500 * time.Millisecond, seed: seed + uint64(i)})
		})
	}
	defer wg.Wait()
	defer cancelWatchers()

	var stopped []time.Time // when each restart began
	for i := range restarts {
		l.waitAck(time.Now(), 30*time.Second, "the restart")
		time.Sleep(time.Second + rand.N(time.Second))
		stopped = append(stopped, time.Now())
		if i%2 == 0 {
			if err := p.Stop(); err != nil {
				t.Fatalf("minictl up did not stop cleanly: %v\n%s", err, p.Stderr)
			}
		} else {
			kill(t, p)
		}
		p = startUp(t, addr, dir, compaction...)
		p.WaitReady(t, url, 60*time.Second)
	}
	// A while with no restart, in which the pausing watchers fall behind
	// compactions alone.
	l.waitAck(time.Now(), 30*time.Second, "the last restart")
	time.Sleep(8 * time.Second)
	stopWriters()
	end := l.writeEnd(ctx, servers[0])

	awaitWatchers(t, &wg, cancelWatchers)
	l.report()
	l.checkStored(ctx, servers[0])
	l.checkWatch(logs, end)
	compacted := 0 // 410s with no restart since the list before them
	for _, log := range logs {
		events := 0
		for _, seg := range log.segments {
			events += len(seg.events)
			if !seg.gone.IsZero() && !slices.ContainsFunc(stopped, func(at time.Time) bool { return at.After(seg.listed) && at.Before(seg.gone) }) {
				compacted++
			}
		}
		t.Logf("watcher %s: %d events, %d resumes from a resourceVersion, %d times 410 Gone and a relist", log.name, events, log.resumes, log.gone)
		if log.resumes == 0 {
			t.Errorf("watcher %s never resumed from a resourceVersion", log.name)
		}
		if log.gone == 0 {
			t.Errorf("watcher %s was never told 410 Gone, though the server restarted under it", log.name)
		}
	}
	t.Logf("%d of the 410s came from compaction alone", compacted)
	if compacted == 0 {
		t.Error("no watcher fell behind a compaction: the test did not test it")
	}
}
