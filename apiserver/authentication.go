package apiserver

import (
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/auth/authenticator"
	"github.com/minictl/minictl/auth/authenticator/bootstrap"
	saauth "github.com/minictl/minictl/auth/authenticator/serviceaccount"
	"github.com/minictl/minictl/auth/authenticator/tokenfile"
	x509auth "github.com/minictl/minictl/auth/authenticator/x509"
	"github.com/minictl/minictl/auth/serviceaccount"
)

// Authentication is how the secure port proves who asks, kube-apiserver's
// authentication flags. Every part is optional; the authenticators are
// asked in kube's order: the client certificate, then the bearer token
// (the token file, ServiceAccount tokens, bootstrap tokens), then
// Config.Authenticator.
type Authentication struct {
	// ClientCA verifies client certificates (--client-ca-file); nil: they
	// prove nothing.
	ClientCA *x509.CertPool
	// TokenAuthFile is the static token CSV (--token-auth-file).
	TokenAuthFile string
	// ServiceAccountIssuer is the iss of the tokens the server issues
	// and accepts (--service-account-issuer).
	ServiceAccountIssuer string
	// ServiceAccountKeys verify ServiceAccount tokens, bound and legacy
	// (--service-account-key-file); the signing key's public half is
	// always among them.
	ServiceAccountKeys []crypto.PublicKey
	// ServiceAccountSigningKey signs the tokens of TokenRequests
	// (--service-account-signing-key-file); nil: the TokenRequest API is
	// not served.
	ServiceAccountSigningKey crypto.Signer
	// APIAudiences are the audiences a token must be meant for to prove
	// anything to this server, and the default of a TokenRequest's
	// (--api-audiences); empty: the issuer alone, as kube.
	APIAudiences []string
	// ServiceAccountMaxTokenExpiration caps the lifetime of a requested
	// token (--service-account-max-token-expiration); 0: no cap.
	ServiceAccountMaxTokenExpiration time.Duration
	// BootstrapTokenAuth accepts bootstrap tokens
	// (--enable-bootstrap-token-auth).
	BootstrapTokenAuth bool
}

// tokenIssuer issues the tokens of TokenRequests (tokenrequest.go).
type tokenIssuer struct {
	signer    *serviceaccount.Signer
	issuer    string
	audiences []string
	max       time.Duration
}

// setupAuthentication builds s.authenticator and s.tokens from cfg, and
// the token issuer when a signing key is given.
func (s *Server) setupAuthentication(cfg Config) error {
	a := cfg.Authentication
	audiences := a.APIAudiences
	if len(audiences) == 0 && a.ServiceAccountIssuer != "" {
		audiences = []string{a.ServiceAccountIssuer}
	}
	s.apiAudiences = audiences
	keys := slices.Clone(a.ServiceAccountKeys)
	if a.ServiceAccountSigningKey != nil {
		if a.ServiceAccountIssuer == "" {
			return errors.New("apiserver: a service account signing key needs a service account issuer")
		}
		signer, err := serviceaccount.NewSigner(a.ServiceAccountSigningKey)
		if err != nil {
			return fmt.Errorf("apiserver: %w", err)
		}
		s.saIssuer = &tokenIssuer{signer: signer, issuer: a.ServiceAccountIssuer, audiences: audiences, max: a.ServiceAccountMaxTokenExpiration}
		keys = append(keys, signer.Public())
	}

	var tokens []authenticator.Token
	if a.TokenAuthFile != "" {
		t, err := tokenfile.Read(a.TokenAuthFile, s.log)
		if err != nil {
			return fmt.Errorf("apiserver: %w", err)
		}
		tokens = append(tokens, t)
	}
	if len(keys) > 0 {
		var issuers []string
		if a.ServiceAccountIssuer != "" {
			issuers = []string{a.ServiceAccountIssuer}
		}
		tokens = append(tokens, saauth.New(saauth.Config{
			Keys: keys, Issuers: issuers, Audiences: audiences, Legacy: true, Getter: cacheGetter{s},
		}))
	}
	if a.BootstrapTokenAuth {
		tokens = append(tokens, bootstrap.New(cacheGetter{s}.Secret, nil))
	}

	var chain []authenticator.Request
	if a.ClientCA != nil {
		chain = append(chain, x509auth.New(a.ClientCA, nil))
	}
	if len(tokens) > 0 {
		s.tokens = authenticator.UnionTokens(tokens...)
		chain = append(chain, authenticator.BearerToken(s.tokens))
	}
	if cfg.Authenticator != nil {
		chain = append(chain, cfg.Authenticator)
	}
	switch len(chain) {
	case 0:
	case 1:
		s.authenticator = authenticator.WithAuthenticatedGroup(chain[0])
	default:
		s.authenticator = authenticator.WithAuthenticatedGroup(authenticator.Union(chain...))
	}
	return nil
}

// cacheGetter finds the objects tokens name in the watch caches: a
// request's authentication costs etcd nothing. The objects are the
// caches' own, never to be changed.
type cacheGetter struct{ s *Server }

// cached is the object namespace/name of res as its watch cache has it.
func (s *Server) cached(res *api.Resource, namespace, name string) (api.Object, bool) {
	v := s.serving()
	rs, c := v.stores[res], v.caches[res]
	if rs == nil || c == nil {
		return nil, false
	}
	o, ready := c.get(rs.key(namespace, name))
	if !ready || o == nil {
		return nil, false
	}
	return o.object(), true
}

func cachedAs[T any](s *Server, res *api.Resource, namespace, name string) (T, bool) {
	o, ok := s.cached(res, namespace, name)
	if !ok {
		var zero T
		return zero, false
	}
	t, ok := o.(T)
	return t, ok
}

func (g cacheGetter) ServiceAccount(namespace, name string) (*corev1.ServiceAccount, bool) {
	return cachedAs[*corev1.ServiceAccount](g.s, api.ServiceAccounts, namespace, name)
}

func (g cacheGetter) Pod(namespace, name string) (*corev1.Pod, bool) {
	return cachedAs[*corev1.Pod](g.s, api.Pods, namespace, name)
}

func (g cacheGetter) Secret(namespace, name string) (*corev1.Secret, bool) {
	return cachedAs[*corev1.Secret](g.s, api.Secrets, namespace, name)
}

func (g cacheGetter) Node(name string) (*corev1.Node, bool) {
	return cachedAs[*corev1.Node](g.s, api.Nodes, "", name)
}
