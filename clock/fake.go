package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a Clock that moves only when told to. Its timers fire during Step
// or SetTime, once the fake time reaches their deadline.
type Fake struct {
	// mu guards now and timers.
	mu  sync.Mutex
	now time.Time
	// timers are the pending timers: created, not yet fired or stopped.
	timers []*fakeTimer
}

// NewFake returns a Fake reading now.
func NewFake(now time.Time) *Fake { return &Fake{now: now} }

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer firing when the fake time reaches Now()+d; at
// once if d <= 0.
func (c *Fake) NewTimer(d time.Duration) Timer {
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
func (c *Fake) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setTimeLocked(c.now.Add(d))
}

// SetTime sets the fake time, firing the timers that are due.
func (c *Fake) SetTime(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setTimeLocked(t)
}

func (c *Fake) setTimeLocked(t time.Time) {
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
func (c *Fake) Waiters() []time.Time {
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
	clock    *Fake
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
