package sim

import (
	"context"
	"sync"
	"testing"
)

// boots counts a machine's boots and tells whether its software runs.
type boots struct {
	mu      sync.Mutex
	n       int
	running bool
}

func (b *boots) boot(ctx context.Context) error {
	b.mu.Lock()
	b.n++
	b.running = true
	b.mu.Unlock()
	<-ctx.Done()
	b.mu.Lock()
	b.running = false
	b.mu.Unlock()
	return ctx.Err()
}

func (b *boots) state() (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n, b.running
}

func TestRunMachineFollowsTheInstance(t *testing.T) {
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := c.CreateInstance(InstanceSpec{Name: "node-1"})
	var b boots
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.RunMachine(ctx, in.ID, b.boot) }()

	waitFor(t, func() bool { n, up := b.state(); return n == 1 && up })
	if _, err := c.StopInstance(in.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, up := b.state(); return !up })
	if _, err := c.StartInstance(in.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { n, up := b.state(); return n == 2 && up })

	// Load balancers and routes are not the machine's business.
	if _, _, err := c.PutLoadBalancer("lb", spec2()); err != nil {
		t.Fatal(err)
	}
	if n, up := b.state(); n != 2 || !up {
		t.Fatalf("after an unrelated change: %d boots, running %v", n, up)
	}

	if err := c.DeleteInstance(in.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("RunMachine after the instance is deleted: %v", err)
	}
	if n, up := b.state(); n != 2 || up {
		t.Fatalf("after delete: %d boots, running %v", n, up)
	}
}

func TestRunMachineStopsWithItsContext(t *testing.T) {
	c, _ := New(Options{})
	in, _ := c.CreateInstance(InstanceSpec{Name: "node-1"})
	var b boots
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.RunMachine(ctx, in.ID, b.boot) }()
	waitFor(t, func() bool { _, up := b.state(); return up })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, up := b.state(); up {
		t.Fatal("the machine's software outlived RunMachine")
	}
}

func TestRunMachineOfAStoppedInstanceWaits(t *testing.T) {
	c, _ := New(Options{})
	in, _ := c.CreateInstance(InstanceSpec{Name: "node-1"})
	c.StopInstance(in.ID)
	var b boots
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.RunMachine(ctx, in.ID, b.boot) }()
	c.StartInstance(in.ID)
	waitFor(t, func() bool { n, up := b.state(); return n == 1 && up })
	cancel()
	<-done
}
