package workqueue

import (
	"sort"
	"sync"
	"time"
)

// Clock is the source of time for delays, rate limits and metrics. Tests
// pass a FakeClock.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer from a Clock.
type Timer interface {
	// C delivers the time once the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// FakeClock is a Clock that moves only when told to. Its timers fire during
// Step or SetTime, once the fake time reaches their deadline.
type FakeClock struct {
	// mu guards now and timers.
	mu  sync.Mutex
	now time.Time
	// timers are the pending timers: created, not yet fired or stopped.
	timers []*fakeTimer
}

// NewFakeClock returns a FakeClock reading now.
func NewFakeClock(now time.Time) *FakeClock { return &FakeClock{now: now} }

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer firing when the fake time reaches Now()+d; at
// once if d <= 0.
func (c *FakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{clock: c, deadline: c.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

// Step moves the fake time forward by d, firing the timers that are due.
func (c *FakeClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setTimeLocked(c.now.Add(d))
}

// SetTime sets the fake time, firing the timers that are due.
func (c *FakeClock) SetTime(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setTimeLocked(t)
}

func (c *FakeClock) setTimeLocked(t time.Time) {
	c.now = t
	pending := c.timers[:0]
	for _, tm := range c.timers {
		if tm.deadline.After(t) {
			pending = append(pending, tm)
			continue
		}
		tm.c <- t // buffered 1, and each timer fires once
	}
	clear(c.timers[len(pending):])
	c.timers = pending
}

// Waiters returns the deadlines of the pending timers, earliest first. Tests
// wait for the deadline they expect before calling Step, so that a timer is
// never created after the step it should have seen.
func (c *FakeClock) Waiters() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Time, 0, len(c.timers))
	for _, t := range c.timers {
		out = append(out, t.deadline)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

type fakeTimer struct {
	clock    *FakeClock
	deadline time.Time
	c        chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, tm := range c.timers {
		if tm == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}
