package ui_test

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/minictl/minictl/ui"
)

// TestInlineScriptAllowed: the page's inline script, which sends the first
// lists, is the only one a browser may run in the page: the
// Content-Security-Policy names it by the SHA-256 of its text, exactly as
// served, and allows no other inline script.
func TestInlineScriptAllowed(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(ui.Prefix, ui.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + ui.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", ui.Prefix, resp.StatusCode, err)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if strings.Contains(csp, "unsafe-inline") {
		t.Errorf("Content-Security-Policy %q allows every inline script", csp)
	}

	// The text of each <script> without a src, as a browser hashes it.
	var inline []string
	for rest := string(page); ; {
		i := strings.Index(rest, "<script")
		if i < 0 {
			break
		}
		rest = rest[i:]
		tagEnd := strings.IndexByte(rest, '>')
		end := strings.Index(rest, "</script>")
		if tagEnd < 0 || end < 0 {
			t.Fatalf("unterminated script element in the page: %.80q", rest)
		}
		if !strings.Contains(rest[:tagEnd], "src=") {
			inline = append(inline, rest[tagEnd+1:end])
		}
		rest = rest[end:]
	}
	if len(inline) != 1 || !strings.Contains(inline[0], "fetch(") {
		t.Fatalf("the page has %d inline scripts, want the one that sends the first lists", len(inline))
	}
	sum := sha256.Sum256([]byte(inline[0]))
	if want := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, "script-src 'self' "+want) {
		t.Errorf("Content-Security-Policy %q does not let the page's inline script run: want script-src 'self' %s", csp, want)
	}
}
