package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/minictl/minictl/internal/etcdtest"
	"github.com/minictl/minictl/store"
)

// These tests run a Store against a real etcd that they pause, kill,
// restart and wipe (package etcdtest).

const (
	// outageTimeout is the RequestTimeout of the stores here.
	outageTimeout = time.Second
	// noticeWithin is how soon Health must turn after etcd stops
	// answering, or starts again.
	noticeWithin = 5 * time.Second
	// failFastWithin is how soon requests must fail at once after etcd
	// stops: five seconds without an answer, plus a probe's timeout and
	// interval.
	failFastWithin = 10 * time.Second
)

func openExternal(t *testing.T, e *etcdtest.Etcd) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, store.Config{Endpoints: []string{e.URL}, CompactionInterval: -1, RequestTimeout: outageTimeout})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// waitFor polls cond until it holds, and fails the test after within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
	return time.Since(start)
}

// nextEvent returns the next event that is not a progress notification;
// an event with Err, or the channel's end, fails the test.
func nextEvent(t *testing.T, ch <-chan store.WatchEvent) store.WatchEvent {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch ended, want an event")
			}
			if ev.Err != nil {
				t.Fatalf("watch ended with %v, want an event", ev.Err)
			}
			if !ev.Progress {
				return ev
			}
		case <-timeout:
			t.Fatal("no watch event within 20s")
		}
	}
}

// watchEnd waits for the event that ends a watch and returns its error;
// a change before it fails the test.
func watchEnd(t *testing.T, ch <-chan store.WatchEvent) error {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch closed without an error event")
			}
			if ev.Err != nil {
				return ev.Err
			}
			if !ev.Progress {
				t.Fatalf("watch delivered %s %s at %d, want it to end", ev.Type, ev.Key, ev.Revision)
			}
		case <-timeout:
			t.Fatal("watch still open after 20s")
		}
	}
}

