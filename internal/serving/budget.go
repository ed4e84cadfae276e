package serving

import (
	"container/list"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Budget caps the connections open at once across the listeners it wraps.
//
// A connection waits while it has no request in progress: a new one that
// has not sent its first request yet, or a keep-alive one between
// requests. When the budget is full, a new connection takes the place of
// the one that has waited longest; only when every connection is serving a
// request is the new one refused. So a flood of idle connections cannot
// lock clients out, and a client loses nothing it cannot get back by
// dialling again (as when a server closes idle keep-alives).
type Budget struct {
	max int
	log *slog.Logger

	mu      sync.Mutex
	open    int
	waiting list.List // of *budgetConn, the longest waiting first
	// Since the last log line, and when it was written.
	refused, evicted int64
	loggedAt         time.Time
}

// budgetLogInterval is how often refusals and evictions are summarised in
// the log: one line per interval, however many there were.
const budgetLogInterval = 10 * time.Second

// NewBudget returns a budget of max connections; log (nil: discard) gets
// one line per interval while connections are refused or evicted.
func NewBudget(max int, log *slog.Logger) *Budget {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Budget{max: max, log: log}
}

// Max is the number of connections the budget allows.
func (b *Budget) Max() int { return b.max }

// Open is the number of connections open now.
func (b *Budget) Open() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open
}

// Listener wraps ln: a connection it accepts beyond the budget replaces the
// one that has waited longest, or is closed at once if none waits. The
// servers that serve it must be built by Timeouts.Server, which tells the
// budget when a connection starts and ends a request.
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
		if bc := l.budget.admit(c); bc != nil {
			return bc, nil
		}
		_ = c.Close()
	}
}

// admit takes c into the budget, making room by closing the connection
// that has waited longest; nil means c is refused.
func (b *Budget) admit(c net.Conn) *budgetConn {
	b.mu.Lock()
	var evict *budgetConn
	if b.open >= b.max {
		front := b.waiting.Front()
		if front == nil {
			b.refused++
			b.logLocked(c.RemoteAddr())
			b.mu.Unlock()
			return nil
		}
		evict = front.Value.(*budgetConn)
		b.forgetLocked(evict)
		b.evicted++
		b.logLocked(c.RemoteAddr())
	}
	bc := &budgetConn{Conn: c, budget: b}
	b.open++
	bc.elem = b.waiting.PushBack(bc)
	b.mu.Unlock()
	if evict != nil {
		_ = evict.Conn.Close()
	}
	return bc
}

func (b *Budget) logLocked(from net.Addr) {
	if time.Since(b.loggedAt) < budgetLogInterval {
		return
	}
	b.log.Warn("connection budget full", "refused", b.refused, "closedWaiting", b.evicted, "max", b.max, "last", from.String())
	b.refused, b.evicted, b.loggedAt = 0, 0, time.Now()
}

// forgetLocked takes c out of the budget: it no longer counts as open.
func (b *Budget) forgetLocked(c *budgetConn) {
	if c.gone {
		return
	}
	c.gone = true
	b.open--
	if c.elem != nil {
		b.waiting.Remove(c.elem)
		c.elem = nil
	}
}

// setState follows c through net/http's connection states: waiting while
// new or idle, not waiting while it serves a request or once hijacked.
func (b *Budget) setState(c *budgetConn, s http.ConnState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.gone {
		return
	}
	switch s {
	case http.StateIdle:
		if c.elem == nil {
			c.elem = b.waiting.PushBack(c)
		}
	case http.StateActive, http.StateHijacked:
		if c.elem != nil {
			b.waiting.Remove(c.elem)
			c.elem = nil
		}
	case http.StateClosed:
		b.forgetLocked(c)
	}
}

// trackState is the ConnState hook of every server Timeouts.Server builds.
// Under TLS, the connection the budget admitted is the one under the
// *tls.Conn. (An HTTP/2 connection is active while a stream is open, idle
// while none is, as an HTTP/1 one is while it serves a request or waits
// for the next.)
func trackState(c net.Conn, s http.ConnState) {
	if bc, ok := accepted(c).(*budgetConn); ok {
		bc.budget.setState(bc, s)
	}
}

// budgetConn gives its place in the budget back when it is closed. Its
// elem and gone fields belong to the budget's lock.
type budgetConn struct {
	net.Conn
	budget *Budget
	elem   *list.Element // in budget.waiting while it waits
	gone   bool          // no longer counted as open
}

func (c *budgetConn) Close() error {
	c.budget.mu.Lock()
	c.budget.forgetLocked(c)
	c.budget.mu.Unlock()
	return c.Conn.Close()
}
