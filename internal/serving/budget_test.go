package serving

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// serve runs a server with budget b on a loopback port until the test ends.
func serve(t *testing.T, b *Budget, timeouts Timeouts) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := timeouts.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte("ok"))
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(b.Listener(ln))
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String()
}

// get sends GET /readyz on c and reads the answer; the connection stays
// open (keep-alive).
func get(t *testing.T, c net.Conn) error {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /readyz: %s", resp.Status)
	}
	return err
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitOpen waits until the budget counts n connections.
func waitOpen(t *testing.T, b *Budget, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.Open() != n {
		if time.Now().After(deadline) {
			t.Fatalf("open connections: %d, want %d", b.Open(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBudgetClosesTheConnectionWaitingLongest(t *testing.T) {
	const max = 5
	b := NewBudget(max, nil)
	addr := serve(t, b, Timeouts{})
	held := make([]net.Conn, max)
	for i := range held {
		held[i] = dial(t, addr)
		if err := get(t, held[i]); err != nil {
			t.Fatalf("connection %d within the budget: %v", i, err)
		}
		waitWaiting(t, b, i+1) // idle in the order they were used
	}
	// Every held connection is idle: each new one takes the place of the
	// one idle longest.
	for i := range 3 {
		waitWaiting(t, b, max)
		if err := get(t, dial(t, addr)); err != nil {
			t.Fatalf("connection %d beyond the budget, with idle ones to close: %v", max+i, err)
		}
		if !closedByServer(held[i]) {
			t.Fatalf("idle connection %d (the longest idle) was not closed", i)
		}
	}
	waitOpen(t, b, max)
	if err := get(t, held[max-1]); err != nil {
		t.Fatalf("the most recently used connection: %v", err)
	}
}

func TestBudgetRefusesConnectionsWhenEveryOneIsBusy(t *testing.T) {
	const max = 5
	b := NewBudget(max, nil)
	release := make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := Timeouts{}.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		_, _ = w.Write([]byte("ok"))
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(b.Listener(ln))
	}()
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	addr := ln.Addr().String()
	busy := make([]net.Conn, max)
	for i := range busy {
		busy[i] = dial(t, addr)
		if _, err := io.WriteString(busy[i], "GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	waitOpen(t, b, max)
	waitWaiting(t, b, 0)
	for i := range 20 {
		if err := get(t, dial(t, addr)); err == nil {
			t.Fatalf("connection %d beyond a budget of busy connections was served", max+i)
		}
	}
	close(release)
	released = true
	for i, c := range busy {
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatalf("busy connection %d lost its answer: %v", i, err)
		}
	}
	if err := get(t, dial(t, addr)); err != nil {
		t.Fatalf("a new connection once requests were answered: %v", err)
	}
}

func TestBudgetGivesBackClosedConnections(t *testing.T) {
	b := NewBudget(2, nil)
	addr := serve(t, b, Timeouts{})
	c := dial(t, addr)
	if err := get(t, c); err != nil {
		t.Fatal(err)
	}
	waitOpen(t, b, 1)
	c.Close()
	waitOpen(t, b, 0)
}

// closedByServer reports whether the server has closed c.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// waitWaiting waits until n of the budget's connections wait for a request.
func waitWaiting(t *testing.T, b *Budget, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		got := b.waiting.Len()
		b.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting connections: %d, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestIdleConnectionsAreClosed(t *testing.T) {
	b := NewBudget(100, nil)
	addr := serve(t, b, Timeouts{Idle: 200 * time.Millisecond, ReadHeader: 200 * time.Millisecond})
	keepAlive, silent := dial(t, addr), dial(t, addr)
	if err := get(t, keepAlive); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]net.Conn{"idle keep-alive": keepAlive, "silent": silent} {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("%s connection: read %v, want EOF (closed by the server)", name, err)
		}
	}
	waitOpen(t, b, 0)
}

func TestConnectionsForKeepsAReserve(t *testing.T) {
	for _, tc := range []struct {
		limit uint64
		want  int
	}{
		{1200, 944},
		{1 << 20, 1<<20 - 1<<20/5},
		{300, 150},
		{1 << 63, 1<<31 - 1},
	} {
		if got := ConnectionsFor(tc.limit); got != tc.want {
			t.Errorf("ConnectionsFor(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
}
