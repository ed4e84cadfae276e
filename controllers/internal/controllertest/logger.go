package controllertest

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Logger returns a logger, at debug level, that writes each line to t.Log
// (shown for failures and with -v) until the test ends, and drops lines
// after: a controller still stopping may log, and t.Log must not be called
// once the test is over.
func Logger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testWriter passes lines to t.Log while closed is false.
type testWriter struct {
	mu     sync.Mutex
	t      testing.TB
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}
