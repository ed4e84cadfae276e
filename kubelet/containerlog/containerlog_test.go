package containerlog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

const uid = types.UID("1234")

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// logsWith returns logs where container "app" printed lines one, two,
// three... a second apart from t0.
func logsWith(lines ...string) *Logs {
	l := New()
	l.Start(uid, "app")
	for i, s := range lines {
		l.Print(uid, "app", t0.Add(time.Duration(i)*time.Second), s)
	}
	return l
}

func read(t *testing.T, l *Logs, opts Options) string {
	t.Helper()
	var b bytes.Buffer
	if err := l.Read(context.Background(), uid, "app", opts, &b); err != nil {
		t.Fatalf("Read(%+v): %v", opts, err)
	}
	return b.String()
}

func TestRead(t *testing.T) {
	l := logsWith("one", "two", "three", "four")
	tail := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"all", Options{}, "one\ntwo\nthree\nfour\n"},
		{"tail 2", Options{TailLines: tail(2)}, "three\nfour\n"},
		{"tail 0", Options{TailLines: tail(0)}, ""},
		{"tail beyond", Options{TailLines: tail(10)}, "one\ntwo\nthree\nfour\n"},
		{"since", Options{Since: t0.Add(2 * time.Second)}, "three\nfour\n"},
		{"since between lines", Options{Since: t0.Add(1500 * time.Millisecond)}, "three\nfour\n"},
		{"tail then since", Options{TailLines: tail(3), Since: t0.Add(2 * time.Second)}, "three\nfour\n"},
		{"limit within a line", Options{LimitBytes: tail(6)}, "one\ntw"},
		{"limit at a line's end", Options{LimitBytes: tail(4)}, "one\n"},
		{"limit beyond", Options{LimitBytes: tail(1000)}, "one\ntwo\nthree\nfour\n"},
		{"timestamps", Options{TailLines: tail(1), Timestamps: true}, "2026-11-28T12:00:03.000000000Z four\n"},
		{"timestamps count in limit", Options{Timestamps: true, LimitBytes: tail(33)}, "2026-11-28T12:00:00.000000000Z on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := read(t, l, tc.opts); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReadTimestampsInUTCWithNanoseconds(t *testing.T) {
	l := New()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("CET", 3600))
	l.Print(uid, "app", at, "hello")
	if got, want := read(t, l, Options{Timestamps: true}), "2026-01-02T02:04:05.000000006Z hello\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestReadPrevious(t *testing.T) {
	l := logsWith("first run")
	var b bytes.Buffer
	if err := l.Read(context.Background(), uid, "app", Options{Previous: true}, &b); !errors.Is(err, ErrNoPreviousRun) {
		t.Fatalf("previous of a container run once: err %v, want ErrNoPreviousRun", err)
	}
	if err := l.Read(context.Background(), uid, "other", Options{Previous: true}, &b); !errors.Is(err, ErrNoPreviousRun) {
		t.Fatalf("previous of a container never run: err %v, want ErrNoPreviousRun", err)
	}
	l.Start(uid, "app")
	l.Print(uid, "app", t0.Add(time.Minute), "second run")
	if got := read(t, l, Options{Previous: true}); got != "first run\n" {
		t.Errorf("previous: got %q", got)
	}
	if got := read(t, l, Options{}); got != "second run\n" {
		t.Errorf("current: got %q", got)
	}
	// Following the previous run ends at once: it is over.
	if got := read(t, l, Options{Previous: true, Follow: true}); got != "first run\n" {
		t.Errorf("previous, followed: got %q", got)
	}
	l.Start(uid, "app")
	if got := read(t, l, Options{Previous: true}); got != "second run\n" {
		t.Errorf("previous after a third start: got %q", got)
	}
}

func TestReadNothingPrinted(t *testing.T) {
	l := New()
	if got := read(t, l, Options{}); got != "" {
		t.Errorf("container never started: got %q", got)
	}
	l.Start(uid, "app")
	if got := read(t, l, Options{Timestamps: true}); got != "" {
		t.Errorf("started, silent: got %q", got)
	}
}

func TestForget(t *testing.T) {
	l := logsWith("one")
	l.Start(uid, "app")
	l.Forget(uid)
	if got := read(t, l, Options{}); got != "" {
		t.Errorf("forgotten: got %q", got)
	}
	var b bytes.Buffer
	if err := l.Read(context.Background(), uid, "app", Options{Previous: true}, &b); !errors.Is(err, ErrNoPreviousRun) {
		t.Errorf("previous of a forgotten container: %v", err)
	}
}

func TestRunKeepsMaxRunBytes(t *testing.T) {
	l := New()
	line := strings.Repeat("x", 1023) // 1 KiB with its newline
	for i := range 1100 {
		l.Print(uid, "app", t0.Add(time.Duration(i)), line)
	}
	got := read(t, l, Options{})
	if len(got) != MaxRunBytes {
		t.Errorf("kept %d bytes, want %d", len(got), MaxRunBytes)
	}
}

