package gctune

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestLimit(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		name       string
		live, held uint64
		gogc       int
		want       int64
	}{
		{"a small heap: GOGC alone", 100 * mb, 150 * mb, 200, math.MaxInt64},
		{"GOGC keeps exactly the cap", 256 * mb, 400 * mb, 200, math.MaxInt64},
		{"past the cap: held plus the headroom", 300 * mb, 700 * mb, 200, (700 + 128) * mb},
		{"a large heap: a quarter of it", 1000 * mb, 2300 * mb, 200, (2300 + 250) * mb},
		{"GOGC=100 past the cap", 600 * mb, 900 * mb, 100, (900 + 150) * mb},
		{"GOGC=100 below it", 500 * mb, 900 * mb, 100, math.MaxInt64},
		{"the collector off", 1000 * mb, 2300 * mb, -1, math.MaxInt64},
	} {
		if got := Limit(c.live, c.held, c.gogc, 512*mb, 128*mb); got != c.want {
			t.Errorf("%s: Limit(%d MB live, %d MB held) = %d MB, want %d MB", c.name, c.live/mb, c.held/mb, got/mb, c.want/mb)
		}
	}
}

// TestRunFollowsTheLiveHeap: a live heap whose GOGC headroom passes the
// cap gets a memory limit a little above what the process holds; when the
// heap is freed the limit goes, and it goes when Run stops.
func TestRunFollowsTheLiveHeap(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	const mb = 1 << 20
	gogc := debug.SetGCPercent(-1)
	debug.SetGCPercent(gogc)
	if gogc < 0 {
		t.Skip("the collector is off (GOGC=off)")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, gogc, 8*mb, 4*mb) }()
	defer func() { cancel(); <-done }()

	limit := func() int64 { return debug.SetMemoryLimit(-1) }
	waitFor := func(what string, ok func(int64) bool) {
		t.Helper()
		for range 100 {
			runtime.GC()
			if ok(limit()) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s: the limit is %d", what, limit())
	}

	live := make([][]byte, 64)
	for i := range live {
		live[i] = make([]byte, mb)
	}
	waitFor("a limit above the 64 MB live heap", func(l int64) bool { return l != math.MaxInt64 && l > 64*mb })
	if l := limit(); l > 1<<30 {
		t.Errorf("limit %d MB for a 64 MB live heap and a 16 MB headroom", l/mb)
	}
	runtime.KeepAlive(live)
	live = nil
	waitFor("no limit once the heap is freed", func(l int64) bool { return l == math.MaxInt64 })

	live = make([][]byte, 64)
	for i := range live {
		live[i] = make([]byte, mb)
	}
	waitFor("a limit again", func(l int64) bool { return l != math.MaxInt64 })
	cancel()
	<-done
	if l := limit(); l != math.MaxInt64 {
		t.Errorf("after Run returned the limit is %d, want none", l)
	}
	runtime.KeepAlive(live)
}
