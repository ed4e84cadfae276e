// Package ui is the web view of the cluster: static files (HTML, CSS and
// JavaScript modules, no build step) embedded in the binary and served by
// the API server under /ui/, the way the Dashboard add-on is served.
//
// The page is an ordinary API client of the server that serves it: it
// lists and watches through the same paths, filters and authorisation as
// curl or kubectl, and follows the control plane's timeline from
// /debug/timeline. Nothing here reads the cluster; the files are the same
// for everyone, so serving them tells nobody anything about the cluster.
package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
)

// Prefix is where the page is served.
const Prefix = "/ui/"

//go:embed static
var static embed.FS

// Files are the page's files, rooted at the page (index.html, app.js, ...).
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	return sub
}

// Handler serves the page's files under Prefix: GET and HEAD only, with
// the headers that keep a browser from running anything the files do not
// name themselves (no other origins, no framing, and no inline script but
// index.html's own, named by its hash).
func Handler() http.Handler {
	files := http.StripPrefix(Prefix, http.FileServerFS(Files()))
	csp := contentSecurityPolicy()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// The files change only with the binary; a browser that kept them
		// from an older one would run the old page against the new server.
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// inlineScript is a script element of index.html written in the page.
var inlineScript = regexp.MustCompile(`(?s)<script>(.*?)</script>`)

// contentSecurityPolicy lets the page run its own files and the inline
// scripts of index.html, each by the SHA-256 of its text, so that a
// script injected into the page would not run: a browser runs an inline
// script only if its hash is listed.
func contentSecurityPolicy() string {
	page, err := fs.ReadFile(static, "static/index.html")
	if err != nil {
		panic(err) // the embedded tree always has the page
	}
	scripts := []string{"'self'"}
	for _, m := range inlineScript.FindAllSubmatch(page, -1) {
		sum := sha256.Sum256(m[1])
		scripts = append(scripts, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	return "default-src 'self'; script-src " + strings.Join(scripts, " ") + "; img-src 'self' data:; frame-ancestors 'none'"
}
