package apiserver_test

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestUIFiles: the web view's files are served at /ui/ on the plain
// listener, with headers that let the page run only its own files; /ui
// sends the browser to /ui/; only GET and HEAD are answered.
func TestUIFiles(t *testing.T) {
	e := startRBACEnv(t)
	r := do(t, e.Env, http.MethodGet, "/ui/", "", nil).want(t, http.StatusOK)
	if !strings.Contains(string(r.body), `<script type="module" src="app.js">`) {
		t.Errorf("GET /ui/ is not the page:\n%s", truncate(r.body))
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("Content-Security-Policy %q, want default-src 'self'", csp)
	}
	if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options %q, want nosniff", got)
	}
	js := do(t, e.Env, http.MethodGet, "/ui/app.js", "", nil).want(t, http.StatusOK)
	if ct := js.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
		t.Errorf("app.js served as %q: a browser runs a module only as JavaScript", ct)
	}
	do(t, e.Env, http.MethodGet, "/ui/no-such-file.js", "", nil).want(t, http.StatusNotFound)

	req, _ := http.NewRequest(http.MethodGet, e.URL+"/ui", nil)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui: %d to %q, want 301 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	do(t, e.Env, http.MethodPost, "/ui/app.js", jsonType, map[string]any{}).wantStatus(t, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed)
}

// TestUIAuthorization: on the secure port the files go through
// authentication and RBAC like any request: every authenticated user may
// fetch them (system:discovery, as /version), an anonymous one may not,
// and what the page reads is authorised request by request.
func TestUIAuthorization(t *testing.T) {
	e := startRBACEnv(t)
	e.as(t, "alice", http.MethodGet, "/ui/", nil).want(t, http.StatusOK)
	e.as(t, "alice", http.MethodGet, "/ui/app.js", nil).want(t, http.StatusOK)
	e.as(t, "", http.MethodGet, "/ui/", nil).wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
	// The page's first list (resourceVersion=0, from the watch cache) is alice's to be allowed, and she is not.
	e.as(t, "alice", http.MethodGet, "/api/v1/pods?limit=500&resourceVersion=0", nil).wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
}
