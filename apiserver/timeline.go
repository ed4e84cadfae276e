package apiserver

import (
	"net/http"

	"github.com/minictl/minictl/internal/timeline"
)

// serveTimeline streams the control plane's timeline (what minictl up
// prints) as newline-delimited JSON over a chunked response, like a watch:
// one line per decision, filtered by component, namespace and object, and
// with the informer pipeline's stages when stages=true. It serves what the
// components in this process decide; `minictl trace` reads it.
func (s *Server) serveTimeline(w http.ResponseWriter, r *http.Request) {
	if s.timeline == nil {
		writeStatus(w, newNotFoundPath(r.URL.Path))
		return
	}
	q := r.URL.Query()
	f := timeline.Filter{
		Component: q.Get("component"),
		Namespace: q.Get("namespace"),
		Object:    q.Get("object"),
		Stages:    isTrue(q.Get("stages")),
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	entries := s.timeline.Subscribe(r.Context(), f)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	dl := &writeDeadline{rc: http.NewResponseController(w)}
	for {
		select {
		case e, ok := <-entries:
			if !ok {
				return
			}
			dl.arm()
			if _, err := w.Write(timeline.MarshalLine(e)); err != nil {
				return
			}
			flusher.Flush()
			dl.idle()
		case <-s.done:
			return
		case <-r.Context().Done():
			return
		}
	}
}
