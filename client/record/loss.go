package record

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/clock"
)

// lossLogInterval is how often dropped events are summarised in the log:
// one line per interval, however many were dropped.
const lossLogInterval = 10 * time.Second

// lossLog counts the events a recorder drops because its queue is full,
// and tells the log in one warning per lossLogInterval, never one per
// event: the first drop after a quiet interval is told at once, the ones
// after it when the interval is over, at the next drop or the next flush.
//
// It is safe for concurrent use.
type lossLog struct {
	log       *slog.Logger
	clock     clock.Clock
	queueSize int

	mu sync.Mutex
	// dropped counts the drops since the last line, and last is the latest
	// of them; loggedAt is when the last line was written.
	dropped  int
	last     *corev1.Event
	loggedAt time.Time
}

// lost counts ev as dropped, and writes the line if one is due.
func (l *lossLog) lost(ev *corev1.Event) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropped++
	l.last = ev
	if now.Sub(l.loggedAt) >= lossLogInterval {
		l.writeLocked(now)
	}
}

// flush writes the line of the drops not told yet, if one is due.
func (l *lossLog) flush() {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped > 0 && now.Sub(l.loggedAt) >= lossLogInterval {
		l.writeLocked(now)
	}
}

func (l *lossLog) writeLocked(now time.Time) {
	ev := l.last
	l.log.Warn(fmt.Sprintf("events dropped: %d, the queue of %d was full", l.dropped, l.queueSize),
		slog.Int("dropped", l.dropped), slog.Int("queueSize", l.queueSize),
		slog.String("lastObject", ev.InvolvedObject.Namespace+"/"+ev.InvolvedObject.Name),
		slog.String("lastReason", ev.Reason))
	l.dropped, l.last, l.loggedAt = 0, nil, now
}
