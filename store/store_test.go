package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testProgressInterval is short so that watch tests see progress
// notifications quickly; etcd keeps it per process, so every test store
// uses the same.
const testProgressInterval = 200 * time.Millisecond

// openStore opens an embedded store in a fresh directory (unless cfg names
// one), without periodic compaction (unless cfg asks for it), and closes it
// when the test ends.
func openStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	if cfg.DataDir == "" && len(cfg.Endpoints) == 0 {
		cfg.DataDir = t.TempDir()
	}
	if cfg.CompactionInterval == 0 {
		cfg.CompactionInterval = -1
	}
	cfg.ProgressNotifyInterval = testProgressInterval
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// testCtx bounds one test's calls to the store.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t *testing.T, s *Store, key, value string) int64 {
	t.Helper()
	rev, err := s.Create(testCtx(t), key, []byte(value))
	if err != nil {
		t.Fatalf("Create %s: %v", key, err)
	}
	return rev
}

func mustRevision(t *testing.T, s *Store) int64 {
	t.Helper()
	rev, err := s.Revision(testCtx(t))
	if err != nil {
		t.Fatalf("Revision: %v", err)
	}
	return rev
}

func TestOpenEmbedded(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	want := fmt.Sprintf("http://127.0.0.1:%d", port)
	tests := []struct {
		name      string
		clientURL string
		want      string // "" means any free loopback port
	}{
		{name: "default", clientURL: ""},
		{name: "port 0", clientURL: "http://127.0.0.1:0"},
		{name: "fixed port", clientURL: want, want: want},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, Config{ClientURL: tt.clientURL})
			eps := s.Endpoints()
			if len(eps) != 1 {
				t.Fatalf("Endpoints = %v, want one", eps)
			}
			u, err := url.Parse(eps[0])
			if err != nil {
				t.Fatal(err)
			}
			if u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Port() == "0" {
				t.Errorf("Endpoints = %v, want a loopback URL with a port", eps)
			}
			if tt.want != "" && eps[0] != tt.want {
				t.Errorf("Endpoints = %v, want %s", eps, tt.want)
			}
			// The raw client reaches the same etcd.
			rev := mustCreate(t, s, "/k", "v")
			resp, err := s.client.Get(testCtx(t), "/k")
			if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != rev {
				t.Errorf("raw Get /k = %v, %v; want one key at revision %d", resp, err, rev)
			}
		})
	}
}

func TestOpenExternal(t *testing.T) {
	t.Parallel()
	embedded := openStore(t, Config{})
	external := openStore(t, Config{Endpoints: embedded.Endpoints(), CompactionInterval: -1})

	rev := mustCreate(t, external, "/registry/x", "1")
	kv, err := embedded.Get(testCtx(t), "/registry/x")
	if err != nil || string(kv.Value) != "1" || kv.Revision != rev {
		t.Errorf("Get through the embedded store = %+v, %v; want value 1 at %d", kv, err, rev)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
	}{
		{name: "embedded without a data dir", cfg: Config{}},
		{name: "unreachable endpoint", cfg: Config{Endpoints: []string{fmt.Sprintf("http://127.0.0.1:%d", freePort(t))}}},
		{name: "bad client url", cfg: Config{DataDir: t.TempDir(), ClientURL: "http://[::1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			s, err := Open(ctx, tt.cfg)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded, want an error")
			}
		})
	}
}

func TestRestartKeepsDataAndRevisions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := testCtx(t)

	first, err := Open(ctx, Config{DataDir: dir, CompactionInterval: -1})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	created := mustCreate(t, first, "/registry/a", "1")
	mustCreate(t, first, "/registry/b", "2")
	// More writes than the raft log keeps in memory (see embedConfig):
	// every one of them must be there after the restart.
	const many = 300
	for i := range many {
		mustCreate(t, first, fmt.Sprintf("/registry/many/%03d", i), strconv.Itoa(i))
	}
	if err := first.Compact(ctx, created); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	before := mustRevision(t, first)
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	second := openStore(t, Config{DataDir: dir})
	kv, err := second.Get(ctx, "/registry/a")
	if err != nil || string(kv.Value) != "1" || kv.Revision != created {
		t.Errorf("Get after restart = %+v, %v; want value 1 at %d", kv, err, created)
	}
	list, err := second.List(ctx, "/registry/many/", ListOptions{})
	if err != nil || len(list.Items) != many {
		t.Fatalf("List after restart: %+v, %v; want %d keys", list, err, many)
	}
	for i, kv := range list.Items {
		if string(kv.Value) != strconv.Itoa(i) {
			t.Errorf("after restart %s = %q, want %d", kv.Key, kv.Value, i)
		}
	}
	if got := mustRevision(t, second); got != before {
		t.Errorf("Revision after restart = %d, want %d", got, before)
	}
	if got := second.CompactedRevision(); got != created {
		t.Errorf("CompactedRevision after restart = %d, want %d", got, created)
	}
	if rev := mustCreate(t, second, "/registry/c", "3"); rev <= before {
		t.Errorf("Create after restart got revision %d, want > %d", rev, before)
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// wantErr reports whether err matches want (nil means no error).
func wantErr(err, want error) bool {
	if want == nil {
		return err == nil
	}
	return errors.Is(err, want)
}

func keys(items []KeyValue) string {
	var b strings.Builder
	for i, kv := range items {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(kv.Key)
	}
	return b.String()
}

// TestGoroutinesEnd checks that the goroutines a Store starts (watches, the
// compaction loop, the etcd error logger) end with their context or with
// Close. It is not parallel, so no other test's goroutines are around.
func TestGoroutinesEnd(t *testing.T) {
	s, err := Open(testCtx(t), Config{DataDir: t.TempDir(), CompactionInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rev := mustCreate(t, s, "/r/a", "v")
	ctx, cancel := context.WithCancel(testCtx(t))
	for range 3 {
		ch := s.Watch(ctx, "/r/", rev)
		nextChange(t, ch)
	}
	s.Watch(ctx, "/r/", rev) // nobody ever reads this one
	blocked := waitFor(func() bool {
		for _, g := range storeGoroutines() {
			if strings.Contains(g, "(*Store).Watch.func") && (strings.Contains(g, "[select") || strings.Contains(g, "[chan send")) {
				return true
			}
		}
		return false
	})
	if !blocked {
		t.Fatal("no watch goroutine blocked sending to its consumer")
	}
	cancel()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	var left []string
	if !waitFor(func() bool { left = storeGoroutines(); return len(left) == 0 }) {
		t.Fatalf("store goroutines still running after %s:\n%s", watchDeadline, strings.Join(left, "\n\n"))
	}
}

// waitFor polls cond until it holds (true) or a deadline passes (false).
func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(watchDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond) // poll; the deadline bounds the wait
	}
	return true
}

// storeGoroutines returns the stacks of goroutines running this package's code.
func storeGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "minictl/store.(*Store)") && !strings.Contains(g, "storeGoroutines") {
			out = append(out, g)
		}
	}
	return out
}
