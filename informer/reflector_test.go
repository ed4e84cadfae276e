package informer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/internal/testenv"
)

func TestBackoffDelays(t *testing.T) {
	b := backoffState{cfg: Backoff{Initial: time.Second, Max: 4 * time.Second, ResetAfter: time.Minute}.withDefaults()}
	now := time.Unix(1000, 0)
	var got []time.Duration
	for range 5 {
		d := b.delay(now)
		got = append(got, d)
		now = now.Add(d) // fail again as soon as the retry starts
	}
	if want := []time.Duration{1, 2, 4, 4, 4}; !slices.Equal(got, scale(want, time.Second)) {
		t.Errorf("consecutive delays %v, want %v seconds", got, want)
	}
	// Healthy for longer than ResetAfter: start again from Initial.
	if d := b.delay(now.Add(time.Minute + time.Second)); d != time.Second {
		t.Errorf("delay after a healthy minute = %v, want 1s", d)
	}

	// The zero Backoff is client-go's: 800ms doubled to 30s, jitter up to
	// 100%.
	b = backoffState{cfg: Backoff{}.withDefaults()}
	for i, base := range []time.Duration{800, 1600, 3200} {
		d := b.delay(now)
		now = now.Add(d)
		if lo, hi := base*time.Millisecond, 2*base*time.Millisecond; d < lo || d >= hi {
			t.Errorf("default delay %d = %v, want in [%v, %v)", i, d, lo, hi)
		}
	}
}

func scale(ds []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d * unit
	}
	return out
}

// scriptedLW is a ListerWatcher whose lists fail while listErr is set and
// whose watches stay open until the test ends them with endWatch.
type scriptedLW struct {
	mu      sync.Mutex
	listErr error
	lists   int
	watches []*scriptedStream
}

func (s *scriptedLW) List(context.Context, metav1.ListOptions) (*Page, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	if s.listErr != nil {
		return nil, s.listErr
	}
	return &Page{ResourceVersion: "7"}, nil
}

func (s *scriptedLW) Watch(ctx context.Context, _ metav1.ListOptions) (WatchStream, error) {
	w := &scriptedStream{ctx: ctx, end: make(chan error, 1)}
	s.mu.Lock()
	s.watches = append(s.watches, w)
	s.mu.Unlock()
	return w, nil
}

func (s *scriptedLW) counts() (lists, watches int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists, len(s.watches)
}

// endWatch ends the newest watch with err.
func (s *scriptedLW) endWatch(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watches[len(s.watches)-1].end <- err
}

type scriptedStream struct {
	ctx context.Context
	end chan error
	mu  sync.Mutex
	err error
}

func (w *scriptedStream) Next() (WatchEvent, bool) {
	select {
	case err := <-w.end:
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
	case <-w.ctx.Done():
	}
	return WatchEvent{}, false
}

func (w *scriptedStream) Stop() {}

