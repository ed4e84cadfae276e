package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/auth/audit"
	"github.com/minictl/minictl/auth/authenticator"
	"github.com/minictl/minictl/auth/authorizer"
	"github.com/minictl/minictl/auth/user"
	"github.com/minictl/minictl/internal/testenv"
)

// reviewEnv is a server answering on its secure port too, with a few
// users who prove themselves with bearer tokens, and an authorizer that
// knows what each may do (testAuthorizer):
//
//	alice     reads pods anywhere, and may impersonate bob, the group dev,
//	          the extra scopes=view and the ServiceAccount default:builder
//	mallory   is refused secrets outright (Deny)
//	bob, dev  bob's group dev lists configmaps
//
// Everybody may create the reviews; everything else is refused for lack
// of a rule. The audit log is kept in memory.
type reviewEnv struct {
	*testenv.Env
	SecureURL string
	client    *http.Client
	log       *lockedBuffer
}

// testTokens are the users' bearer tokens. The "aud" token is meant for
// another audience than the API server's.
var testTokens = map[string]*authenticator.Response{
	"alice-token":   {User: &user.Info{Name: "alice", UID: "alice-uid", Groups: []string{"staff", user.AllAuthenticated}}},
	"mallory-token": {User: &user.Info{Name: "mallory", Groups: []string{user.AllAuthenticated}}},
	"aud-token":     {User: &user.Info{Name: "vault"}, Audiences: []string{"vault"}},
}

var testTokenAuthenticator = authenticator.TokenFunc(func(_ context.Context, token string) (*authenticator.Response, bool, error) {
	resp, ok := testTokens[token]
	return resp, ok, nil
})

const noRule = "no rule allows it"

var testAuthorizer = authorizer.Func(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.User
	switch {
	case a.Verb == "create" && (a.APIGroup == "authorization.k8s.io" || a.APIGroup == "authentication.k8s.io"):
		return authorizer.Allow, "reviews are for everyone", nil
	case u.Name == "alice" && a.Resource == "pods" && (a.Verb == "get" || a.Verb == "list" || a.Verb == "watch"):
		return authorizer.Allow, "alice reads pods", nil
	case u.Name == "alice" && a.Verb == "impersonate":
		ok := a.Resource == "users" && a.Name == "bob" ||
			a.Resource == "groups" && a.Name == "dev" ||
			a.Resource == "userextras" && a.Subresource == "scopes" && a.Name == "view" ||
			a.Resource == "serviceaccounts" && a.Namespace == "default" && a.Name == "builder"
		if ok {
			return authorizer.Allow, "", nil
		}
	case u.Name == "mallory" && a.Resource == "secrets":
		return authorizer.Deny, "mallory is denied secrets", nil
	case u.InGroup("dev") && a.Resource == "configmaps" && a.Verb == "list":
		return authorizer.Allow, "dev lists configmaps", nil
	}
	return authorizer.NoOpinion, noRule, nil
})

// testRules lists alice's rules; nobody else has any.
type testRules struct{}

func (testRules) RulesFor(_ context.Context, u *user.Info, namespace string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool, error) {
	if u.Name != "alice" {
		return nil, nil, false, nil
	}
	return []authorizationv1.ResourceRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}}},
		[]authorizationv1.NonResourceRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}, false, nil
}

// startSecure starts a reviewEnv; policy nil audits at the default level.
func startReviewEnv(t *testing.T, policy *audit.Policy) *reviewEnv {
	t.Helper()
	log := &lockedBuffer{}
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{
		Authenticator:      authenticator.BearerToken(testTokenAuthenticator),
		Authorizer:         testAuthorizer,
		TokenAuthenticator: testTokenAuthenticator,
		RuleResolver:       testRules{},
		AuditLog:           log,
		AuditPolicy:        policy,
	}})
	serverTLS, roots := testServingCert(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = env.Server.ServeSecure(ctx, ln, serverTLS)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return &reviewEnv{
		Env: env, SecureURL: "https://" + ln.Addr().String(), log: log,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}},
	}
}

// testServingCert makes a CA and a serving certificate for 127.0.0.1
// signed by it: the server's TLS config, and the pool a client trusts.
func testServingCert(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "minictl"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, roots
}

// as sends one request to the secure port with token ("" for none) and
// the headers given as name, value pairs.
func (e *reviewEnv) as(t testing.TB, token, method, path string, body any, headers ...string) *reply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.SecureURL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", jsonType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &reply{code: resp.StatusCode, header: resp.Header, body: data}
}

// events are the audit events written so far.
func (e *reviewEnv) events(t testing.TB) []audit.Event {
	t.Helper()
	var out []audit.Event
	sc := bufio.NewScanner(bytes.NewReader(e.log.bytes()))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev audit.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit line is not an Event: %v: %s", err, sc.Text())
		}
		if ev.Kind != "Event" || ev.APIVersion != "audit.k8s.io/v1" {
			t.Fatalf("audit line is a %s %s", ev.APIVersion, ev.Kind)
		}
		out = append(out, ev)
	}
	return out
}

// eventsOf are the events of the request whose Audit-Id r carries.
func (e *reviewEnv) eventsOf(t testing.TB, r *reply) []audit.Event {
	t.Helper()
	id := r.header.Get("Audit-Id")
	if id == "" {
		t.Fatalf("the answer has no Audit-Id header")
	}
	// The last event may be written just after the answer is sent.
	var evs []audit.Event
	eventually(t, "the request's audit events", func() (bool, string) {
		evs = slices.DeleteFunc(e.events(t), func(ev audit.Event) bool { return ev.AuditID != id })
		done := slices.ContainsFunc(evs, func(ev audit.Event) bool {
			return ev.Stage == audit.StageResponseComplete || ev.Stage == audit.StagePanic
		})
		return done, fmt.Sprintf("%d events, none complete", len(evs))
	})
	return evs
}

// lockedBuffer is an audit log in memory, written by the server's
// handlers and read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
