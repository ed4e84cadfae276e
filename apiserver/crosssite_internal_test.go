package apiserver

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// /debug/ (profiles, the timeline) answers loopback clients only, whatever
// address the server listens on.
func TestDebugServedToLoopbackOnly(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	c := &crossSite{next: ok} // a listener on all addresses
	for _, tc := range []struct {
		remote, path string
		want         int
	}{
		{"192.0.2.7:40000", "/debug/pprof/heap", http.StatusForbidden},
		{"192.0.2.7:40000", "/debug/timeline", http.StatusForbidden},
		{"[2001:db8::1]:40000", "/debug/pprof/", http.StatusForbidden},
		{"192.0.2.7:40000", "/api/v1/namespaces", http.StatusOK},
		{"127.0.0.1:40000", "/debug/pprof/heap", http.StatusOK},
		{"[::1]:40000", "/debug/timeline", http.StatusOK},
	} {
		r := httptest.NewRequest(http.MethodGet, tc.path, nil)
		r.RemoteAddr = tc.remote
		w := httptest.NewRecorder()
		c.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("GET %s from %s: HTTP %d, want %d", tc.path, tc.remote, w.Code, tc.want)
		}
	}
}

func TestCORSAllowedOriginsMustCompile(t *testing.T) {
	if _, err := compileOrigins([]string{`^https://ok\.example$`, `(`}); err == nil {
		t.Fatal("an invalid expression was accepted")
	}
}
