// Package controllertest is what the controllers' integration tests share:
// a real API server with a client and an informer factory, controllers run
// until the test ends, a logger that writes to the test's log, and a wait
// on a condition with a deadline. Only tests import it.
//
// Design, one line per part:
//
//   - env.go: Start, a real API server (internal/testenv) and a client of
//     it; Run, controllers on a started informer factory.
//   - logger.go: Logger, a slog.Logger that writes to t.Log.
//   - eventually.go: Eventually and Poll, waiting on a condition with a
//     deadline.
//
// Properties:
//
//   - Everything started here stops when the test ends, in the reverse
//     order of starting: controllers, then informers, then the API server.
//   - A Logger outlives nothing: lines written after the test ends are
//     dropped, never passed to t.Log.
package controllertest
