package serving

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Budget caps the connections open at once across the listeners it wraps.
type Budget struct {
	max  int64
	open atomic.Int64
	log  *slog.Logger

	mu       sync.Mutex
	refused  int64     // since the last log line
	loggedAt time.Time // when the last log line was written
}

// refusedLogInterval is how often refusals are summarised in the log: one
// line per interval, however many there were.
const refusedLogInterval = 10 * time.Second

// NewBudget returns a budget of max connections; log (nil: discard) gets
// one line per interval while connections are refused.
func NewBudget(max int, log *slog.Logger) *Budget {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Budget{max: int64(max), log: log}
}

// Max is the number of connections the budget allows.
func (b *Budget) Max() int { return int(b.max) }

// Open is the number of connections open now.
func (b *Budget) Open() int { return int(b.open.Load()) }

// Listener wraps ln: a connection it accepts beyond the budget is closed
// at once.
func (b *Budget) Listener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, budget: b}
}

type limitListener struct {
	net.Listener
	budget *Budget
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.budget.open.Add(1) <= l.budget.max {
			return &budgetConn{Conn: c, budget: l.budget}, nil
		}
		l.budget.open.Add(-1)
		_ = c.Close()
		l.budget.refused1(c.RemoteAddr())
	}
}

func (b *Budget) refused1(from net.Addr) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refused++
	if time.Since(b.loggedAt) < refusedLogInterval {
		return
	}
	b.log.Warn("connections refused: too many open", "refused", b.refused, "max", b.max, "last", from.String())
	b.refused, b.loggedAt = 0, time.Now()
}

// budgetConn gives its place in the budget back when it is closed.
type budgetConn struct {
	net.Conn
	budget *Budget
	closed atomic.Bool
}

func (c *budgetConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.budget.open.Add(-1)
	}
	return c.Conn.Close()
}