// TestSlowProbeFailsNoRequest pauses etcd just long enough for a probe to
// miss its deadline, as a loaded etcd can: Health reports it, but a
// request sent then waits for etcd and succeeds once it answers, rather
// than failing at once as it would during an outage.
func TestSlowProbeFailsNoRequest(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	st := openExternal(t, e)
	if _, err := st.Create(t.Context(), "/r/a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	e.Pause()
	paused := time.Now()
	waitFor(t, "Health reports the paused etcd", noticeWithin, func() bool { return st.Health() != nil })
	if since := time.Since(paused); since > 4*time.Second {
		e.Resume()
		t.Skipf("the probe took %s to notice; too late to tell a slow etcd from a stopped one", since)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := st.Create(ctx, "/r/b", []byte("2"))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // the Create is sent, and waits
	e.Resume()
	if err := <-done; err != nil {
		t.Fatalf("Create sent while one probe had missed its deadline: %v; want it to wait for etcd and succeed", err)
	}
}

// TestOutage pauses etcd, then kills it and starts it again on its data. A
// request sent while etcd does not answer ends at its deadline; Health
// turns to ErrUnavailable within seconds, after which requests fail at
// once; when etcd is back, Health clears by itself, requests succeed, and
// a watch that stayed open resumes where it was.
func TestOutage(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	st := openExternal(t, e)
	ctx := t.Context()
	rev, err := st.Create(ctx, "/r/a", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	w := st.Watch(ctx, "/r/", rev+1)

	e.Pause()
	paused := time.Now()
	start := time.Now()
	_, err = st.Get(context.Background(), "/r/a") // no deadline of its own
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > outageTimeout+time.Second {
		t.Fatalf("Get while etcd is paused: %v after %s; want context.DeadlineExceeded after the %s RequestTimeout", err, took, outageTimeout)
	}
	waitFor(t, "Health reports the paused etcd", noticeWithin-time.Since(paused), func() bool { return st.Health() != nil })
	if err := st.Health(); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Health = %v, want ErrUnavailable", err)
	}
	// A probe or two missed may be a slow etcd: requests stop waiting
	// only once it has answered none for five seconds.
	waitFor(t, "requests to fail at once", failFastWithin-time.Since(paused), func() bool {
		start := time.Now()
		_, err := st.Create(context.Background(), "/r/b", []byte("2"))
		return errors.Is(err, store.ErrUnavailable) && time.Since(start) < 100*time.Millisecond
	})

	e.Kill()
	e.Restart()
	e.Resume()
	waitFor(t, "Health clears after etcd restarted", 3*noticeWithin, func() bool { return st.Health() == nil })
	rev2, err := st.Create(ctx, "/r/c", []byte("3"))
	if err != nil {
		t.Fatalf("Create after etcd restarted: %v", err)
	}
	if rev2 <= rev {
		t.Fatalf("Create after etcd restarted got revision %d, not after %d", rev2, rev)
	}
	if ev := nextEvent(t, w); ev.Key != "/r/c" || ev.Revision != rev2 {
		t.Fatalf("watch after the outage got %s %s at %d, want /r/c at %d", ev.Type, ev.Key, ev.Revision, rev2)
	}
}

// TestWipedEtcd wipes etcd while a Store uses it: the Store notices that
// revisions went back, its watches end with ErrHistoryReset, a watch from
// a revision of the lost history fails at once, and what it knew of
// compaction is forgotten.
func TestWipedEtcd(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	st := openExternal(t, e)
	ctx := t.Context()
	var last int64
	for i := range 10 {
		var err error
		if last, err = st.Create(ctx, fmt.Sprintf("/r/%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Compact(ctx, last-1); err != nil {
		t.Fatal(err)
	}
	w := st.Watch(ctx, "/r/", last+1)

	e.Wipe()
	if err := watchEnd(t, w); !errors.Is(err, store.ErrHistoryReset) {
		t.Fatalf("watch across the wipe ended with %v, want ErrHistoryReset", err)
	}
	waitFor(t, "Health clears after the wipe", 3*noticeWithin, func() bool { return st.Health() == nil })
	if got := st.CompactedRevision(); got != 0 {
		t.Errorf("CompactedRevision after the wipe = %d, want 0", got)
	}
	if err := watchEnd(t, st.Watch(ctx, "/r/", last+1)); !errors.Is(err, store.ErrHistoryReset) {
		t.Errorf("watch from revision %d of the lost history ended with %v, want ErrHistoryReset", last+1, err)
	}
	if _, err := st.Get(ctx, "/r/0"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of a key of the lost history = %v, want ErrNotFound", err)
	}
	rev, err := st.Create(ctx, "/r/new", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	if rev >= last {
		t.Fatalf("Create on the wiped etcd got revision %d, want one below %d", rev, last)
	}
	if ev := nextEvent(t, st.Watch(ctx, "/r/", rev)); ev.Key != "/r/new" {
		t.Errorf("watch on the new history got %s, want /r/new", ev.Key)
	}
}

// TestAnotherCluster replaces etcd, while it is paused, by another cluster
// that is already at a higher revision: the cluster ID tells the Store, and
// its watch ends with ErrHistoryReset before delivering anything of the
// other cluster's.
func TestAnotherCluster(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	st := openExternal(t, e)
	ctx := t.Context()
	rev, err := st.Create(ctx, "/r/a", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	w := st.Watch(ctx, "/r/", rev+1)

	e.Pause()
	e.Wipe()
	for i := range int(rev) + 10 {
		if _, err := e.Member().Create(ctx, fmt.Sprintf("/r/other-%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	e.Resume()
	if err := watchEnd(t, w); !errors.Is(err, store.ErrHistoryReset) {
		t.Fatalf("watch across the replacement ended with %v, want ErrHistoryReset", err)
	}
	waitFor(t, "Health clears on the other cluster", 3*noticeWithin, func() bool { return st.Health() == nil })
	if _, err := st.Get(ctx, "/r/a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of a key of the first cluster = %v, want ErrNotFound", err)
	}
}
