package apiserver_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/auth/serviceaccount"
	"github.com/minictl/minictl/auth/user"
	"github.com/minictl/minictl/internal/testenv"
)

// authnEnv is a secureEnv with every authenticator configured: client
// certificates of ca, the token file's s3cr3t (alice), ServiceAccount
// tokens signed with saKey, and bootstrap tokens.
type authnEnv struct {
	*secureEnv
	ca    *testCA
	saKey *rsa.PrivateKey
}

const testIssuer = "https://kubernetes.default.svc.cluster.local"

func startAuthnEnv(t *testing.T, tweak func(*apiserver.Authentication)) *authnEnv {
	t.Helper()
	ca := newTestCA(t, "client-ca")
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte("s3cr3t,alice,uid-alice,\"dev,ops\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	authn := apiserver.Authentication{
		ClientCA: ca.pool, TokenAuthFile: tokenFile,
		ServiceAccountIssuer: testIssuer, ServiceAccountSigningKey: saKey,
		BootstrapTokenAuth: true,
	}
	if tweak != nil {
		tweak(&authn)
	}
	e := startSecureEnv(t, secureOptions{server: apiserver.Config{Authentication: authn}, whoami: true})
	return &authnEnv{secureEnv: e, ca: ca, saKey: saKey}
}

// who is the user cert and token prove, or nil and the 401.
func (se *authnEnv) who(t *testing.T, cert *tls.Certificate, token string) *user.Info {
	t.Helper()
	r := se.send(t, se.whoamiURL, cert, token, http.MethodGet, "/", nil)
	if r.code == http.StatusUnauthorized {
		return nil
	}
	var u user.Info
	r.want(t, http.StatusOK).into(t, &u)
	return &u
}

// wantUnauthorized checks that the secure port refuses the credentials
// with kube's 401.
func (se *authnEnv) wantUnauthorized(t *testing.T, cert *tls.Certificate, token string) {
	t.Helper()
	r := se.send(t, se.secureURL, cert, token, http.MethodGet, "/api/v1/namespaces/default", nil)
	if st := r.wantStatus(t, http.StatusUnauthorized, metav1.StatusReasonUnauthorized); st.Message != "Unauthorized" {
		t.Fatalf("got 401 %q, want Unauthorized", st.Message)
	}
}

// wantAuthorized checks that the secure port answers the credentials.
func (se *authnEnv) wantAuthorized(t *testing.T, cert *tls.Certificate, token string) {
	t.Helper()
	se.send(t, se.secureURL, cert, token, http.MethodGet, "/api/v1/namespaces/default", nil).want(t, http.StatusOK)
}

func TestSecurePortClientCertificates(t *testing.T) {
	se := startAuthnEnv(t, nil)
	alice := se.ca.issue(t, "alice", []string{"dev", "ops"}, x509.ExtKeyUsageClientAuth)
	se.wantAuthorized(t, &alice, "")
	u := se.who(t, &alice, "")
	if u == nil || u.Name != "alice" || !slices.Equal(u.Groups, []string{"dev", "ops", user.AllAuthenticated}) ||
		!strings.HasPrefix(u.Extra["authentication.kubernetes.io/credential-id"][0], "X509SHA256=") {
		t.Errorf("client certificate of alice proves %+v", u)
	}

	other := newTestCA(t, "other-ca").issue(t, "alice", []string{"system:masters"}, x509.ExtKeyUsageClientAuth)
	se.wantUnauthorized(t, &other, "")
	serverCert := se.ca.issue(t, "alice", nil, x509.ExtKeyUsageServerAuth)
	se.wantUnauthorized(t, &serverCert, "")
	se.wantUnauthorized(t, nil, "") // no credentials and no anonymous access
	se.wantUnauthorized(t, nil, "not-a-token")
}

func TestSecurePortTokenFile(t *testing.T) {
	se := startAuthnEnv(t, nil)
	se.wantAuthorized(t, nil, "s3cr3t")
	u := se.who(t, nil, "s3cr3t")
	if u == nil || u.Name != "alice" || u.UID != "uid-alice" || !slices.Equal(u.Groups, []string{"dev", "ops", user.AllAuthenticated}) {
		t.Errorf("the token file's token proves %+v", u)
	}
	se.wantUnauthorized(t, nil, "s3cr3t-not")
}

// serviceAccount creates namespace ns and the ServiceAccount name in it.
func serviceAccount(t *testing.T, env *testenv.Env, ns, name string) *corev1.ServiceAccount {
	t.Helper()
	if ns != "default" {
		createNamespace(t, env, ns)
	}
	return create[corev1.ServiceAccount](t, env, "/api/v1/namespaces/"+ns+"/serviceaccounts", &corev1.ServiceAccount{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: metav1.ObjectMeta{Name: name},
	})
}

func tokenRequest(spec authnv1.TokenRequestSpec) *authnv1.TokenRequest {
	return &authnv1.TokenRequest{TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenRequest"}, Spec: spec}
}

func requestToken(t *testing.T, env *testenv.Env, ns, name string, spec authnv1.TokenRequestSpec) *authnv1.TokenRequest {
	t.Helper()
	return create[authnv1.TokenRequest](t, env, "/api/v1/namespaces/"+ns+"/serviceaccounts/"+name+"/token", tokenRequest(spec))
}

func TestServiceAccountTokenRequest(t *testing.T) {
	se := startAuthnEnv(t, nil)
	sa := serviceAccount(t, se.Env, "team", "robot")
	tr := requestToken(t, se.Env, "team", "robot", authnv1.TokenRequestSpec{})
	if tr.Name != "robot" || tr.Namespace != "team" || *tr.Spec.ExpirationSeconds != 3600 ||
		!slices.Equal(tr.Spec.Audiences, []string{testIssuer}) || tr.Status.Token == "" {
		t.Fatalf("TokenRequest answered %+v", tr)
	}
	se.wantAuthorized(t, nil, tr.Status.Token)
	u := se.who(t, nil, tr.Status.Token)
	want := []string{"system:serviceaccounts", "system:serviceaccounts:team", user.AllAuthenticated}
	if u == nil || u.Name != "system:serviceaccount:team:robot" || u.UID != string(sa.UID) || !slices.Equal(u.Groups, want) ||
		!strings.HasPrefix(u.Extra["authentication.kubernetes.io/credential-id"][0], "JTI=") {
		t.Errorf("the token proves %+v", u)
	}

	// A body naming no kind is a TokenRequest, as the path says.
	bare := create[authnv1.TokenRequest](t, se.Env, "/api/v1/namespaces/team/serviceaccounts/robot/token", map[string]any{"spec": map[string]any{}})
	if bare.Kind != "TokenRequest" || bare.APIVersion != "authentication.k8s.io/v1" || bare.Status.Token == "" {
		t.Errorf("a TokenRequest without kind answered %+v", bare)
	}
	do(t, se.Env, http.MethodPost, "/api/v1/namespaces/team/serviceaccounts/robot/token", jsonType, map[string]any{"kind": "Pod", "apiVersion": "v1"}).
		wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)

	// Meant for another audience: proves nothing here.
	other := requestToken(t, se.Env, "team", "robot", authnv1.TokenRequestSpec{Audiences: []string{"vault"}})
	se.wantUnauthorized(t, nil, other.Status.Token)

	// Signed by a key the server does not know.
	forgedKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	forger, _ := serviceaccount.NewSigner(forgedKey)
	forged, _ := forger.Sign(serviceaccount.NewClaims(testIssuer, sa, serviceaccount.Bound{}, time.Now(), 3600, time.Time{}, []string{testIssuer}))
	se.wantUnauthorized(t, nil, forged)

	// Signed by the server's key, but long expired.
	signer, _ := serviceaccount.NewSigner(se.saKey)
	expired, _ := signer.Sign(serviceaccount.NewClaims(testIssuer, sa, serviceaccount.Bound{}, time.Now().Add(-3*time.Hour), 3600, time.Time{}, []string{testIssuer}))
	se.wantUnauthorized(t, nil, expired)
	fresh, _ := signer.Sign(serviceaccount.NewClaims(testIssuer, sa, serviceaccount.Bound{}, time.Now(), 3600, time.Time{}, []string{testIssuer}))
	se.wantAuthorized(t, nil, fresh)

	// The ServiceAccount is deleted: its tokens die with it, and a new
	// one of the same name (another uid) does not revive them.
	do(t, se.Env, http.MethodDelete, "/api/v1/namespaces/team/serviceaccounts/robot", "", nil).want(t, http.StatusOK)
	eventually(t, "the deleted ServiceAccount's token refused", func() (bool, string) {
		return se.who(t, nil, tr.Status.Token) == nil, "still accepted"
	})
	create[corev1.ServiceAccount](t, se.Env, "/api/v1/namespaces/team/serviceaccounts", &corev1.ServiceAccount{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: metav1.ObjectMeta{Name: "robot"},
	})
	replacement := requestToken(t, se.Env, "team", "robot", authnv1.TokenRequestSpec{})
	eventually(t, "the new ServiceAccount's token accepted", func() (bool, string) {
		return se.who(t, nil, replacement.Status.Token) != nil, "refused"
	})
	se.wantUnauthorized(t, nil, tr.Status.Token)
}

