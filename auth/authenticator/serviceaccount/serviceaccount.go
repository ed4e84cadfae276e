// Package serviceaccount authenticates ServiceAccount tokens, bound and
// legacy, as kube-apiserver's --service-account-key-file and
// --service-account-issuer do. A token proves its ServiceAccount only
// while what it names still exists: the ServiceAccount with the same uid,
// the pod, secret or node it is bound to with theirs, and, for a legacy
// token, the Secret that holds exactly that token.
package serviceaccount

import (
	"context"
	"crypto"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/auth/authenticator"
	sa "github.com/minictl/minictl/auth/serviceaccount"
	"github.com/minictl/minictl/auth/user"
)

// The extras kube gives a ServiceAccount's user.
const (
	PodNameKey      = "authentication.kubernetes.io/pod-name"
	PodUIDKey       = "authentication.kubernetes.io/pod-uid"
	NodeNameKey     = "authentication.kubernetes.io/node-name"
	NodeUIDKey      = "authentication.kubernetes.io/node-uid"
	CredentialIDKey = "authentication.kubernetes.io/credential-id"
)

// Getter finds the objects a token names; ok false when there is none.
type Getter interface {
	ServiceAccount(namespace, name string) (*corev1.ServiceAccount, bool)
	Pod(namespace, name string) (*corev1.Pod, bool)
	Secret(namespace, name string) (*corev1.Secret, bool)
	Node(name string) (*corev1.Node, bool)
}

// Config is what tokens are checked against.
type Config struct {
	// Keys are the public keys that may have signed a token.
	Keys []crypto.PublicKey
	// Issuers are the accepted issuers of bound tokens (the first is the
	// one the server issues as).
	Issuers []string
	// Audiences are the API server's audiences: a token must be meant for
	// one of them, unless the request asks for others.
	Audiences []string
	// Legacy accepts legacy tokens, kept in Secrets.
	Legacy bool
	Getter Getter
	Now    func() time.Time // nil: time.Now
}

// deletedGrace is how long after an object's deletion began its tokens
// still work, kube's: a terminating pod may still need to talk to the API.
const deletedGrace = 60 * time.Second

// New is the token authenticator of cfg.
func New(cfg Config) authenticator.Token {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return authenticator.TokenFunc(func(ctx context.Context, token string) (*authenticator.Response, bool, error) {
		iss, ok := sa.Issuer(token)
		if !ok {
			return nil, false, nil // not a JWT: some other authenticator's
		}
		if iss == sa.LegacyIssuer {
			if !cfg.Legacy {
				return nil, false, nil
			}
			return cfg.legacy(ctx, token)
		}
		if !slices.Contains(cfg.Issuers, iss) {
			return nil, false, nil
		}
		return cfg.bound(ctx, token)
	})
}

