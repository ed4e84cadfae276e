package apiserver

import (
	"net/http"
	"net/http/pprof"
	"strings"
)

// EnableProfiling serves Go's profiles under /debug/pprof/ on the API
// port, as kube-apiserver's --profiling does: CPU, heap, allocations,
// goroutines, mutex and block profiles for `go tool pprof`. Call it before
// Serve. Serve answers /debug/ to loopback clients only (crosssite.go).
func (s *Server) EnableProfiling() {
	api := s.handler
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
			mux.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}