func TestServiceAccountTokenBoundToPod(t *testing.T) {
	se := startAuthnEnv(t, nil)
	serviceAccount(t, se.Env, "team", "robot")
	p := pod("web", "", nil)
	p.Spec.ServiceAccountName = "robot"
	created := create[corev1.Pod](t, se.Env, "/api/v1/namespaces/team/pods", p)
	tr := requestToken(t, se.Env, "team", "robot", authnv1.TokenRequestSpec{
		BoundObjectRef: &authnv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: created.UID},
	})
	u := se.who(t, nil, tr.Status.Token)
	if u == nil || !slices.Equal(u.Extra["authentication.kubernetes.io/pod-name"], []string{"web"}) ||
		!slices.Equal(u.Extra["authentication.kubernetes.io/pod-uid"], []string{string(created.UID)}) {
		t.Fatalf("the pod's token proves %+v", u)
	}
	do(t, se.Env, http.MethodDelete, "/api/v1/namespaces/team/pods/web?gracePeriodSeconds=0", "", nil).want(t, http.StatusOK)
	eventually(t, "the deleted pod's token refused", func() (bool, string) {
		return se.who(t, nil, tr.Status.Token) == nil, "still accepted"
	})
	se.wantUnauthorized(t, nil, tr.Status.Token)
}

func TestTokenRequestValidation(t *testing.T) {
	se := startAuthnEnv(t, func(a *apiserver.Authentication) { a.ServiceAccountMaxTokenExpiration = 2 * time.Hour })
	serviceAccount(t, se.Env, "team", "robot")
	p := pod("web", "", nil)
	p.Spec.ServiceAccountName = "other"
	create[corev1.Pod](t, se.Env, "/api/v1/namespaces/team/pods", p)
	base := "/api/v1/namespaces/team/serviceaccounts/robot/token"
	seconds := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name    string
		path    string
		req     *authnv1.TokenRequest
		code    int
		reason  metav1.StatusReason
		message string
	}{
		{"too short", base, tokenRequest(authnv1.TokenRequestSpec{ExpirationSeconds: seconds(60)}), 422, metav1.StatusReasonInvalid,
			`TokenRequest.authentication.k8s.io "robot" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes`},
		{"too long", base, tokenRequest(authnv1.TokenRequestSpec{ExpirationSeconds: seconds(1<<32 + 1)}), 422, metav1.StatusReasonInvalid,
			`TokenRequest.authentication.k8s.io "robot" is invalid: spec.expirationSeconds: Invalid value: 4294967297: may not specify a duration larger than 2^32 seconds`},
		{"no ServiceAccount", "/api/v1/namespaces/team/serviceaccounts/ghost/token", tokenRequest(authnv1.TokenRequestSpec{}), 404, metav1.StatusReasonNotFound,
			`serviceaccounts "ghost" not found`},
		{"no pod", base, tokenRequest(authnv1.TokenRequestSpec{BoundObjectRef: &authnv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "ghost"}}), 404, metav1.StatusReasonNotFound,
			`pods "ghost" not found`},
		{"pod of another ServiceAccount", base, tokenRequest(authnv1.TokenRequestSpec{BoundObjectRef: &authnv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web"}}), 400, metav1.StatusReasonBadRequest,
			`cannot bind token for serviceaccount "robot" to pod running with serviceaccount "other"`},
		{"a ConfigMap", base, tokenRequest(authnv1.TokenRequestSpec{BoundObjectRef: &authnv1.BoundObjectReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}}), 400, metav1.StatusReasonBadRequest,
			`cannot bind token to object of type /v1, Kind=ConfigMap`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := do(t, se.Env, http.MethodPost, tc.path, jsonType, tc.req).wantStatus(t, tc.code, tc.reason)
			if st.Message != tc.message {
				t.Errorf("message %q, want %q", st.Message, tc.message)
			}
		})
	}

	secret := create[corev1.Secret](t, se.Env, "/api/v1/namespaces/team/secrets", &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Name: "s"},
	})
	st := do(t, se.Env, http.MethodPost, base, jsonType, tokenRequest(authnv1.TokenRequestSpec{
		BoundObjectRef: &authnv1.BoundObjectReference{APIVersion: "v1", Kind: "Secret", Name: "s", UID: "not-" + secret.UID},
	})).wantStatus(t, http.StatusConflict, metav1.StatusReasonConflict)
	if !strings.Contains(st.Message, "the UID in the bound object reference (not-"+string(secret.UID)+") does not match the UID in record") {
		t.Errorf("uid mismatch: %q", st.Message)
	}

	// Beyond --service-account-max-token-expiration: cut, with a warning.
	r := do(t, se.Env, http.MethodPost, base, jsonType, tokenRequest(authnv1.TokenRequestSpec{ExpirationSeconds: seconds(3 * 3600)})).want(t, http.StatusCreated)
	var tr authnv1.TokenRequest
	r.into(t, &tr)
	if *tr.Spec.ExpirationSeconds != 7200 || !strings.Contains(r.header.Get("Warning"), "requested expiration of 10800 seconds shortened to 7200 seconds") {
		t.Errorf("expirationSeconds %d, warning %q", *tr.Spec.ExpirationSeconds, r.header.Get("Warning"))
	}
	var claims serviceaccount.Claims
	if err := decodeClaims(tr.Status.Token, &claims); err != nil {
		t.Fatal(err)
	}
	if got := claims.ExpiresAt.Sub(claims.IssuedAt.Time); got != 2*time.Hour || !tr.Status.ExpirationTimestamp.Time.Equal(claims.ExpiresAt.Time) {
		t.Errorf("the token lives %v, expires at %v, status says %v", got, claims.ExpiresAt, tr.Status.ExpirationTimestamp)
	}
}

