package apiserver

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"
)

// healthCheck is one named check of /healthz, /livez or /readyz, as
// kube-apiserver's healthz.HealthChecker.
type healthCheck struct {
	name  string
	check func() error
}

// healthChecks are the checks of each endpoint, in kube-apiserver's names:
//   - ping: the server answers HTTP;
//   - etcd: etcd answered the store's latest probe (Storage.Health), which
//     fails within about three seconds of etcd becoming unreachable and
//     passes again, by itself, within a second of its return;
//   - poststarthook/storage-readiness (readyz only): every watch cache is
//     filled and the built-in namespaces exist;
//   - shutdown (readyz only): the server is not shutting down.
func (s *Server) healthChecks() (healthz, livez, readyz []healthCheck) {
	ping := healthCheck{"ping", func() error { return nil }}
	etcd := healthCheck{"etcd", s.store.Health}
	storage := healthCheck{"poststarthook/storage-readiness", func() error {
		select {
		case <-s.ready:
			return nil
		default:
			return fmt.Errorf("watch caches are filling")
		}
	}}
	shutdown := healthCheck{"shutdown", func() error {
		select {
		case <-s.done:
			return fmt.Errorf("the server is shutting down")
		default:
			return nil
		}
	}}
	return []healthCheck{ping, etcd}, []healthCheck{ping, etcd}, []healthCheck{ping, etcd, storage, shutdown}
}

// healthRoutes serves /healthz, /livez and /readyz, and each of their
// checks alone at /<endpoint>/<check>, as kube-apiserver does.
func (s *Server) healthRoutes(r chi.Router) {
	healthz, livez, readyz := s.healthChecks()
	for name, checks := range map[string][]healthCheck{"healthz": healthz, "livez": livez, "readyz": readyz} {
		r.Get("/"+name, s.serveHealth(name, checks))
		for _, c := range checks {
			r.Get("/"+name+"/"+c.name, s.serveCheck(c))
		}
	}
}

// serveHealth answers as kube-apiserver's healthz handler: "ok" when every
// check passes; otherwise 500 and one line per check, "[+]name ok" or
// "[-]name failed: reason withheld" (the reason goes to the log), then
// "<endpoint> check failed". ?verbose lists the checks when all pass too;
// ?exclude=name (repeatable) skips a check.
func (s *Server) serveHealth(endpoint string, checks []healthCheck) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		_, verbose := q["verbose"]
		var excluded []string
		for _, name := range q["exclude"] {
			if name = strings.TrimSpace(name); name != "" {
				excluded = append(excluded, name)
			}
		}
		var out bytes.Buffer
		failed := false
		for _, c := range checks {
			if i := slices.Index(excluded, c.name); i >= 0 {
				excluded = slices.Delete(excluded, i, i+1)
				fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.name)
				continue
			}
			if err := c.check(); err != nil {
				s.log.Debug(endpoint+" check failed", "check", c.name, "err", err)
				fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.name)
				failed = true
				continue
			}
			fmt.Fprintf(&out, "[+]%s ok\n", c.name)
		}
		if len(excluded) > 0 {
			quoted := make([]string, len(excluded))
			for i, name := range excluded {
				quoted[i] = fmt.Sprintf("%q", name)
			}
			fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(quoted, ","))
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if failed {
			http.Error(w, fmt.Sprintf("%s%s check failed", out.String(), endpoint), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if verbose {
			fmt.Fprintf(&out, "%s check passed\n", endpoint)
			_, _ = w.Write(out.Bytes())
			return
		}
		_, _ = w.Write([]byte("ok"))
	}
}

// serveCheck answers one check alone: "ok", or 500 with its reason.
func (s *Server) serveCheck(c healthCheck) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := c.check(); err != nil {
			http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write([]byte("ok"))
	}
}
