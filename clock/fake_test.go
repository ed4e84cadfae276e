package clock

import (
	"context"
	"testing"
	"time"
)

func TestFakeTimers(t *testing.T) {
	clock := NewFake(time.Unix(0, 0))
	t1 := clock.NewTimer(time.Second)
	t2 := clock.NewTimer(2 * time.Second)
	if !t2.Stop() || t2.Stop() {
		t.Fatal("Stop should report true once")
	}
	clock.Step(time.Second)
	select {
	case <-t1.C():
	default:
		t.Fatal("t1 did not fire")
	}
	if t1.Stop() {
		t.Fatal("Stop of a fired timer reported true")
	}
	clock.Step(time.Hour)
	select {
	case <-t2.C():
		t.Fatal("stopped timer fired")
	default:
	}
	select {
	case <-clock.NewTimer(0).C():
	default:
		t.Fatal("a zero timer did not fire at once")
	}
}

func TestFakeWaitersAreEarliestFirst(t *testing.T) {
	start := time.Unix(100, 0)
	clock := NewFake(start)
	clock.NewTimer(3 * time.Second)
	clock.NewTimer(time.Second)
	got := clock.Waiters()
	if len(got) != 2 || !got[0].Equal(start.Add(time.Second)) || !got[1].Equal(start.Add(3*time.Second)) {
		t.Fatalf("Waiters() = %v, want [+1s +3s]", got)
	}
	clock.SetTime(start.Add(2 * time.Second))
	if got := clock.Waiters(); len(got) != 1 {
		t.Fatalf("after SetTime past the first deadline, Waiters() = %v, want one", got)
	}
}

func TestOrDefaultsToReal(t *testing.T) {
	if _, ok := Or(nil).(Real); !ok {
		t.Error("Or(nil) is not Real")
	}
	f := NewFake(time.Unix(0, 0))
	if Or(f) != Clock(f) {
		t.Error("Or(f) is not f")
	}
}

func TestSleep(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	done := make(chan bool, 1)
	go func() { done <- Sleep(context.Background(), c, time.Second) }()
	for deadline := time.Now().Add(10 * time.Second); len(c.Waiters()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Sleep set no timer")
		}
	}
	c.Step(time.Second)
	if !<-done {
		t.Error("Sleep reported false after its time passed")
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- Sleep(ctx, c, time.Hour) }()
	cancel()
	if <-done {
		t.Error("Sleep reported true for a cancelled context")
	}
	if Sleep(ctx, c, 0) {
		t.Error("Sleep(0) reported true for a cancelled context")
	}
}