// decodeClaims reads a JWT's claims without checking them.
func decodeClaims(token string, into any) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	data, err := base64URL(parts[1])
	if err != nil {
		return err
	}
	return json.Unmarshal(data, into)
}

func TestLegacyServiceAccountToken(t *testing.T) {
	se := startAuthnEnv(t, nil)
	sa := serviceAccount(t, se.Env, "team", "robot")
	signer, _ := serviceaccount.NewSigner(se.saKey)
	secret := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "robot-token", Annotations: map[string]string{
			corev1.ServiceAccountNameKey: "robot", corev1.ServiceAccountUIDKey: string(sa.UID)}},
		Type: corev1.SecretTypeServiceAccountToken,
	}
	tok, err := signer.Sign(serviceaccount.NewLegacyClaims(sa, secret))
	if err != nil {
		t.Fatal(err)
	}
	se.wantUnauthorized(t, nil, tok) // no Secret holds it yet
	secret.Data = map[string][]byte{corev1.ServiceAccountTokenKey: []byte(tok)}
	create[corev1.Secret](t, se.Env, "/api/v1/namespaces/team/secrets", secret)
	eventually(t, "the legacy token accepted", func() (bool, string) {
		return se.who(t, nil, tok) != nil, "refused"
	})
	u := se.who(t, nil, tok)
	if u.Name != "system:serviceaccount:team:robot" || !slices.Equal(u.Groups, []string{"system:serviceaccounts", "system:serviceaccounts:team", user.AllAuthenticated}) {
		t.Errorf("the legacy token proves %+v", u)
	}
	do(t, se.Env, http.MethodDelete, "/api/v1/namespaces/team/secrets/robot-token", "", nil).want(t, http.StatusOK)
	eventually(t, "the legacy token refused once its Secret is gone", func() (bool, string) {
		return se.who(t, nil, tok) == nil, "still accepted"
	})
}

func TestBootstrapToken(t *testing.T) {
	se := startAuthnEnv(t, nil)
	bootstrapSecret := func(id, secret, expiration string) *corev1.Secret {
		return &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id},
			Type:       "bootstrap.kubernetes.io/token",
			StringData: map[string]string{
				"token-id": id, "token-secret": secret, "expiration": expiration,
				"usage-bootstrap-authentication": "true",
				"auth-extra-groups":              "system:bootstrappers:kubeadm:default-node-token",
			},
		}
	}
	create[corev1.Secret](t, se.Env, "/api/v1/namespaces/kube-system/secrets", bootstrapSecret("abcdef", "0123456789abcdef", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)))
	create[corev1.Secret](t, se.Env, "/api/v1/namespaces/kube-system/secrets", bootstrapSecret("fedcba", "0123456789abcdef", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)))
	var u *user.Info
	eventually(t, "the bootstrap token accepted", func() (bool, string) {
		u = se.who(t, nil, "abcdef.0123456789abcdef")
		return u != nil, "refused"
	})
	if u.Name != "system:bootstrap:abcdef" || !slices.Equal(u.Groups, []string{"system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token", user.AllAuthenticated}) {
		t.Errorf("the bootstrap token proves %+v", u)
	}
	se.wantUnauthorized(t, nil, "abcdef.0123456789abcdee") // wrong secret
	se.wantUnauthorized(t, nil, "fedcba.0123456789abcdef") // expired
}

func base64URL(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
