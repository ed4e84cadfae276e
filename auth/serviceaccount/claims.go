package serviceaccount

import (
	"crypto"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/auth/user"
)

// Kube's bound token expirations: a token bound to a pod and asked for
// with WarnOnlyBoundTokenExpirationSeconds (what the ServiceAccount
// admission plugin's projected volume asks) is issued for
// ExpirationExtensionSeconds instead, with a warnafter at the asked
// expiry, so that clients that never reread their token keep working
// while the cluster can see who would have broken.
const (
	WarnOnlyBoundTokenExpirationSeconds = 60*60 + 7
	ExpirationExtensionSeconds          = 24 * 365 * 60 * 60
)

// Leeway is how far a token's times may be off the server's clock, kube's
// (go-jose's DefaultLeeway).
const Leeway = time.Minute

// Ref names one object a token is bound to.
type Ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// Private is the "kubernetes.io" claim of a bound token.
type Private struct {
	Namespace      string           `json:"namespace,omitempty"`
	ServiceAccount Ref              `json:"serviceaccount"`
	Pod            *Ref             `json:"pod,omitempty"`
	Secret         *Ref             `json:"secret,omitempty"`
	Node           *Ref             `json:"node,omitempty"`
	WarnAfter      *jwt.NumericDate `json:"warnafter,omitempty"`
}

// Claims are a bound token's claims: the registered ones and kube's own.
type Claims struct {
	jwt.RegisteredClaims
	Kubernetes Private `json:"kubernetes.io"`
}

// Bound says what a new token is bound to besides its ServiceAccount: a
// pod (and the node it runs on), a secret or a node. Each may be nil.
type Bound struct {
	Pod    *corev1.Pod
	Secret *corev1.Secret
	Node   *corev1.Node
}

// NewClaims are the claims kube issues for a token of sa, bound as b,
// valid for expirationSeconds from now for audiences. warnAfter, if not
// zero, is when a client should have refreshed it.
func NewClaims(issuer string, sa *corev1.ServiceAccount, b Bound, now time.Time, expirationSeconds int64, warnAfter time.Time, audiences []string) *Claims {
	c := &Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    issuer,
			Subject:   user.ServiceAccountUsername(sa.Namespace, sa.Name),
			Audience:  jwt.ClaimStrings(audiences),
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(time.Duration(expirationSeconds) * time.Second)),
			ID:        uuid.NewString(),
		},
		Kubernetes: Private{
			Namespace:      sa.Namespace,
			ServiceAccount: Ref{Name: sa.Name, UID: string(sa.UID)},
		},
	}
	if b.Pod != nil {
		c.Kubernetes.Pod = &Ref{Name: b.Pod.Name, UID: string(b.Pod.UID)}
	}
	if b.Secret != nil {
		c.Kubernetes.Secret = &Ref{Name: b.Secret.Name, UID: string(b.Secret.UID)}
	}
	if b.Node != nil {
		c.Kubernetes.Node = &Ref{Name: b.Node.Name, UID: string(b.Node.UID)}
	}
	if !warnAfter.IsZero() {
		c.Kubernetes.WarnAfter = jwt.NewNumericDate(warnAfter)
	}
	return c
}

// LegacyClaims are the claims of a token the legacy token controller
// writes into a Secret: no audience, no expiry, and the Secret's name so
// that deleting the Secret revokes it.
type LegacyClaims struct {
	jwt.RegisteredClaims
	Namespace          string `json:"kubernetes.io/serviceaccount/namespace"`
	SecretName         string `json:"kubernetes.io/serviceaccount/secret.name"`
	ServiceAccountName string `json:"kubernetes.io/serviceaccount/service-account.name"`
	ServiceAccountUID  string `json:"kubernetes.io/serviceaccount/service-account.uid"`
}

// NewLegacyClaims are the claims of the legacy token of sa kept in secret.
func NewLegacyClaims(sa *corev1.ServiceAccount, secret *corev1.Secret) *LegacyClaims {
	return &LegacyClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:  LegacyIssuer,
			Subject: user.ServiceAccountUsername(sa.Namespace, sa.Name),
		},
		Namespace:          sa.Namespace,
		SecretName:         secret.Name,
		ServiceAccountName: sa.Name,
		ServiceAccountUID:  string(sa.UID),
	}
}

// Errors of token verification. An authenticator answers all of them with
// the same 401; they are for logs and tests.
var (
	ErrExpired     = errors.New("service account token has expired")
	ErrNotYetValid = errors.New("service account token is not valid yet")
	ErrIssuedLater = errors.New("service account token was issued in the future")
	ErrMalformed   = errors.New("service account token is malformed")
)

// Verify checks a bound token: signed by one of keys, issued by one of
// issuers, valid at now (with Leeway), and its claims complete. The
// audience and the objects it names are the caller's to check.
func Verify(token string, keys []crypto.PublicKey, issuers []string, now time.Time) (*Claims, error) {
	var c Claims
	if err := parse(token, keys, &c); err != nil {
		return nil, err
	}
	if !slices.Contains(issuers, c.Issuer) {
		return nil, fmt.Errorf("token issuer %q is not accepted", c.Issuer)
	}
	switch {
	case c.ExpiresAt == nil || c.IssuedAt == nil:
		return nil, ErrMalformed
	case now.After(c.ExpiresAt.Add(Leeway)):
		return nil, ErrExpired
	case c.NotBefore != nil && now.Add(Leeway).Before(c.NotBefore.Time):
		return nil, ErrNotYetValid
	case now.Add(Leeway).Before(c.IssuedAt.Time):
		return nil, ErrIssuedLater
	}
	k := c.Kubernetes
	if k.Namespace == "" || k.ServiceAccount.Name == "" || k.ServiceAccount.UID == "" ||
		c.Subject != user.ServiceAccountUsername(k.Namespace, k.ServiceAccount.Name) {
		return nil, ErrMalformed
	}
	return &c, nil
}

// VerifyLegacy checks a legacy token: signed by one of keys, issued as
// legacy tokens are, naming its ServiceAccount and Secret.
func VerifyLegacy(token string, keys []crypto.PublicKey) (*LegacyClaims, error) {
	var c LegacyClaims
	if err := parse(token, keys, &c); err != nil {
		return nil, err
	}
	if c.Issuer != LegacyIssuer {
		return nil, fmt.Errorf("token issuer %q is not %q", c.Issuer, LegacyIssuer)
	}
	if c.Namespace == "" || c.ServiceAccountName == "" || c.SecretName == "" ||
		c.Subject != user.ServiceAccountUsername(c.Namespace, c.ServiceAccountName) {
		return nil, ErrMalformed
	}
	return &c, nil
}
