package controllertest

import (
	"testing"
	"time"
)

func TestEventuallyReturnsOnceCondHolds(t *testing.T) {
	n := 0
	Poll{Timeout: 10 * time.Second, Interval: time.Millisecond}.Until(t, "the third ask", func() (bool, string) {
		n++
		return n == 3, ""
	})
	if n != 3 {
		t.Errorf("cond asked %d times, want 3", n)
	}
}

// A line logged after the test has ended is dropped, not passed to t.Log
// (which would panic).
func TestLoggerDropsLinesAfterTheTest(t *testing.T) {
	var log interface{ Info(string, ...any) }
	t.Run("inner", func(t *testing.T) {
		l := Logger(t)
		l.Info("during the test")
		log = l
	})
	log.Info("after the test")
}
