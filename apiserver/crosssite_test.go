package apiserver_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
)

// send sends one request with extra headers (Host among them) and reads
// the answer.
func send(t *testing.T, env *testenv.Env, method, path string, header map[string]string, body string) *reply {
	t.Helper()
	req, err := http.NewRequest(method, env.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := env.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return &reply{code: resp.StatusCode, header: resp.Header, body: data}
}

// A page that rebinds its own name to 127.0.0.1 reaches the loopback
// listener with its name in Host: refused. Loopback names and addresses
// are served.
func TestLoopbackListenerRefusesForeignHosts(t *testing.T) {
	env := testenv.Start(t)
	port := env.URL[strings.LastIndex(env.URL, ":"):]
	for _, host := range []string{"rebind.example.com" + port, "rebind.example.com", "10.0.0.1" + port, "127.0.0.1.nip.io" + port} {
		send(t, env, http.MethodGet, "/api/v1/namespaces", map[string]string{"Host": host}, "").
			wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
		send(t, env, http.MethodPost, cmPath("default", ""), map[string]string{"Host": host, "Content-Type": jsonType}, `{"metadata":{"name":"rebound"}}`).
			wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
	}
	for _, host := range []string{"localhost" + port, "LOCALHOST", "127.0.0.1" + port, "127.1.2.3" + port, "[::1]" + port, "kube.localhost" + port} {
		send(t, env, http.MethodGet, "/api/v1/namespaces", map[string]string{"Host": host}, "").want(t, http.StatusOK)
	}
	do(t, env, http.MethodGet, cmPath("default", "rebound"), "", nil).want(t, http.StatusNotFound)
}

// A request from another origin is refused unless --cors-allowed-origins
// allows it; then it gets kube-apiserver's CORS headers, and a preflight
// its 204. A page of the server's own origin is served.
func TestCrossOriginRequests(t *testing.T) {
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{
		CORSAllowedOrigins: []string{`^https://dashboard\.example$`},
	}})
	host := strings.TrimPrefix(env.URL, "http://")

	evil := map[string]string{"Origin": "https://evil.example", "Content-Type": jsonType}
	send(t, env, http.MethodPost, cmPath("default", ""), evil, `{"metadata":{"name":"csrf"}}`).
		wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
	send(t, env, http.MethodGet, cmPath("default", ""), evil, "").
		wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
	r := send(t, env, http.MethodOptions, cmPath("default", ""), map[string]string{
		"Origin": "https://evil.example", "Access-Control-Request-Method": "POST",
	}, "")
	if r.code != http.StatusForbidden || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from a refused origin: HTTP %d, Access-Control-Allow-Origin %q", r.code, r.header.Get("Access-Control-Allow-Origin"))
	}
	do(t, env, http.MethodGet, cmPath("default", "csrf"), "", nil).want(t, http.StatusNotFound)

	const allowed = "https://dashboard.example"
	r = send(t, env, http.MethodOptions, cmPath("default", ""), map[string]string{
		"Origin": allowed, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type",
	}, "")
	r.want(t, http.StatusNoContent)
	for k, want := range map[string]string{
		"Access-Control-Allow-Origin":      allowed,
		"Access-Control-Allow-Credentials": "true",
	} {
		if got := r.header.Get(k); got != want {
			t.Errorf("preflight %s: %q, want %q", k, got, want)
		}
	}
	for k, want := range map[string]string{"Access-Control-Allow-Methods": "POST", "Access-Control-Allow-Headers": "Content-Type"} {
		if got := r.header.Get(k); !strings.Contains(got, want) {
			t.Errorf("preflight %s: %q, want it to include %q", k, got, want)
		}
	}
	r = send(t, env, http.MethodPost, cmPath("default", ""), map[string]string{"Origin": allowed, "Content-Type": jsonType}, `{"metadata":{"name":"cors"}}`)
	r.want(t, http.StatusCreated)
	if got := r.header.Get("Access-Control-Allow-Origin"); got != allowed {
		t.Errorf("allowed request: Access-Control-Allow-Origin %q, want %q", got, allowed)
	}
	// A subdomain does not match the anchored expression.
	send(t, env, http.MethodGet, cmPath("default", ""), map[string]string{"Origin": "https://dashboard.example.evil.example"}, "").
		wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)

	// The server's own origin (the future web view) is served.
	send(t, env, http.MethodPost, cmPath("default", ""), map[string]string{"Origin": "http://" + host, "Content-Type": jsonType}, `{"metadata":{"name":"same"}}`).
		want(t, http.StatusCreated)
}
