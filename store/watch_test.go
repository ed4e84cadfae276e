package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

const watchDeadline = 10 * time.Second

// nextChange returns the next event that is not a progress notification.
func nextChange(t *testing.T, ch <-chan WatchEvent) WatchEvent {
	t.Helper()
	deadline := time.After(watchDeadline)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch channel closed, want an event")
			}
			if !ev.Progress {
				return ev
			}
		case <-deadline:
			t.Fatalf("no watch event within %s", watchDeadline)
		}
	}
}

// waitClosed drains ch until it closes and returns the error events seen.
func waitClosed(t *testing.T, ch <-chan WatchEvent) []error {
	t.Helper()
	var errs []error
	deadline := time.After(watchDeadline)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return errs
			}
			if ev.Err != nil {
				errs = append(errs, ev.Err)
			}
		case <-deadline:
			t.Fatalf("watch channel still open after %s", watchDeadline)
		}
	}
}

// describe prints what a test compares: everything but Progress and Err.
func describe(ev WatchEvent) string {
	return fmt.Sprintf("%v %s value=%q prev=%q rev=%d created=%v err=%v", ev.Type, ev.Key, ev.Value, ev.PrevValue, ev.Revision, ev.Created, ev.Err)
}

func TestWatchReplaysChangesInOrder(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{})
	ctx := testCtx(t)
	const (
		prefix = "/registry/core/pods/"
		a      = prefix + "default/a"
		b      = prefix + "default/b"
	)
	createA := mustCreate(t, s, a, "a1")
	mustCreate(t, s, "/registry/core/podsx/default/z", "not watched")
	createB := mustCreate(t, s, b, "b1")
	updateA, err := s.Update(ctx, a, []byte("a2"), createA)
	if err != nil {
		t.Fatal(err)
	}
	deleteB, err := s.Delete(ctx, b, createB)
	if err != nil {
		t.Fatal(err)
	}
	all := []WatchEvent{
		{Type: Put, Key: a, Value: []byte("a1"), Revision: createA, Created: true},
		{Type: Put, Key: b, Value: []byte("b1"), Revision: createB, Created: true},
		{Type: Put, Key: a, Value: []byte("a2"), PrevValue: []byte("a1"), Revision: updateA},
		{Type: Delete, Key: b, PrevValue: []byte("b1"), Revision: deleteB},
	}

	tests := []struct {
		name string
		from int64
		want []WatchEvent
	}{
		{name: "from the first change", from: createA, want: all},
		{name: "from before the first change", from: createA - 1, want: all},
		{name: "from the update", from: updateA, want: all[2:]},
		{name: "from after the last change", from: deleteB + 1, want: nil},
	}
	var live []WatchEvent // writes made by earlier cases, after all
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			ch := s.Watch(wctx, prefix, tt.from)
			// Each case ends with a write while it watches, to show that
			// nothing else was pending; later cases replay those writes too.
			key := fmt.Sprintf("%sdefault/live-%d", prefix, i)
			want := slices.Concat(tt.want, live)
			for j := range want {
				if got := nextChange(t, ch); describe(got) != describe(want[j]) {
					t.Errorf("event %d:\ngot  %s\nwant %s", j, describe(got), describe(want[j]))
				}
			}
			rev := mustCreate(t, s, key, "new")
			live = append(live, WatchEvent{Type: Put, Key: key, Value: []byte("new"), Revision: rev, Created: true})
			if got, want := nextChange(t, ch), live[len(live)-1]; describe(got) != describe(want) {
				t.Errorf("after the replay:\ngot  %s\nwant %s", describe(got), describe(want))
			}
			cancel()
			if errs := waitClosed(t, ch); len(errs) != 0 {
				t.Errorf("watch ended by its context reported errors: %v", errs)
			}
		})
	}
}

func TestWatchProgress(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{})
	rev := mustCreate(t, s, "/r/a", "v")
	// etcd sends progress only once the store has reached the watch's
	// start revision, so this watch starts at the last write.
	ch := s.Watch(testCtx(t), "/r/", rev)
	if ev := nextChange(t, ch); ev.Revision != rev {
		t.Fatalf("got %s, want the write at %d", describe(ev), rev)
	}

	deadline := time.After(watchDeadline)
	for {
		select {
		case ev := <-ch:
			if !ev.Progress {
				t.Fatalf("got %s, want a progress notification", describe(ev))
			}
			if ev.Revision < rev {
				t.Fatalf("progress at revision %d, want >= %d", ev.Revision, rev)
			}
			return
		case <-deadline:
			t.Fatalf("no progress notification within %s", watchDeadline)
		}
	}
}

func TestWatchEndsWhenConsumerLeaves(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{})
	first := mustCreate(t, s, "/r/a", "v")
	for i := range 20 {
		mustCreate(t, s, fmt.Sprintf("/r/k%02d", i), "v")
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	ch := s.Watch(ctx, "/r/", first)
	nextChange(t, ch) // the watch is sending; the consumer reads no more
	cancel()
	if errs := waitClosed(t, ch); len(errs) != 0 {
		t.Errorf("watch ended by its context reported errors: %v", errs)
	}
}

func TestWatchEndsWithErrorWhenStoreCloses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(testCtx(t), Config{DataDir: dir, CompactionInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ch := s.Watch(testCtx(t), "/r/", 1)
	mustCreate(t, s, "/r/a", "v")
	nextChange(t, ch)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	errs := waitClosed(t, ch)
	if len(errs) != 1 || errors.Is(errs[0], ErrCompacted) {
		t.Errorf("watch errors after Close = %v, want one that is not ErrCompacted", errs)
	}
}
