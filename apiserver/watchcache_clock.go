package apiserver

import "time"

// cacheClock is where the watch cache's waits come from: the backoff
// before it lists again, and waitFresh's deadline and retries. Tests pass
// one they move by hand.
type cacheClock interface {
	NewTimer(d time.Duration) cacheTimer
}

// cacheTimer is a one-shot timer from a cacheClock.
type cacheTimer interface {
	// C delivers the time once the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// wallClock is the real time.
type wallClock struct{}

func (wallClock) NewTimer(d time.Duration) cacheTimer { return wallTimer{time.NewTimer(d)} }

type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time { return w.t.C }
func (w wallTimer) Stop() bool          { return w.t.Stop() }
