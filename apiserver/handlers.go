package apiserver

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// serveResource answers every request under /api/v1/ and
// /apis/<group>/<version>/: it reads the path and method into a
// requestInfo and hands it to the verb's handler.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, group, version, rest string) {
	live := s.serving()
	ri, ok := parseResourcePath(live.resources, group, version, splitPath(rest))
	if ok && ri.res.CreateOnly && (ri.name != "" || ri.res.Namespaced && ri.namespace == "") {
		// A review has one path: its collection, in a namespace if it is
		// namespaced.
		ok = false
	}
	if !ok {
		writeStatus(w, newNotFoundPath(r.URL.Path))
		return
	}
	ri.store, ri.cache, ri.terminating = live.stores[ri.res], live.caches[ri.res], live.terminating[ri.res]
	verb, ok := verbFor(r, ri)
	if ri.res.CreateOnly && verb != "create" {
		ok = false // a review is only created
	}
	if ri.res.ReadOnly && verb != "get" && verb != "list" && verb != "watch" {
		ok = false // the resource metrics are only read
	}
	if !ok {
		writeStatus(w, newMethodNotAllowed(r.Method, r.URL.Path))
		return
	}
	ri.verb = verb
	ctx := r.Context()
	if !ri.longRunning() {
		// As kube-apiserver's request deadline: every request but a
		// long-running one ends by the request timeout, and so does every
		// call to etcd it makes.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.requestTimeout)
		defer cancel()
	}
	ctx, warnings := withWarnings(ctx)
	r = r.WithContext(ctx)
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK, warnings: warnings}
	start := time.Now()
	defer func() {
		s.metrics.requests.WithLabelValues(verb, ri.res.Plural, ri.subresource, strconv.Itoa(rec.code)).Inc()
		if !ri.longRunning() {
			s.metrics.latency.WithLabelValues(verb, ri.res.Plural).Observe(time.Since(start).Seconds())
		}
	}()
	if err := s.dispatch(rec, r, ri); err != nil {
		if ctx.Err() != nil {
			err = timedOut(ctx, err)
			// The connection's write timeout may have run out with the
			// request's: give the answer time to be written.
			_ = http.NewResponseController(rec).SetWriteDeadline(time.Now().Add(watchWriteTimeout))
		}
		writeStatus(rec, err)
	}
}

// DefaultRequestTimeout is kube-apiserver's default --request-timeout.
const DefaultRequestTimeout = time.Minute

// timedOut is the answer to a request whose context ended (its deadline
// passed, or its client went away) with err: err if it is already a
// Status, else 504 Timeout rather than an internal error.
func timedOut(ctx context.Context, err error) error {
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return err
	}
	return newRequestTimeout(ctx.Err())
}

func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	// A delete's options may come in its body too: parseDeleteOptions
	// checks them.
	if kind, ok := writeOptionsKind[ri.verb]; ok {
		if err := checkDryRun(kind, r.URL.Query()["dryRun"]); err != nil {
			return err
		}
	}
	if ri.res.CreateOnly {
		return s.serveReview(w, r, ri)
	}
	if ri.res.ReadOnly {
		return s.serveResourceMetrics(w, r, ri)
	}
	if isConnect(ri.subresource) {
		return s.serveConnect(r, ri)
	}
	switch ri.subresource {
	case "status":
		return s.serveStatus(w, r, ri)
	case "scale":
		return s.serveScale(w, r, ri)
	case "binding":
		return s.serveBinding(w, r, ri)
	case "eviction":
		return s.serveEviction(w, r, ri)
	case "finalize":
		return s.serveFinalize(w, r, ri)
	case "approval":
		return s.serveApproval(w, r, ri)
	case "log":
		return s.servePodLog(w, r, ri)
	case "token":
		return s.serveTokenRequest(w, r, ri)
	}
	switch ri.verb {
	case "get":
		return s.serveGet(w, r, ri)
	case "list":
		return s.serveList(w, r, ri)
	case "watch":
		return s.serveWatch(w, r, ri)
	case "create":
		return s.serveCreate(w, r, ri)
	case "update":
		return s.serveUpdate(w, r, ri)
	case "patch":
		return s.servePatch(w, r, ri)
	case "delete":
		return s.serveDelete(w, r, ri)
	case "deletecollection":
		return s.serveDeleteCollection(w, r, ri)
	}
	return newMethodNotAllowed(r.Method, r.URL.Path)
}

// writeOptionsKind names the options kind of each write verb but delete,
// as kube-apiserver names them in errors.
var writeOptionsKind = map[string]string{"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions"}

// statusRecorder remembers the code a handler answered with, for metrics,
// writes the request's warnings as the response starts, and passes Flush
// through for watches.
type statusRecorder struct {
	http.ResponseWriter
	code     int
	warnings *warningSink
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.warnings.writeHeaders(s.Header())
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }
