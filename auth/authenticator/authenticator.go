// Package authenticator holds the interfaces of kube's authenticators,
// the bearer-token reader and the chain that asks each in turn.
package authenticator

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/minictl/minictl/auth/user"
)

// Response is a successful authentication: the user, and the audiences
// the credential was meant for (empty: the API server's own).
type Response struct {
	User      *user.Info
	Audiences []string
}

// Request authenticates an HTTP request. ok false and err nil: the request
// carries no credential this authenticator knows; err: it carries one that
// is not valid (expired, forged, revoked).
type Request interface {
	AuthenticateRequest(r *http.Request) (resp *Response, ok bool, err error)
}

// Token authenticates a bearer token, with the same ok and err as Request.
type Token interface {
	AuthenticateToken(ctx context.Context, token string) (resp *Response, ok bool, err error)
}

// RequestFunc is a function that is a Request.
type RequestFunc func(r *http.Request) (*Response, bool, error)

func (f RequestFunc) AuthenticateRequest(r *http.Request) (*Response, bool, error) { return f(r) }

// TokenFunc is a function that is a Token.
type TokenFunc func(ctx context.Context, token string) (*Response, bool, error)

func (f TokenFunc) AuthenticateToken(ctx context.Context, token string) (*Response, bool, error) {
	return f(ctx, token)
}

// Union asks each authenticator in turn; the first to authenticate the
// request wins. When none does, the errors of those that refused it are
// returned together.
func Union(as ...Request) Request {
	return RequestFunc(func(r *http.Request) (*Response, bool, error) {
		var errs []error
		for _, a := range as {
			resp, ok, err := a.AuthenticateRequest(r)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if ok {
				return resp, true, nil
			}
		}
		return nil, false, errors.Join(errs...)
	})
}

// UnionTokens asks each token authenticator in turn, as Union.
func UnionTokens(ts ...Token) Token {
	return TokenFunc(func(ctx context.Context, token string) (*Response, bool, error) {
		var errs []error
		for _, t := range ts {
			resp, ok, err := t.AuthenticateToken(ctx, token)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if ok {
				return resp, true, nil
			}
		}
		return nil, false, errors.Join(errs...)
	})
}

// errInvalidBearer is an Authorization header that says Bearer but holds
// no token.
var errInvalidBearer = errors.New("invalid bearer token")

// BearerToken authenticates the token of a request's
// "Authorization: Bearer <token>" header with t. On success the header is
// removed, so that nothing downstream (a proxy, a log) sees the credential.
func BearerToken(t Token) Request {
	return RequestFunc(func(r *http.Request) (*Response, bool, error) {
		auth := strings.TrimSpace(r.Header.Get("Authorization"))
		scheme, token, found := strings.Cut(auth, " ")
		if auth == "" || !strings.EqualFold(scheme, "bearer") {
			return nil, false, nil
		}
		token = strings.TrimSpace(token)
		if !found || token == "" {
			return nil, false, errInvalidBearer
		}
		resp, ok, err := t.AuthenticateToken(r.Context(), token)
		if ok {
			r.Header.Del("Authorization")
		}
		if !ok && err == nil {
			// A bearer token no authenticator knows is a bad
			// credential, not the absence of one: 401, never anonymous.
			err = errInvalidBearer
		}
		return resp, ok, err
	})
}

// WithAuthenticatedGroup adds system:authenticated to the groups of every
// user a authenticates, as kube-apiserver does to its whole chain, so that
// no authenticator has to remember it.
func WithAuthenticatedGroup(a Request) Request {
	return RequestFunc(func(r *http.Request) (*Response, bool, error) {
		resp, ok, err := a.AuthenticateRequest(r)
		if !ok || err != nil || resp.User == nil || resp.User.InGroup(user.AllAuthenticated) {
			return resp, ok, err
		}
		u := *resp.User
		u.Groups = append(slices.Clip(u.Groups), user.AllAuthenticated)
		return &Response{User: &u, Audiences: resp.Audiences}, true, nil
	})
}

type audiencesKey struct{}

// WithAudiences returns ctx asking token authenticators to accept tokens
// meant for auds rather than for the API server itself (a TokenReview's
// spec.audiences).
func WithAudiences(ctx context.Context, auds []string) context.Context {
	return context.WithValue(ctx, audiencesKey{}, auds)
}

// AudiencesFrom returns the audiences ctx asks for, if any.
func AudiencesFrom(ctx context.Context) ([]string, bool) {
	auds, ok := ctx.Value(audiencesKey{}).([]string)
	return auds, ok && len(auds) > 0
}
