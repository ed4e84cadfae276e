// Package bootstraptoken reads bootstrap tokens as kube keeps them:
// Secrets of type bootstrap.kubernetes.io/token named
// bootstrap-token-<token-id> in kube-system, and signs with them.
package bootstraptoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// kube's names.
const (
	SecretType       = corev1.SecretType("bootstrap.kubernetes.io/token")
	SecretNamePrefix = "bootstrap-token-"
	Namespace        = "kube-system"

	IDKey                  = "token-id"
	SecretKey              = "token-secret"
	ExpirationKey          = "expiration"
	UsageSigningKey        = "usage-bootstrap-signing"
	UsageAuthenticationKey = "usage-bootstrap-authentication"
	ExtraGroupsKey         = "auth-extra-groups"

	// ConfigMapClusterInfo is the ConfigMap in kube-public that holds the
	// cluster's kubeconfig (key "kubeconfig") for nodes joining it.
	ConfigMapClusterInfo = "cluster-info"
	KubeConfigKey        = "kubeconfig"
	// JWSSignatureKeyPrefix + <token-id> is the key of a token's
	// signature of the kubeconfig in cluster-info.
	JWSSignatureKeyPrefix = "jws-kubeconfig-"
)

var (
	idPattern     = regexp.MustCompile(`^[a-z0-9]{6}$`)
	secretPattern = regexp.MustCompile(`^[a-z0-9]{16}$`)
)

// Token is what a valid bootstrap token Secret holds.
type Token struct {
	ID, Secret string
}

// Parse returns the token s holds, if s is a well-formed bootstrap token
// Secret: of its type, in kube-system, named after its id, with an id and
// a secret of the right form.
func Parse(s *corev1.Secret) (Token, bool) {
	if s.Type != SecretType || s.Namespace != Namespace {
		return Token{}, false
	}
	id, secret := string(s.Data[IDKey]), string(s.Data[SecretKey])
	if !idPattern.MatchString(id) || !secretPattern.MatchString(secret) || s.Name != SecretNamePrefix+id {
		return Token{}, false
	}
	return Token{ID: id, Secret: secret}, true
}

// Expiration is when s's token expires; ok is false when it never does.
// An expiration that cannot be read is in the past: such a token is
// treated as expired, as kube does.
func Expiration(s *corev1.Secret) (at time.Time, ok bool) {
	v := string(s.Data[ExpirationKey])
	if v == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, true
	}
	return t, true
}

// Expired reports whether s's token has expired at now.
func Expired(s *corev1.Secret, now time.Time) bool {
	at, ok := Expiration(s)
	return ok && !now.Before(at)
}

// DetachedSignature is a JWS of content in compact form with the payload
// left out ("header..signature"): HS256 keyed by the token's secret, the
// header naming the token id as kid. Whoever holds the token can check
// that content comes from the cluster, without a CA.
func DetachedSignature(content string, t Token) string {
	header, _ := json.Marshal(struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}{"HS256", t.ID})
	enc := base64.RawURLEncoding
	signingInput := enc.EncodeToString(header) + "." + enc.EncodeToString([]byte(content))
	mac := hmac.New(sha256.New, []byte(t.Secret))
	mac.Write([]byte(signingInput))
	return enc.EncodeToString(header) + ".." + enc.EncodeToString(mac.Sum(nil))
}
