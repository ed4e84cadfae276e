package apiserver_test

import (
	"net/http"
	"testing"

	"github.com/minictl/minictl/internal/testenv"
)

// TestHealthEndpoints: /healthz, /livez and /readyz answer as
// kube-apiserver's do: "ok", or with ?verbose one line per check;
// ?exclude skips a check; each check is also served alone.
func TestHealthEndpoints(t *testing.T) {
	env := testenv.Start(t)
	tests := []struct {
		path string
		code int
		body string
	}{
		{"/readyz", http.StatusOK, "ok"},
		{"/readyz?verbose", http.StatusOK, "[+]ping ok\n[+]etcd ok\n[+]poststarthook/storage-readiness ok\n[+]shutdown ok\nreadyz check passed\n"},
		{"/livez?verbose", http.StatusOK, "[+]ping ok\n[+]etcd ok\nlivez check passed\n"},
		{"/healthz?verbose", http.StatusOK, "[+]ping ok\n[+]etcd ok\nhealthz check passed\n"},
		{"/readyz?verbose&exclude=etcd&exclude=nosuch", http.StatusOK, "[+]ping ok\n[+]etcd excluded: ok\n[+]poststarthook/storage-readiness ok\n[+]shutdown ok\n" +
			"warn: some health checks cannot be excluded: no matches for \"nosuch\"\nreadyz check passed\n"},
		{"/readyz/etcd", http.StatusOK, "ok"},
		{"/livez/ping", http.StatusOK, "ok"},
		{"/readyz/poststarthook/storage-readiness", http.StatusOK, "ok"},
		{"/readyz/nosuch", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := do(t, env, http.MethodGet, tt.path, "", nil).want(t, tt.code)
			if tt.body != "" && string(r.body) != tt.body {
				t.Errorf("body:\n%s\nwant:\n%s", r.body, tt.body)
			}
		})
	}
}
