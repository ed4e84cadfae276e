package serving

import (
	"cmp"
	"net/http"
	"time"
)

// Timeouts are the deadlines of one HTTP server's connections, named as
// net/http names them. A zero field takes its default.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers.
	ReadHeader time.Duration
	// Read bounds reading a whole request, headers and body: a stalled
	// upload is dropped when it runs out.
	Read time.Duration
	// Write bounds writing the answer to a request, from the end of its
	// headers; long-running answers extend it as they write.
	Write time.Duration
	// Idle bounds how long a keep-alive connection waits for its next
	// request.
	Idle time.Duration
}

// The defaults. Idle is kube-apiserver's; Read and Write are its default
// --request-timeout; ReadHeader is shorter than its 32s, as no client of
// ours needs that long.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 90 * time.Second
)

// WithDefaults fills the zero fields of t with the defaults.
func (t Timeouts) WithDefaults() Timeouts {
	return Timeouts{
		ReadHeader: cmp.Or(t.ReadHeader, DefaultReadHeaderTimeout),
		Read:       cmp.Or(t.Read, DefaultReadTimeout),
		Write:      cmp.Or(t.Write, DefaultWriteTimeout),
		Idle:       cmp.Or(t.Idle, DefaultIdleTimeout),
	}
}

// maxHeaderBytes is kube-apiserver's limit on a request's headers.
const maxHeaderBytes = 1 << 20

// Server returns a Server for h with t's deadlines (defaults where t is
// zero), which tells a Budget wrapping its listener when each connection
// serves a request. The caller sets BaseContext and the like, and runs it.
func (t Timeouts) Server(h http.Handler) *Server {
	t = t.WithDefaults()
	return NewServer(&http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         trackState,
	})
}
