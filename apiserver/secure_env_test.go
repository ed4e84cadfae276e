package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/auth/audit"
	"github.com/minictl/minictl/auth/authenticator"
	"github.com/minictl/minictl/auth/user"
	"github.com/minictl/minictl/internal/testenv"
)

// secureEnv is a server answering on its secure port too, over TLS with a
// serving certificate from a CA of the test's own. Its plain listener
// (Env.URL) is the admin, as in minictl up; the secure port asks every
// request who it is and what it may do.
type secureEnv struct {
	*testenv.Env
	secureURL string        // https://127.0.0.1:port of the secure port
	whoamiURL string        // https://127.0.0.1:port answering with the user; secureOptions.whoami
	servingCA *testCA       // issued the serving certificate; clients trust it
	client    *http.Client  // trusts servingCA and presents no certificate
	log       *lockedBuffer // the audit log; secureOptions.audit
}

// secureOptions say how a secureEnv's server authenticates, authorizes and
// audits.
type secureOptions struct {
	// server is the server's configuration: its Authentication, its
	// AuthorizationModes or Authorizer, AnonymousAuth, admission plugins.
	server apiserver.Config
	// tokens, when set, are the bearer tokens the secure port accepts and
	// what each proves; TokenReview answers with them too. A token not
	// listed proves nothing.
	tokens map[string]*authenticator.Response
	// audit keeps the audit log in memory (secureEnv.log), at the levels
	// of server.AuditPolicy (nil: every request at Metadata).
	audit bool
	// whoami also serves the secure port's authentication alone on
	// whoamiURL, answering with the user a credential proves.
	whoami bool
}

// usersByToken are tokens proving the users given, for all audiences.
func usersByToken(users map[string]*user.Info) map[string]*authenticator.Response {
	out := make(map[string]*authenticator.Response, len(users))
	for token, u := range users {
		out[token] = &authenticator.Response{User: u}
	}
	return out
}

func startSecureEnv(t *testing.T, opts secureOptions) *secureEnv {
	t.Helper()
	cfg := opts.server
	if opts.tokens != nil {
		tokens := authenticator.TokenFunc(func(_ context.Context, token string) (*authenticator.Response, bool, error) {
			resp, ok := opts.tokens[token]
			return resp, ok, nil
		})
		cfg.Authenticator = authenticator.BearerToken(tokens)
		cfg.TokenAuthenticator = tokens
	}
	e := &secureEnv{}
	if opts.audit {
		e.log = &lockedBuffer{}
		cfg.AuditLog = e.log
	}
	e.Env = testenv.StartWith(t, testenv.Options{Server: cfg})
	e.servingCA = newTestCA(t, "serving-ca")
	serving := &tls.Config{Certificates: []tls.Certificate{e.servingCA.issue(t, "kube-apiserver", nil, x509.ExtKeyUsageServerAuth)}}
	e.client = e.clientWith(nil)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.secureURL = "https://" + ln.Addr().String()
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = e.Server.ServeSecure(ctx, ln, serving)
	}()

	if opts.whoami {
		wcfg := serving.Clone()
		wcfg.ClientAuth = tls.RequestClientCert
		wln, err := tls.Listen("tcp", "127.0.0.1:0", wcfg)
		if err != nil {
			t.Fatal(err)
		}
		e.whoamiURL = "https://" + wln.Addr().String()
		who := &http.Server{Handler: e.Server.WhoAmI(), ReadHeaderTimeout: 10 * time.Second}
		wg.Add(2)
		go func() {
			defer wg.Done()
			_ = who.Serve(wln)
		}()
		go func() {
			defer wg.Done()
			<-ctx.Done()
			_ = who.Close()
		}()
	}
	return e
}

// clientWith is an HTTPS client trusting the server, presenting cert if
// any.
func (e *secureEnv) clientWith(cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: e.servingCA.pool}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// as sends one request to the secure port with token ("" for none) and
// the headers given as name, value pairs. body is sent as do sends it,
// as JSON unless a Content-Type header says otherwise.
func (e *secureEnv) as(t testing.TB, token, method, path string, body any, headers ...string) *reply {
	t.Helper()
	return e.send(t, e.secureURL, nil, token, method, path, body, headers...)
}

// patch sends a patch of contentType to the secure port as token's user.
func (e *secureEnv) patch(t testing.TB, token, contentType, path string, body any) *reply {
	t.Helper()
	return e.as(t, token, http.MethodPatch, path, body, "Content-Type", contentType)
}

// send sends one request to base (secureURL or whoamiURL) with the client
// certificate cert and the bearer token given, if any.
func (e *secureEnv) send(t testing.TB, base string, cert *tls.Certificate, token, method, path string, body any, headers ...string) *reply {
	t.Helper()
	req, err := http.NewRequest(method, base+path, encodeBody(t, body))
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
		if http.CanonicalHeaderKey(headers[i]) == "Content-Type" {
			req.Header.Set(headers[i], headers[i+1])
		} else {
			req.Header.Add(headers[i], headers[i+1])
		}
	}
	c := e.client
	if cert != nil {
		c = e.clientWith(cert)
		defer c.CloseIdleConnections()
	}
	resp, err := c.Do(req)
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
func (e *secureEnv) events(t testing.TB) []audit.Event {
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
func (e *secureEnv) eventsOf(t testing.TB, r *reply) []audit.Event {
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

// testCA is a certificate authority of a test's own.
type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
	pool *x509.CertPool
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// pem is the CA's certificate in PEM, as a kubeconfig carries it.
func (ca *testCA) pem() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

// issue signs a certificate for usage: a client's (cn, orgs) or a
// loopback server's.
func (ca *testCA) issue(t testing.TB, cn string, orgs []string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
