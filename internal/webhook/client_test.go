package webhook_test

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/minictl/minictl/internal/webhook"
)

// TestPostRefuses: an answer past the limit, a status other than 200, a
// redirect, a plain-HTTP url and an unknown CA are errors, never a
// partial answer.
func TestPostRefuses(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			_, _ = w.Write([]byte(strings.Repeat("x", 2048)))
		case "/teapot":
			http.Error(w, "no", http.StatusTeapot)
		case "/redirect":
			http.Redirect(w, r, "http://127.0.0.1:1/", http.StatusFound)
		case "/slow":
			<-r.Context().Done()
		default:
			_, _ = w.Write([]byte(`{}`))
		}
	}))
	defer srv.Close()
	ca := srv.Certificate()
	caPEM := pemOf(ca.Raw)
	c := webhook.NewClient(webhook.Options{MaxResponseBytes: 1024})
	defer c.Close()
	ctx := context.Background()

	if out, err := c.Post(ctx, webhook.ClientConfig{URL: srv.URL + "/ok", CABundle: caPEM}, time.Second, []byte(`{}`)); err != nil || string(out) != "{}" {
		t.Fatalf("ok: %q, %v", out, err)
	}
	for path, want := range map[string]string{
		"/big": "larger than 1024 bytes", "/teapot": "status code 418", "/redirect": "status code 302",
		"/slow": "deadline exceeded",
	} {
		_, err := c.Post(ctx, webhook.ClientConfig{URL: srv.URL + path, CABundle: caPEM}, 200*time.Millisecond, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", path, err, want)
		}
	}
	if _, err := c.Post(ctx, webhook.ClientConfig{URL: srv.URL + "/ok"}, 20*time.Second, nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the caBundle: got %v, want the certificate refused", err)
	}
	if _, err := c.Post(ctx, webhook.ClientConfig{URL: "http://127.0.0.1:1/"}, time.Second, nil); err == nil || !strings.Contains(err.Error(), "not https") {
		t.Errorf("plain http: got %v, want refused", err)
	}
}

func pemOf(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
