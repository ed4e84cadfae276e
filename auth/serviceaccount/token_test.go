package serviceaccount_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/auth/serviceaccount"
)

func newSigner(t *testing.T, ec bool) *serviceaccount.Signer {
	t.Helper()
	var key crypto.Signer
	var err error
	if ec {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := serviceaccount.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var acct = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "robot", UID: "sa-uid"}}

// decode returns a part of a token, as a JSON object.
func decode(t *testing.T, token string, part int) map[string]any {
	t.Helper()
	data, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[part])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBoundTokenAsKubeIssuesIt(t *testing.T) {
	for _, ec := range []bool{false, true} {
		s := newSigner(t, ec)
		now := time.Unix(1_800_000_000, 0)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "pod-uid"}}
		c := serviceaccount.NewClaims("https://kubernetes.default.svc.cluster.local", acct, serviceaccount.Bound{Pod: pod}, now, 3600, time.Time{}, []string{"api"})
		tok, err := s.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		h := decode(t, tok, 0)
		der, _ := x509.MarshalPKIXPublicKey(s.Public())
		sum := sha256.Sum256(der)
		wantAlg := map[bool]string{false: "RS256", true: "ES256"}[ec]
		if h["alg"] != wantAlg || h["kid"] != base64.RawURLEncoding.EncodeToString(sum[:]) {
			t.Errorf("header = %v, want alg %s and kube's key ID", h, wantAlg)
		}
		p := decode(t, tok, 1)
		k, _ := p["kubernetes.io"].(map[string]any)
		if p["sub"] != "system:serviceaccount:ns:robot" || p["exp"] != float64(now.Unix()+3600) || p["jti"] == "" ||
			k["namespace"] != "ns" || k["serviceaccount"].(map[string]any)["uid"] != "sa-uid" || k["pod"].(map[string]any)["name"] != "web" {
			t.Errorf("claims = %v", p)
		}
		got, err := serviceaccount.Verify(tok, []crypto.PublicKey{s.Public()}, []string{"https://kubernetes.default.svc.cluster.local"}, now.Add(time.Minute))
		if err != nil || got.Kubernetes.Pod.UID != "pod-uid" {
			t.Fatalf("Verify = %+v, %v", got, err)
		}
		if _, err := serviceaccount.Verify(tok, []crypto.PublicKey{s.Public()}, []string{"https://kubernetes.default.svc.cluster.local"}, now.Add(time.Hour+2*time.Minute)); !errors.Is(err, serviceaccount.ErrExpired) {
			t.Errorf("an hour and two minutes later: %v, want ErrExpired", err)
		}
		other := newSigner(t, ec)
		if _, err := serviceaccount.Verify(tok, []crypto.PublicKey{other.Public()}, []string{"https://kubernetes.default.svc.cluster.local"}, now); err == nil {
			t.Error("a token verified with another key")
		}
		if _, err := serviceaccount.Verify(tok, []crypto.PublicKey{s.Public()}, []string{"https://elsewhere"}, now); err == nil {
			t.Error("a token of another issuer verified")
		}
	}
}

func TestLegacyToken(t *testing.T) {
	s := newSigner(t, false)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "robot-token"}}
	tok, err := s.Sign(serviceaccount.NewLegacyClaims(acct, secret))
	if err != nil {
		t.Fatal(err)
	}
	p := decode(t, tok, 1)
	want := map[string]any{
		"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:ns:robot",
		"kubernetes.io/serviceaccount/namespace":            "ns",
		"kubernetes.io/serviceaccount/secret.name":          "robot-token",
		"kubernetes.io/serviceaccount/service-account.name": "robot",
		"kubernetes.io/serviceaccount/service-account.uid":  "sa-uid",
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("claim %s = %v, want %v", k, p[k], v)
		}
	}
	if _, ok := p["exp"]; ok {
		t.Error("a legacy token expires")
	}
	if iss, _ := serviceaccount.Issuer(tok); iss != serviceaccount.LegacyIssuer {
		t.Errorf("Issuer = %q", iss)
	}
	if _, err := serviceaccount.VerifyLegacy(tok, []crypto.PublicKey{s.Public()}); err != nil {
		t.Errorf("VerifyLegacy: %v", err)
	}
	if _, err := serviceaccount.VerifyLegacy(tok, []crypto.PublicKey{newSigner(t, false).Public()}); err == nil {
		t.Error("a legacy token verified with another key")
	}
}
