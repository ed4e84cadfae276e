package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCompact(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{})
	ctx := testCtx(t)
	r1 := mustCreate(t, s, "/r/a", "v1")
	r2, err := s.Update(ctx, "/r/a", []byte("v2"), r1)
	if err != nil {
		t.Fatal(err)
	}
	r3, err := s.Update(ctx, "/r/a", []byte("v3"), r2)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CompactedRevision(); got != 0 {
		t.Fatalf("CompactedRevision before any compaction = %d, want 0", got)
	}
	if err := s.Compact(ctx, r2); err != nil {
		t.Fatalf("Compact(%d): %v", r2, err)
	}
	if got := s.CompactedRevision(); got != r2 {
		t.Errorf("CompactedRevision = %d, want %d", got, r2)
	}

	t.Run("list", func(t *testing.T) {
		tests := []struct {
			rev       int64
			wantValue string
			wantErr   error
		}{
			{rev: r1, wantErr: ErrCompacted},
			{rev: r2, wantValue: "v2"}, // the compacted revision itself is kept
			{rev: r3, wantValue: "v3"},
			{rev: 0, wantValue: "v3"},
		}
		for _, tt := range tests {
			res, err := s.List(ctx, "/r/", ListOptions{Revision: tt.rev})
			if !wantErr(err, tt.wantErr) {
				t.Errorf("List at %d: err = %v, want %v", tt.rev, err, tt.wantErr)
				continue
			}
			if err == nil && (len(res.Items) != 1 || string(res.Items[0].Value) != tt.wantValue) {
				t.Errorf("List at %d = [%s], want /r/a=%s", tt.rev, keys(res.Items), tt.wantValue)
			}
		}
	})

	t.Run("watch", func(t *testing.T) {
		errs := waitClosed(t, s.Watch(ctx, "/r/", r1))
		if len(errs) != 1 || !errors.Is(errs[0], ErrCompacted) {
			t.Fatalf("watch from %d ended with %v, want one error wrapping ErrCompacted", r1, errs)
		}
		if !strings.Contains(errs[0].Error(), fmt.Sprintf("oldest kept is %d", r2)) {
			t.Errorf("error %q does not name the compacted revision %d", errs[0], r2)
		}

		// A watch from a kept revision still works.
		ch := s.Watch(ctx, "/r/", r3)
		if ev := nextChange(t, ch); ev.Revision != r3 || string(ev.PrevValue) != "v2" {
			t.Errorf("watch from %d: got %s, want the update to v3 at %d", r3, describe(ev), r3)
		}
	})

	t.Run("again", func(t *testing.T) {
		if err := s.Compact(ctx, r1); !errors.Is(err, ErrCompacted) {
			t.Errorf("Compact(%d) after Compact(%d): err = %v, want ErrCompacted", r1, r2, err)
		}
		if err := s.Compact(ctx, r3+100); !errors.Is(err, ErrFutureRevision) {
			t.Errorf("Compact(future): err = %v, want ErrFutureRevision", err)
		}
		if got := s.CompactedRevision(); got != r2 {
			t.Errorf("CompactedRevision = %d, want still %d", got, r2)
		}
	})
}

func TestWatchLearnsCompaction(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{})
	ctx := testCtx(t)
	r1 := mustCreate(t, s, "/r/a", "v")
	other := openStore(t, Config{Endpoints: s.Endpoints()})
	r2 := mustCreate(t, s, "/r/b", "v")
	if err := s.Compact(ctx, r2); err != nil {
		t.Fatal(err)
	}
	if got := other.CompactedRevision(); got != 0 {
		t.Fatalf("other store's CompactedRevision = %d before it could know, want 0", got)
	}
	errs := waitClosed(t, other.Watch(ctx, "/r/", r1))
	if len(errs) != 1 || !errors.Is(errs[0], ErrCompacted) {
		t.Fatalf("watch from %d ended with %v, want ErrCompacted", r1, errs)
	}
	if got := other.CompactedRevision(); got != r2 {
		t.Errorf("other store's CompactedRevision after the watch = %d, want %d", got, r2)
	}
}

func TestPeriodicCompaction(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{CompactionInterval: 100 * time.Millisecond})
	ctx := testCtx(t)
	old := mustCreate(t, s, "/r/a", "v1")
	written, err := s.Update(ctx, "/r/a", []byte("v2"), old)
	if err != nil {
		t.Fatal(err)
	}

	// The loop compacts to the revision it saw one tick earlier, so it
	// reaches the last write within about two ticks.
	if !waitFor(func() bool { return s.CompactedRevision() >= written }) {
		t.Fatalf("CompactedRevision = %d after %s, want >= %d", s.CompactedRevision(), watchDeadline, written)
	}
	if _, err := s.List(ctx, "/r/", ListOptions{Revision: old}); !errors.Is(err, ErrCompacted) {
		t.Errorf("List at %d after periodic compaction: err = %v, want ErrCompacted", old, err)
	}
	if kv, err := s.Get(ctx, "/r/a"); err != nil || string(kv.Value) != "v2" {
		t.Errorf("Get after compaction = %+v, %v; want the latest value v2", kv, err)
	}
}