func (w *scriptedStream) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func TestReflectorBacksOffOnFakeClock(t *testing.T) {
	clock := clock.NewFake(time.Unix(1000, 0))
	lw := &scriptedLW{listErr: errors.New("connection refused")}
	r := NewReflector(lw, NewIndexer(nil, nil), ReflectorOptions{
		Clock:   clock,
		Backoff: Backoff{Initial: time.Second, Max: 4 * time.Second, ResetAfter: time.Minute},
		Logger:  testLogger(t),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()

	// waitSleep waits until the reflector sleeps d.
	waitSleep := func(d time.Duration) {
		t.Helper()
		want := clock.Now().Add(d)
		waitUntil(t, 10*time.Second, fmt.Sprintf("a backoff of %v", d), func() bool {
			w := clock.Waiters()
			return len(w) == 1 && w[0].Equal(want)
		}, func() string { return fmt.Sprint(clock.Waiters(), " want ", want) })
	}
	// waitBackoff waits until the reflector sleeps d, then wakes it.
	waitBackoff := func(d time.Duration) {
		t.Helper()
		waitSleep(d)
		clock.Step(d)
	}

	// Failing lists: 1s, 2s, 4s, 4s, 4s.
	for _, d := range []time.Duration{1, 2, 4, 4} {
		waitBackoff(d * time.Second)
	}
	waitSleep(4 * time.Second)
	if lists, _ := lw.counts(); lists != 5 {
		t.Fatalf("%d lists, want 5", lists)
	}
	lw.mu.Lock()
	lw.listErr = nil
	lw.mu.Unlock()
	clock.Step(4 * time.Second)
	waitUntil(t, 10*time.Second, "a watch", func() bool { _, w := lw.counts(); return w == 1 }, nil)
	if rv := r.LastSyncResourceVersion(); rv != "7" {
		t.Errorf("LastSyncResourceVersion = %q, want 7", rv)
	}

	// Healthy for two minutes, then the watch fails: backoff starts over.
	clock.Step(2 * time.Minute)
	lw.endWatch(errors.New("connection reset"))
	waitBackoff(time.Second)
	waitUntil(t, 10*time.Second, "a second watch", func() bool { _, w := lw.counts(); return w == 2 }, nil)
	// It fails at once: the next delay doubles. No relist happens: the
	// watch resumes from where it was.
	lw.endWatch(errors.New("connection reset"))
	waitBackoff(2 * time.Second)
	waitUntil(t, 10*time.Second, "a third watch", func() bool { _, w := lw.counts(); return w == 3 }, nil)
	if lists, _ := lw.counts(); lists != 6 {
		t.Errorf("%d lists, want 6: a failed watch must resume, not relist", lists)
	}
}

// countingLW records the options of every list.
type countingLW struct {
	ListerWatcher
	mu     sync.Mutex
	lists  []metav1.ListOptions
	before func(opts metav1.ListOptions) // called before each list
}

func (c *countingLW) List(ctx context.Context, opts metav1.ListOptions) (*Page, error) {
	c.mu.Lock()
	c.lists = append(c.lists, opts)
	before := c.before
	c.mu.Unlock()
	if before != nil {
		before(opts)
	}
	return c.ListerWatcher.List(ctx, opts)
}

func (c *countingLW) listOptions() []metav1.ListOptions {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.lists)
}

// runReflector runs a reflector into an Indexer until the test ends.
func runReflector(t *testing.T, ctx context.Context, lw ListerWatcher, opts ReflectorOptions) (*Reflector, Indexer) {
	t.Helper()
	cache := NewIndexer(nil, nil)
	opts.Logger = testLogger(t)
	r := NewReflector(lw, cache, opts)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return r, cache
}

func indexerState(cache Indexer) map[string]string {
	out := map[string]string{}
	for _, obj := range cache.List() {
		cm := obj.(*corev1.ConfigMap)
		out[cm.Name] = cm.ResourceVersion
	}
	return out
}

func TestReflectorListsInPagesAtOneResourceVersion(t *testing.T) {
	e := startIT(t, testenv.Options{})
	ctx := testCtx(t)
	for i := range 7 {
		e.create(t, ctx, fmt.Sprintf("cm-%d", i))
	}
	lw := &countingLW{ListerWatcher: NewListWatch(e.cms, e.ns, nil)}
	r, cache := runReflector(t, ctx, lw, ReflectorOptions{PageSize: 3})
	waitUntil(t, 10*time.Second, "the first list", func() bool { return r.LastSyncResourceVersion() != "" }, nil)

	lists := lw.listOptions()
	if len(lists) != 3 || lists[0].Limit != 3 || lists[0].Continue != "" || lists[1].Continue == "" || lists[2].Continue == "" {
		t.Errorf("lists %+v: want 3 pages of 3", lists)
	}
	if want := e.serverState(t, ctx); !maps.Equal(indexerState(cache), want) {
		t.Errorf("cache %v, want %v", indexerState(cache), want)
	}
}

func TestReflectorRelistsInOneRequestWhenContinueExpires(t *testing.T) {
	e := startIT(t, testenv.Options{})
	ctx := testCtx(t)
	for i := range 5 {
		e.create(t, ctx, fmt.Sprintf("cm-%d", i))
	}
	lw := &countingLW{ListerWatcher: NewListWatch(e.cms, e.ns, nil)}
	var once sync.Once
	lw.before = func(opts metav1.ListOptions) {
		if opts.Continue == "" {
			return
		}
		// Between pages: a write, and a compaction that takes the first
		// page's snapshot away.
		once.Do(func() {
			e.update(t, ctx, "cm-0", "changed")
			rev, err := e.env.Store.Revision(ctx)
			if err == nil {
				err = e.env.Store.Compact(ctx, rev)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	r, cache := runReflector(t, ctx, lw, ReflectorOptions{PageSize: 2})
	waitUntil(t, 10*time.Second, "the first list", func() bool { return r.LastSyncResourceVersion() != "" }, nil)

	lists := lw.listOptions()
	if len(lists) != 3 || lists[1].Continue == "" || lists[2].Limit != 0 || lists[2].Continue != "" {
		t.Errorf("lists %+v: want a page, an expired continue, then one list without a limit", lists)
	}
	want := e.serverState(t, ctx)
	if !maps.Equal(indexerState(cache), want) {
		t.Errorf("cache %v, want %v", indexerState(cache), want)
	}
	if want["cm-0"] != r.LastSyncResourceVersion() {
		t.Errorf("LastSyncResourceVersion %s, want the update's %s", r.LastSyncResourceVersion(), want["cm-0"])
	}
}

// goneLW lists fine, but every watch is refused with 410 Gone, as from a
// server whose watch window is smaller than one list's worth of changes.
type goneLW struct {
	mu    sync.Mutex
	lists int
}

func (g *goneLW) List(context.Context, metav1.ListOptions) (*Page, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lists++
	return &Page{ResourceVersion: strconv.Itoa(g.lists)}, nil
}

func (g *goneLW) Watch(context.Context, metav1.ListOptions) (WatchStream, error) {
	return nil, &client.StatusError{ErrStatus: metav1.Status{Code: http.StatusGone, Reason: metav1.StatusReasonExpired}}
}

func (g *goneLW) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lists
}

func TestReflectorDoesNotRelistInATightLoop(t *testing.T) {
	clock := clock.NewFake(time.Unix(1000, 0))
	lw := &goneLW{}
	runReflector(t, context.Background(), lw, ReflectorOptions{
		Clock:   clock,
		Backoff: Backoff{Initial: time.Second, Max: 8 * time.Second, ResetAfter: time.Minute},
	})
	for i, d := range []time.Duration{1, 2, 4} {
		want := clock.Now().Add(d * time.Second)
		waitUntil(t, 10*time.Second, "a backoff before the relist", func() bool {
			w := clock.Waiters()
			return len(w) == 1 && w[0].Equal(want)
		}, func() string { return fmt.Sprint(clock.Waiters()) })
		if n := lw.count(); n != i+1 {
			t.Fatalf("%d lists before backoff %d, want %d", n, i, i+1)
		}
		clock.Step(d * time.Second)
	}
}
