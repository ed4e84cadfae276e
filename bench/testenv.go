package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/minictl/minictl/testenv"
)

// runTestenv is the testenv scenario: the control plane a Go test starts
// with package testenv, inside this process rather than from the binary.
// Start to ready five times with the API server alone, five times with
// every controller, the scheduler and three Ready nodes; then the heap
// one idle Env with controllers holds, after a few seconds at rest, as
// the difference of the live heap before Start and after.
func (h *harness) runTestenv(ctx context.Context, rep int) error {
	modes := []struct {
		name string
		opts []testenv.Option
	}{
		{"Start to ready, API only", nil},
		{"Start to ready, controllers + scheduler + 3 nodes", []testenv.Option{testenv.WithControllers(), testenv.WithScheduler(), testenv.WithNodes(3)}},
	}
	for _, m := range modes {
		for range 5 {
			tb := &benchTB{tmp: h.tmp}
			start := time.Now()
			env, err := tb.start(m.opts...)
			if err == nil {
				h.res.addDuration("testenv", m.name, time.Since(start))
			}
			tb.cleanup()
			if err != nil {
				return fmt.Errorf("testenv.Start: %w", err)
			}
			_ = env
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	before := liveHeap()
	tb := &benchTB{tmp: h.tmp}
	env, err := tb.start(modes[1].opts...)
	defer tb.cleanup()
	if err != nil {
		return fmt.Errorf("testenv.Start: %w", err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(3 * time.Second):
	}
	h.res.add("testenv", "idle Env with controllers: heap", "MB", float64(liveHeap()-before)/(1<<20))
	runtime.KeepAlive(env)
	return nil
}

// liveHeap is the bytes of the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// benchTB is the testing.TB testenv.Start needs, outside a test: Fatal
// records the failure and ends the goroutine, as testing's does;
// cleanups run when the scenario says.
type benchTB struct {
	testing.TB // only the methods below are called
	tmp        string
	mu         sync.Mutex
	err        error
	cleanups   []func()
}

func (b *benchTB) start(opts ...testenv.Option) (*testenv.Env, error) {
	var env *testenv.Env
	done := make(chan struct{})
	go func() {
		defer close(done)
		env = testenv.Start(b, opts...)
	}()
	<-done
	b.mu.Lock()
	defer b.mu.Unlock()
	return env, b.err
}

func (b *benchTB) Helper()      {}
func (b *benchTB) Name() string { return "bench" }

func (b *benchTB) Errorf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = fmt.Errorf(format, args...)
	}
}

func (b *benchTB) Fatalf(format string, args ...any) {
	b.Errorf(format, args...)
	runtime.Goexit()
}

func (b *benchTB) Cleanup(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cleanups = append(b.cleanups, f)
}

func (b *benchTB) TempDir() string {
	dir, err := os.MkdirTemp(b.tmp, "testenv-")
	if err != nil {
		b.Fatalf("temp dir: %v", err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (b *benchTB) cleanup() {
	b.mu.Lock()
	cleanups := b.cleanups
	b.cleanups = nil
	b.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
}
