// Package simtest starts a simulated cloud for a test: the real cloud/sim
// server on a loopback port, not a stand-in for it.
package simtest

import (
	"context"
	"net"
	"testing"

	"github.com/minictl/minictl/cloud/sim"
)

// Start serves a fresh, in-memory simulated cloud on a loopback port until
// the test ends, and returns a client of it.
func Start(t testing.TB) *sim.Client {
	t.Helper()
	c, err := sim.New(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cloud: %v", err)
		}
	})
	cl, err := sim.NewClient("http://"+ln.Addr().String(), sim.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
