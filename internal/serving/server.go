package serving

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server is an http.Server that knows which of its connections have not
// begun a request yet, so that stopping it does not wait for them.
//
// net/http's Shutdown closes idle keep-alive connections at once, but
// gives a connection that has sent nothing five seconds to send its first
// request. A client that opened one and went away (a request cancelled
// while its connection was dialled: the dial goes on and the connection
// waits in the client's pool; a browser's preconnect) would hold every
// stop for those five seconds. Shutdown closes such connections as it
// closes idle ones: nothing was asked on them, so nothing is lost. (An
// HTTP/2 connection leaves the new state once its client's preface is
// read, as its server reports it active, then idle. An idle one is left
// to the HTTP/2 server, which closes it a second after its GOAWAY: it
// reports a stream done before it has flushed the stream's last frame.)
type Server struct {
	*http.Server
	// Log (nil: discard) hears of connections closed when the grace ran
	// out.
	Log *slog.Logger

	mu    sync.Mutex
	fresh map[net.Conn]net.Conn // by the accepted connection: the one net/http serves (a *tls.Conn under TLS)
}

// NewServer returns srv as a Server; it follows srv's connections through
// its ConnState hook, after the hook srv had.
func NewServer(srv *http.Server) *Server {
	s := &Server{Server: srv, fresh: map[net.Conn]net.Conn{}}
	hook := srv.ConnState
	srv.ConnState = func(c net.Conn, state http.ConnState) {
		s.track(c, state)
		if hook != nil {
			hook(c, state)
		}
	}
	return s
}

// accepted is the connection a listener accepted, under its TLS.
func accepted(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		return tc.NetConn()
	}
	return c
}

func (s *Server) track(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if state == http.StateNew {
		s.fresh[accepted(c)] = c
	} else {
		delete(s.fresh, accepted(c))
	}
}

// closeFresh closes every connection that has not begun a request.
func (s *Server) closeFresh() {
	s.mu.Lock()
	unused := make([]net.Conn, 0, len(s.fresh))
	for k, c := range s.fresh {
		unused = append(unused, c)
		delete(s.fresh, k)
	}
	s.mu.Unlock()
	for _, c := range unused {
		_ = c.Close()
	}
}

// sweepInterval is how often Shutdown closes the connections that have
// not begun a request, until it returns: net/http polls for idle ones no
// faster.
const sweepInterval = 50 * time.Millisecond

// Shutdown is http.Server.Shutdown that does not wait for connections
// that never began a request: it stops accepting, closes idle and unused
// connections, and waits for the requests in flight until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- s.Server.Shutdown(ctx) }()
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-t.C:
			// After the first tick the listeners are closed: no
			// connection comes after the sweep it should have been in.
			s.closeFresh()
		}
	}
}

// Run answers on ln until ctx ends, then stops: it stops accepting, closes
// the connections that wait (idle, or never used), gives the requests in
// flight grace to finish, and closes what is left. Functions registered
// with RegisterOnShutdown run as it begins to stop (ending watches, say).
// It returns nil once ctx stopped it, and Serve's error if serving failed.
func (s *Server) Run(ctx context.Context, ln net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := s.Shutdown(sctx); errors.Is(err, context.DeadlineExceeded) {
		// A stream still writing to a client that stopped reading, which
		// its write deadline would end only now: the grace is over, and
		// what is left is closed, as a server that stops must.
		if s.Log != nil {
			s.Log.Warn("connections still open after the shutdown grace; closing them", "listener", ln.Addr().String(), "grace", grace)
		}
		_ = s.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
