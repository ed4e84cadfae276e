package apiserver

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// crossSite keeps a web page in a browser from using the plain listener,
// which has no authentication:
//   - on a loopback listener, a Host that is not a loopback name or address
//     is refused (a DNS-rebinding page reaches 127.0.0.1 under its own name);
//   - a request from another origin (an Origin header not this server's) is
//     refused unless --cors-allowed-origins allows it, and then gets
//     kube-apiserver's CORS headers, a preflight its 204;
//   - /debug/ (profiles, the timeline) answers only clients on loopback.
//
// Writes without a Content-Type are refused by the decoders (415).
type crossSite struct {
	loopback bool             // the listener is on loopback
	origins  []*regexp.Regexp // --cors-allowed-origins
	next     http.Handler
}

// compileOrigins compiles --cors-allowed-origins. Like kube-apiserver's,
// each is a regular expression matched anywhere in the Origin: anchor it
// (^https://example\.com$) to match one origin.
func compileOrigins(exprs []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, e := range exprs {
		re, err := regexp.Compile(e)
		if err != nil {
			return nil, fmt.Errorf("cors allowed origin %q: %w", e, err)
		}
		out = append(out, re)
	}
	return out, nil
}

func (s *Server) crossSite(addr net.Addr, next http.Handler) http.Handler {
	c := &crossSite{origins: s.corsOrigins, next: next}
	if tcp, ok := addr.(*net.TCPAddr); ok {
		c.loopback = tcp.IP.IsLoopback()
	}
	return c
}

func (c *crossSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.loopback && !loopbackHost(r.Host) {
		writeStatus(w, refused(fmt.Sprintf("host %q is not a loopback name or address; this server listens on loopback only", r.Host)))
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" && origin != "http://"+r.Host {
		if !c.allowed(origin) {
			writeStatus(w, refused(fmt.Sprintf("cross-origin request from %q refused: allow it with --cors-allowed-origins", origin)))
			return
		}
		// kube-apiserver's CORS answer.
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Methods", "POST, GET, OPTIONS, PUT, DELETE, PATCH")
		h.Set("Access-Control-Allow-Headers", "Content-Type, Content-Length, Accept-Encoding, X-CSRF-Token, Authorization, X-Requested-With, If-Modified-Since")
		h.Set("Access-Control-Expose-Headers", "Date")
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	if strings.HasPrefix(r.URL.Path, "/debug/") && !loopbackRemote(r.RemoteAddr) {
		writeStatus(w, refused(fmt.Sprintf("%s is served to loopback clients only", r.URL.Path)))
		return
	}
	c.next.ServeHTTP(w, r)
}

func (c *crossSite) allowed(origin string) bool {
	for _, re := range c.origins {
		if re.MatchString(origin) {
			return true
		}
	}
	return false
}

// loopbackHost reports whether a Host header names loopback: localhost (or
// a name under it), 127.0.0.0/8 or ::1. A request with no Host (HTTP/1.0)
// passes: browsers always send one.
func loopbackHost(host string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func loopbackRemote(remote string) bool {
	ap, err := netip.ParseAddrPort(remote)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

func refused(msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusForbidden,
		Reason:  metav1.StatusReasonForbidden,
		Message: "forbidden: " + msg,
	}}
}
