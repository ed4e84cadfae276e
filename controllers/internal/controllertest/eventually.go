package controllertest

import (
	"testing"
	"time"
)

// Poll is how long to wait for a condition and how often to ask it.
type Poll struct {
	Timeout  time.Duration
	Interval time.Duration
}

// Eventually waits, as Poll{Timeout: 30s, Interval: 20ms}.Until, for cond.
func Eventually(t testing.TB, what string, cond func() (ok bool, why string)) {
	t.Helper()
	Poll{Timeout: 30 * time.Second, Interval: 20 * time.Millisecond}.Until(t, what, cond)
}

// Until asks cond every p.Interval until it holds, and fails the test after
// p.Timeout with what it waited for and the last why cond gave.
func (p Poll) Until(t testing.TB, what string, cond func() (ok bool, why string)) {
	t.Helper()
	deadline := time.Now().Add(p.Timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if why == "" {
				t.Fatalf("timed out waiting for %s", what)
			}
			t.Fatalf("timed out waiting for %s: %s", what, why)
		}
		time.Sleep(p.Interval)
	}
}