// follower reads with Follow in a goroutine it owns; lines shows what it
// wrote so far, and wait its result.
type follower struct {
	mu     sync.Mutex
	out    bytes.Buffer
	flushd int // how many times it was flushed
	cancel context.CancelFunc
	done   chan error
}

func (f *follower) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out.Write(p)
}

func (f *follower) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushd++
}

func (f *follower) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out.String()
}

func follow(t *testing.T, l *Logs, container string, opts Options) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{cancel: cancel, done: make(chan error, 1)}
	opts.Follow = true
	go func() { f.done <- l.Read(ctx, uid, container, opts, f) }()
	t.Cleanup(func() {
		cancel()
		<-f.done
	})
	return f
}

// waitOutput waits until f has written want.
func (f *follower) waitOutput(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.String() != want {
		if time.Now().After(deadline) {
			t.Fatalf("follower wrote %q, want %q", f.String(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// result waits for f to return.
func (f *follower) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-f.done:
		f.done <- err // for the cleanup
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("follower did not return")
		return nil
	}
}

func TestFollowUntilTheRunEnds(t *testing.T) {
	l := logsWith("one", "two")
	tail := int64(1)
	f := follow(t, l, "app", Options{TailLines: &tail})
	f.waitOutput(t, "two\n")
	l.Print(uid, "app", t0.Add(time.Minute), "three")
	f.waitOutput(t, "two\nthree\n")
	l.Print(uid, "app", t0.Add(time.Minute), "four")
	f.waitOutput(t, "two\nthree\nfour\n")
	l.End(uid, "app")
	if err := f.result(t); err != nil {
		t.Fatalf("follow ended with %v, want nil at the run's end", err)
	}
	if got := f.String(); got != "two\nthree\nfour\n" {
		t.Errorf("got %q", got)
	}
	f.mu.Lock()
	flushed := f.flushd
	f.mu.Unlock()
	if flushed < 3 {
		t.Errorf("flushed %d times for 3 batches of lines", flushed)
	}
}

func TestFollowEndsWhenTheContainerRestartsOrThePodGoes(t *testing.T) {
	l := logsWith("one")
	f := follow(t, l, "app", Options{})
	f.waitOutput(t, "one\n")
	l.Start(uid, "app")
	l.Print(uid, "app", t0.Add(time.Minute), "next run")
	if err := f.result(t); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if got := f.String(); got != "one\n" {
		t.Errorf("a follower of one run saw %q", got)
	}

	g := follow(t, l, "app", Options{})
	g.waitOutput(t, "next run\n")
	l.Forget(uid)
	if err := g.result(t); err != nil {
		t.Fatalf("forget: %v", err)
	}
}

func TestFollowWaitsForTheFirstRun(t *testing.T) {
	l := New()
	f := follow(t, l, "app", Options{Timestamps: true})
	l.Start(uid, "other") // another container's run does not end the wait
	l.Start(uid, "app")
	l.Print(uid, "app", t0, "hello")
	f.waitOutput(t, "2026-11-28T12:00:00.000000000Z hello\n")
	l.End(uid, "app")
	if err := f.result(t); err != nil {
		t.Fatal(err)
	}
}

func TestFollowStopsWithItsContext(t *testing.T) {
	l := logsWith("one")
	f := follow(t, l, "app", Options{})
	f.waitOutput(t, "one\n")
	f.cancel()
	if err := f.result(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	// Nor does a follower of a container never started outlive its context.
	g := follow(t, l, "never", Options{})
	g.cancel()
	if err := g.result(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestFollowStopsAtItsLimit(t *testing.T) {
	l := logsWith("one")
	limit := int64(8)
	f := follow(t, l, "app", Options{LimitBytes: &limit})
	f.waitOutput(t, "one\n")
	l.Print(uid, "app", t0.Add(time.Minute), "two and more")
	if err := f.result(t); err != nil {
		t.Fatal(err)
	}
	if got := f.String(); got != "one\ntwo " {
		t.Errorf("got %q", got)
	}
}

// A follower that cannot keep up loses the lines rotated away, not its
// place: it goes on with the oldest line kept.
func TestFollowerBehindRotation(t *testing.T) {
	l := New()
	l.Print(uid, "app", t0, "first")
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		err := l.Read(ctx, uid, "app", Options{Follow: true}, pw)
		pw.Close()
		done <- err
	}()
	r := make([]byte, len("first\n"))
	if _, err := io.ReadFull(pr, r); err != nil || string(r) != "first\n" {
		t.Fatalf("read %q, %v", r, err)
	}
	// The follower now blocks in its next write until the pipe is read;
	// meanwhile the run rotates many times over.
	line := strings.Repeat("y", 1023)
	for i := range 3000 {
		l.Print(uid, "app", t0.Add(time.Duration(i)), line)
	}
	l.Print(uid, "app", t0.Add(time.Hour), "last")
	l.End(uid, "app")
	rest, err := io.ReadAll(io.LimitReader(pr, 4*MaxRunBytes))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(rest), "\nlast\n") {
		t.Errorf("the follower did not reach the last line")
	}
	if len(rest) > 2*MaxRunBytes {
		t.Errorf("the follower wrote %d bytes, more than two runs' worth", len(rest))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