func (cfg *Config) bound(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	now := cfg.Now()
	c, err := sa.Verify(token, cfg.Keys, cfg.Issuers, now)
	if err != nil {
		return nil, false, err
	}
	want := cfg.Audiences
	if auds, ok := authenticator.AudiencesFrom(ctx); ok {
		want = auds
	}
	var auds []string
	for _, a := range c.Audience {
		if slices.Contains(want, a) {
			auds = append(auds, a)
		}
	}
	if len(auds) == 0 {
		return nil, false, fmt.Errorf("token audiences %q is invalid for the target audiences %q", []string(c.Audience), want)
	}
	k := c.Kubernetes
	acct, ok := cfg.Getter.ServiceAccount(k.Namespace, k.ServiceAccount.Name)
	if !ok || gone(acct.DeletionTimestamp, now) {
		return nil, false, fmt.Errorf("service account %s/%s has been deleted", k.Namespace, k.ServiceAccount.Name)
	}
	if string(acct.UID) != k.ServiceAccount.UID {
		return nil, false, fmt.Errorf("service account UID (%s) does not match claim (%s)", acct.UID, k.ServiceAccount.UID)
	}
	u := &user.Info{
		Name:   user.ServiceAccountUsername(k.Namespace, k.ServiceAccount.Name),
		UID:    k.ServiceAccount.UID,
		Groups: user.ServiceAccountGroups(k.Namespace),
		Extra:  map[string][]string{},
	}
	if c.ID != "" {
		u.Extra[CredentialIDKey] = []string{"JTI=" + c.ID}
	}
	if r := k.Secret; r != nil {
		s, ok := cfg.Getter.Secret(k.Namespace, r.Name)
		if !ok || gone(s.DeletionTimestamp, now) {
			return nil, false, fmt.Errorf("secret %s/%s has been deleted", k.Namespace, r.Name)
		}
		if string(s.UID) != r.UID {
			return nil, false, fmt.Errorf("secret UID (%s) does not match service account secret ref claim (%s)", s.UID, r.UID)
		}
	}
	if r := k.Pod; r != nil {
		p, ok := cfg.Getter.Pod(k.Namespace, r.Name)
		if !ok || gone(p.DeletionTimestamp, now) {
			return nil, false, fmt.Errorf("pod %s/%s has been deleted", k.Namespace, r.Name)
		}
		if string(p.UID) != r.UID {
			return nil, false, fmt.Errorf("pod UID (%s) does not match service account pod ref claim (%s)", p.UID, r.UID)
		}
		u.Extra[PodNameKey], u.Extra[PodUIDKey] = []string{r.Name}, []string{r.UID}
	}
	if r := k.Node; r != nil {
		// A pod's token names its node for information; only a token
		// bound to the node itself depends on the node's existence.
		if k.Pod == nil {
			n, ok := cfg.Getter.Node(r.Name)
			if !ok || gone(n.DeletionTimestamp, now) {
				return nil, false, fmt.Errorf("node %s has been deleted", r.Name)
			}
			if string(n.UID) != r.UID {
				return nil, false, fmt.Errorf("node UID (%s) does not match service account node ref claim (%s)", n.UID, r.UID)
			}
		}
		u.Extra[NodeNameKey] = []string{r.Name}
		if r.UID != "" {
			u.Extra[NodeUIDKey] = []string{r.UID}
		}
	}
	return &authenticator.Response{User: u, Audiences: auds}, true, nil
}

func (cfg *Config) legacy(_ context.Context, token string) (*authenticator.Response, bool, error) {
	c, err := sa.VerifyLegacy(token, cfg.Keys)
	if err != nil {
		return nil, false, err
	}
	now := cfg.Now()
	s, ok := cfg.Getter.Secret(c.Namespace, c.SecretName)
	if !ok || gone(s.DeletionTimestamp, now) {
		return nil, false, fmt.Errorf("secret %s/%s has been deleted", c.Namespace, c.SecretName)
	}
	if subtle.ConstantTimeCompare(s.Data[corev1.ServiceAccountTokenKey], []byte(token)) != 1 {
		return nil, false, errors.New("token does not match the one in its secret")
	}
	acct, ok := cfg.Getter.ServiceAccount(c.Namespace, c.ServiceAccountName)
	if !ok || gone(acct.DeletionTimestamp, now) {
		return nil, false, fmt.Errorf("service account %s/%s has been deleted", c.Namespace, c.ServiceAccountName)
	}
	if c.ServiceAccountUID != "" && string(acct.UID) != c.ServiceAccountUID {
		return nil, false, fmt.Errorf("service account UID (%s) does not match claim (%s)", acct.UID, c.ServiceAccountUID)
	}
	u := &user.Info{
		Name:   c.Subject,
		UID:    string(acct.UID),
		Groups: user.ServiceAccountGroups(c.Namespace),
	}
	return &authenticator.Response{User: u, Audiences: cfg.Audiences}, true, nil
}

// gone reports whether an object whose deletion began at ts is past the
// grace its tokens get.
func gone(ts *metav1.Time, now time.Time) bool {
	return ts != nil && now.After(ts.Add(deletedGrace))
}
