package apiserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/auth/audit"
	"github.com/minictl/minictl/auth/authorizer"
	"github.com/minictl/minictl/auth/node"
	"github.com/minictl/minictl/auth/rbac"
	"github.com/minictl/minictl/auth/user"
)

// A request's way through the server, outermost first, in kube-apiserver's
// order (its DefaultBuildHandlerChain):
//
//	cross-site check   browsers from other origins are kept out (crosssite.go)
//	authentication     who is asking: on the secure port the authenticator chain, on
//	                   the plain loopback listener always the admin (authenticate)
//	audit              what was asked and answered, written as audit Events (audit.go)
//	impersonation      Impersonate-User and friends, for whoever may impersonate (impersonate.go)
//	flow control       a seat in the request's priority level (inflight.go, flowschema.go)
//	authorization      may this user do this verb on this resource or path (authorize)
//	the handler        routes, discovery, the REST verbs (server.go, handlers.go)
//
// The plain listener is minictl's own `kubectl proxy`: it accepts
// connections on loopback only, and everything that reaches it acts as
// the admin (system:masters), as everything behind kubectl proxy acts as
// the proxy's user. Identities, TLS and RBAC are the secure port's.

// securePortKey marks a request that came in on the secure port.
type securePortKey struct{}

// viaProxy reports whether r came in on the plain loopback listener (or
// was handed to the handler directly, as by in-process callers): not on
// the secure port.
func viaProxy(r *http.Request) bool {
	secure, _ := r.Context().Value(securePortKey{}).(bool)
	return !secure
}

// chain is the filters every request goes through on its way to the
// handler; secure says which listener it came in on.
func (s *Server) chain(addr net.Addr, secure bool) http.Handler {
	h := s.authorize(s.handler)
	h = s.flow.limitInflight(h)
	h = s.impersonate(h)
	h = s.audit(h)
	h = s.authenticate(secure, h)
	return s.crossSite(addr, h)
}

// authenticate sets the request's user. On the plain listener that is the
// admin. On the secure port it is whoever the authenticator chain says the
// credentials prove; a credential that proves nothing (expired, forged,
// revoked) is a 401, and no credential at all is system:anonymous, in
// system:unauthenticated, when anonymous requests are allowed.
func (s *Server) authenticate(secure bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if !secure {
			next.ServeHTTP(w, r.WithContext(user.WithUser(ctx, user.AdminInfo())))
			return
		}
		ctx = context.WithValue(ctx, securePortKey{}, true)
		var u *user.Info
		if s.authenticator != nil {
			resp, ok, err := s.authenticator.AuthenticateRequest(r)
			switch {
			case err != nil:
				s.log.Debug("authentication failed", "path", r.URL.Path, "err", err)
				s.metrics.authnAttempts.WithLabelValues("failure").Inc()
				s.auditFailedAuthentication(w, r)
				writeStatus(w, unauthorized())
				return
			case ok:
				s.metrics.authnAttempts.WithLabelValues("success").Inc()
				u = resp.User
			}
		}
		if u == nil {
			if !s.anonymous {
				s.auditFailedAuthentication(w, r)
				writeStatus(w, unauthorized())
				return
			}
			u = user.AnonymousInfo()
		}
		next.ServeHTTP(w, r.WithContext(user.WithUser(ctx, u)))
	})
}

// unauthorized is kube-apiserver's 401: it says nothing of why, so that
// nothing about a credential leaks.
func unauthorized() error {
	return apierrors.NewUnauthorized("Unauthorized")
}

// authorize lets a request through only when the authorizers allow its
// user the request's verb on what it names, and otherwise answers 403
// with kube-apiserver's sentence for the refusal.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := user.From(r.Context())
		a := authorizer.FromRequest(r, u)
		d, reason, err := s.authorizer.Authorize(r.Context(), a)
		if d == authorizer.Allow {
			audit.AddAnnotations(r.Context(), audit.DecisionAnnotation, audit.DecisionAllow, audit.ReasonAnnotation, reason)
			next.ServeHTTP(w, r)
			return
		}
		audit.AddAnnotations(r.Context(), audit.DecisionAnnotation, audit.DecisionForbid, audit.ReasonAnnotation, reason)
		s.metrics.authzDecisions.WithLabelValues("denied").Inc()
		if err != nil {
			s.log.Warn("authorization failed", "user", u.Name, "verb", a.Verb, "path", r.URL.Path, "err", err)
		}
		writeStatus(w, authorizer.Forbidden(a, reason))
	})
}

// ServeSecure answers HTTPS on ln, as Serve answers HTTP, with every
// request authenticated and authorized: the secure port.
func (s *Server) ServeSecure(ctx context.Context, ln net.Listener, cfg *tls.Config) error {
	if cfg == nil || (len(cfg.Certificates) == 0 && cfg.GetCertificate == nil) {
		return fmt.Errorf("apiserver: the secure port needs a serving certificate")
	}
	cfg = cfg.Clone()
	if cfg.ClientAuth == tls.NoClientCert {
		// Client certificates are asked for, and checked by the
		// authenticator chain, not by the handshake: a request without
		// one may still bring a token.
		cfg.ClientAuth = tls.RequestClientCert
	}
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	return s.serve(ctx, tls.NewListener(ln, cfg), true)
}

// newAuthorizer is the union of system:masters' privilege and the named
// modes, in order.
func (s *Server) newAuthorizer(modes []string) (authorizer.Authorizer, error) {
	if len(modes) == 0 {
		modes = []string{"AlwaysAllow"}
	}
	as := []authorizer.Authorizer{authorizer.Privileged}
	for _, m := range modes {
		switch m {
		case "AlwaysAllow":
			as = append(as, authorizer.AlwaysAllow)
		case "RBAC":
			s.rbac = rbac.New(s.rbacIndex)
			s.rules = s.rbac
			as = append(as, s.rbac)
		case "Node":
			as = append(as, node.New(newNodeGraph(s)))
		default:
			return nil, fmt.Errorf("apiserver: unknown authorization mode %q (known: AlwaysAllow, Node, RBAC)", m)
		}
	}
	return authorizer.Union(as...), nil
}
