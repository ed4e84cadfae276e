package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/informer/workqueue"
)

// TestHandleErrDecides: what HandleErr does with each kind of answer a sync
// can give, for a key that has failed once before.
func TestHandleErrDecides(t *testing.T) {
	conflict := &client.StatusError{ErrStatus: metav1.Status{Code: http.StatusConflict, Reason: metav1.StatusReasonConflict}}
	exists := &client.StatusError{ErrStatus: metav1.Status{Code: http.StatusConflict, Reason: metav1.StatusReasonAlreadyExists}}
	const second = 10 * time.Millisecond // the default limiter's backoff for a second failure
	for _, tc := range []struct {
		name     string
		err      error
		requeues int           // NumRequeues after
		after    time.Duration // when the key is back; 0: never
		level    slog.Level
		message  string // "" for no log line
		stopping bool   // ctx is done
	}{
		{"success forgets", nil, 0, 0, 0, "", false},
		{"requeue after forgets and waits", fmt.Errorf("pods: %w", workqueue.RequeueAfter(3*time.Second, "cache not synced")),
			0, 3 * time.Second, slog.LevelDebug, "pods: cache not synced; look again in 3s", false},
		{"conflict retries quietly", fmt.Errorf("update status: %w", conflict),
			2, second, slog.LevelDebug, "sync failed, will retry", false},
		{"already exists retries quietly", exists, 2, second, slog.LevelDebug, "sync failed, will retry", false},
		{"failure retries", errors.New("boom"), 2, second, slog.LevelWarn, "sync failed, will retry", false},
		{"failure while stopping is quiet", context.Canceled, 2, second, slog.LevelDebug, "sync failed, will retry", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const key = "default/web"
			clk := clock.NewFake(time.Unix(1000, 0))
			start := clk.Now()
			q := workqueue.New[string]("test", workqueue.Options{Clock: clk})
			defer q.ShutDown()
			q.AddRateLimited(key) // one earlier failure
			waitUntil(t, "the first retry's timer", func() bool { return len(clk.Waiters()) == 1 })
			clk.Step(time.Hour)
			got, _ := q.Get()
			clk.SetTime(start)

			logs := &records{}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.stopping {
				cancel()
			}
			defer cancel()
			HandleErr(ctx, slog.New(logs), q, got, tc.err)
			q.Done(got)

			if n := q.NumRequeues(key); n != tc.requeues {
				t.Errorf("NumRequeues = %d, want %d", n, tc.requeues)
			}
			if tc.after == 0 {
				if q.Len() != 0 || len(clk.Waiters()) != 0 {
					t.Errorf("the key is back (len %d, timers %v), want it forgotten", q.Len(), clk.Waiters())
				}
			} else {
				want := start.Add(tc.after)
				waitUntil(t, fmt.Sprintf("a timer for %v", want), func() bool { return slices.Equal(clk.Waiters(), []time.Time{want}) })
			}
			lines := logs.all()
			switch {
			case tc.message == "" && len(lines) != 0:
				t.Errorf("logged %v, want nothing", lines)
			case tc.message != "" && (len(lines) != 1 || lines[0].Message != tc.message || lines[0].Level != tc.level):
				t.Errorf("logged %v, want one %v line %q", lines, tc.level, tc.message)
			case tc.message != "" && objectOf(lines[0]) != key:
				t.Errorf("logged object %q, want %q", objectOf(lines[0]), key)
			}
		})
	}
}

func TestWorkersRunsAtLeastOne(t *testing.T) {
	for n, want := range map[int]int{-1: 1, 0: 1, 1: 1, 5: 5} {
		if got := Workers(n); got != want {
			t.Errorf("Workers(%d) = %d, want %d", n, got, want)
		}
	}
}

// records keeps the log records it is given.
// objectOf is the record's "object" attribute, the key it is about.
func objectOf(r slog.Record) string {
	var object string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "object" {
			object = a.Value.String()
		}
		return true
	})
	return object
}

type records struct {
	mu    sync.Mutex
	lines []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) all() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
