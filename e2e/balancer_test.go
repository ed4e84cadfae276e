package e2e

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// balancer is a TCP load balancer on loopback in front of several API
// servers, as a cluster's control-plane endpoint is: each new connection
// goes to the next backend that accepts one, so that clients of the
// balancer carry on when a backend dies (their open connections to it
// break, and they connect again). It stops when the test ends.
type balancer struct {
	ln       net.Listener
	backends []string

	mu    sync.Mutex
	next  int
	conns map[net.Conn]struct{} // open, both sides; nil once the test ended
	wg    sync.WaitGroup
}

func newBalancer(t *testing.T, backends ...string) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{ln: ln, backends: backends, conns: map[net.Conn]struct{}{}}
	b.wg.Go(b.accept)
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		for c := range b.conns {
			c.Close()
		}
		b.conns = nil
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

// URL is where clients reach the balancer.
func (b *balancer) URL() string { return "http://" + b.ln.Addr().String() }

func (b *balancer) accept() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return // closed
		}
		b.wg.Go(func() { b.serve(c) })
	}
}

// serve pipes c to the first backend, from the next in turn, that accepts
// a connection; it closes c if none does.
func (b *balancer) serve(c net.Conn) {
	if !b.track(c) {
		c.Close()
		return
	}
	defer b.untrack(c)
	b.mu.Lock()
	start := b.next
	b.next++
	b.mu.Unlock()
	for i := range b.backends {
		up, err := net.DialTimeout("tcp", b.backends[(start+i)%len(b.backends)], time.Second)
		if err != nil {
			continue
		}
		if !b.track(up) {
			up.Close()
			return
		}
		defer b.untrack(up)
		done := make(chan struct{}, 2)
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			// One side ended: end both, so that the other copy returns.
			dst.Close()
			src.Close()
			done <- struct{}{}
		}
		go pipe(up, c)
		go pipe(c, up)
		<-done
		<-done
		return
	}
}

// track adds c to the open connections; false once the balancer is closed.
func (b *balancer) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns == nil {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *balancer) untrack(c net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c.Close()
	delete(b.conns, c)
}
