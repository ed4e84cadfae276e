// Package bootstrap authenticates bootstrap tokens, as kube-apiserver's
// --enable-bootstrap-token-auth: a token <id>.<secret> is valid while the
// Secret bootstrap-token-<id> in kube-system, of type
// bootstrap.kubernetes.io/token, holds that id and secret, allows
// authentication and has not expired. Its user is system:bootstrap:<id>,
// in system:bootstrappers and the Secret's auth-extra-groups.
//
// As kube's, it never says why a token failed: a token that does not
// authenticate is simply not one of its own.
package bootstrap

import (
	"context"
	"crypto/subtle"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/auth/authenticator"
	"github.com/minictl/minictl/auth/user"
)

// The names of a bootstrap token Secret, as kube's bootstrap API.
const (
	SecretType             corev1.SecretType = "bootstrap.kubernetes.io/token"
	SecretPrefix                             = "bootstrap-token-"
	TokenIDKey                               = "token-id"
	TokenSecretKey                           = "token-secret"
	ExpirationKey                            = "expiration"
	UsageAuthenticationKey                   = "usage-bootstrap-authentication"
	ExtraGroupsKey                           = "auth-extra-groups"
)

var (
	tokenRE      = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)
	extraGroupRE = regexp.MustCompile(`^system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]$`)
)

// Secrets finds a Secret by namespace and name.
type Secrets func(namespace, name string) (*corev1.Secret, bool)

// New authenticates bootstrap tokens against the Secrets secrets finds,
// at the time now gives (nil: time.Now).
func New(secrets Secrets, now func() time.Time) authenticator.Token {
	if now == nil {
		now = time.Now
	}
	return authenticator.TokenFunc(func(_ context.Context, token string) (*authenticator.Response, bool, error) {
		m := tokenRE.FindStringSubmatch(token)
		if m == nil {
			return nil, false, nil
		}
		id, secret := m[1], m[2]
		s, ok := secrets(metav1.NamespaceSystem, SecretPrefix+id)
		if !ok || s.DeletionTimestamp != nil || s.Type != SecretType {
			return nil, false, nil
		}
		if string(s.Data[TokenIDKey]) != id ||
			subtle.ConstantTimeCompare(s.Data[TokenSecretKey], []byte(secret)) != 1 {
			return nil, false, nil
		}
		if exp := string(s.Data[ExpirationKey]); exp != "" {
			t, err := time.Parse(time.RFC3339, exp)
			if err != nil || !now().Before(t) {
				return nil, false, nil
			}
		}
		if string(s.Data[UsageAuthenticationKey]) != "true" {
			return nil, false, nil
		}
		groups := []string{user.BootstrapGroup}
		if extra := string(s.Data[ExtraGroupsKey]); extra != "" {
			for _, g := range strings.Split(extra, ",") {
				if !extraGroupRE.MatchString(g) {
					return nil, false, nil
				}
				groups = append(groups, g)
			}
		}
		return &authenticator.Response{User: &user.Info{Name: user.BootstrapUserPrefix + id, Groups: groups}}, true, nil
	})
}
