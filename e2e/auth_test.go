package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/auth/pki"
	"github.com/minictl/minictl/auth/serviceaccount"
	"github.com/minictl/minictl/internal/minitest"
)

// secureURL is the secure port's URL, as minictl up prints it.
func (c *cluster) secureURL() string {
	c.t.Helper()
	m := regexp.MustCompile(`secure API:\s+(https://\S+)`).FindStringSubmatch(c.Stdout.String())
	if m == nil {
		c.t.Fatalf("minictl up printed no secure API URL:\n%s", c.Stdout)
	}
	return m[1]
}

// credentials are what a request on the secure port proves itself with:
// a bearer token, a client certificate, or neither.
type credentials struct {
	token string
	cert  *tls.Certificate
}

// secureDo sends one request to the secure port of the cluster whose data
// dir is dataDir, trusting the cluster CA, and decodes the JSON answer.
func (c *cluster) secureDo(dataDir string, cred credentials, method, path, body string) (int, map[string]any) {
	c.t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(dataDir, "pki", "ca.crt"))
	if err != nil {
		c.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cred.cert != nil {
		// Always sent, as kubectl sends it, even to a server whose list of
		// acceptable CAs does not name its issuer.
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cred.cert, nil }
	}
	tr := &http.Transport{TLSClientConfig: tc}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(method, c.secureURL()+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if cred.token != "" {
		req.Header.Set("Authorization", "Bearer "+cred.token)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		c.t.Fatalf("%s %s on the secure port: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		c.t.Fatalf("%s %s on the secure port: answer is not JSON: %v\n%s", method, path, err, data)
	}
	return resp.StatusCode, out
}

// mustDo is do on the plain listener (the admin), failing the test unless
// the answer has code want.
func (c *cluster) mustDo(want int, method, path, body string) map[string]any {
	c.t.Helper()
	code, out := c.do(method, path, "application/json", body)
	if code != want {
		c.t.Fatalf("%s %s: %d %v, want %d", method, path, code, out, want)
	}
	return out
}

// TestKubeletJoinsWithBootstrapToken joins a kubelet started alone to a
// cluster as kubeadm join does: a bootstrap token Secret and kubeadm's
// bindings for its group, a bootstrap kubeconfig with the token and the
// cluster CA. The kubelet's CertificateSigningRequest is approved by
// csrapproving and signed by csrsigning, the node registers and turns
// Ready, a pod runs on it, and its requests are made as system:node:node-9.
func TestKubeletJoinsWithBootstrapToken(t *testing.T) {
	addr, dataDir := minitest.FreeAddr(t), t.TempDir()
	auditLog := filepath.Join(t.TempDir(), "audit.log")
	// No cloud: node-9 has no machine, and a cloud cluster deletes such a
	// node the first time its heartbeat is late.
	c := up(t, addr, dataDir, "--fast", "--nodes", "0", "--cloud-provider=", "--enable-bootstrap-token-auth",
		"--controllers", "*,bootstrapsigner,tokencleaner", "--audit-log-path", auditLog)
	secure := c.secureURL()

	const tokenID, tokenSecret = "abcdef", "0123456789abcdef"
	const group = "system:bootstrappers:kubeadm:default-node-token"
	c.mustDo(http.StatusCreated, "POST", "/api/v1/namespaces/kube-system/secrets", `{"metadata":{"name":"bootstrap-token-`+tokenID+`"},
	  "type":"bootstrap.kubernetes.io/token",
	  "stringData":{"token-id":"`+tokenID+`","token-secret":"`+tokenSecret+`",
	    "usage-bootstrap-authentication":"true","usage-bootstrap-signing":"true",
	    "auth-extra-groups":"`+group+`"}}`)
	// kubeadm's bindings: its bootstrappers may ask for node client
	// certificates, and have them approved; nodes may renew their own.
	for _, b := range []struct{ name, role, group string }{
		{"kubeadm:kubelet-bootstrap", "system:node-bootstrapper", group},
		{"kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", group},
		{"kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
	} {
		c.mustDo(http.StatusCreated, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", fmt.Sprintf(`{"metadata":{"name":%q},
		  "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":%q},
		  "subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":%q}]}`, b.name, b.role, b.group))
	}

	// The bootstrap token proves who it is, and that is all it may do
	// besides asking for a certificate.
	token := tokenID + "." + tokenSecret
	code, st := c.secureDo(dataDir, credentials{token: token}, "GET", "/api/v1/namespaces/default/pods", "")
	if code != http.StatusForbidden || !strings.Contains(fmt.Sprint(st["message"]), `User "system:bootstrap:`+tokenID+`" cannot list resource "pods"`) {
		t.Fatalf("bootstrap token listing pods: %d %v, want 403 naming system:bootstrap:%s", code, st, tokenID)
	}

	caPEM, err := os.ReadFile(filepath.Join(dataDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	kdir := t.TempDir()
	bootstrapKubeconfig := filepath.Join(kdir, "bootstrap-kubelet.conf")
	kubeconfig := filepath.Join(kdir, "kubelet.conf")
	certDir := filepath.Join(kdir, "pki")
	if err := os.WriteFile(bootstrapKubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: minictl
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: tls-bootstrap-token-user
  user:
    token: %s
contexts:
- name: tls-bootstrap-token-user@minictl
  context:
    cluster: minictl
    user: tls-bootstrap-token-user
current-context: tls-bootstrap-token-user@minictl
`, secure, base64.StdEncoding.EncodeToString(caPEM), token)), 0o600); err != nil {
		t.Fatal(err)
	}
	kubelet := minitest.Start(t, true, "kubelet", "--name", "node-9", "--fast", "--port", "0",
		"--bootstrap-kubeconfig", bootstrapKubeconfig, "--kubeconfig", kubeconfig, "--cert-dir", certDir,
		"--server", secure)
	t.Cleanup(func() {
		if err := kubelet.Stop(); err != nil {
			t.Errorf("minictl kubelet did not exit cleanly: %v\n%s", err, kubelet.Stdout)
		}
	})
	kubelet.WaitNodesReady(t, c.URL, 1, clusterTimeout)

	// One request, from the bootstrap token, approved by csrapproving and
	// issued by csrsigning for node-9.
	csrs := c.mustDo(http.StatusOK, "GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests", "")
	items, _ := csrs["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("want 1 CertificateSigningRequest, got %v", csrs)
	}
	csr := items[0].(map[string]any)
	if u := field(csr, "spec", "username"); u != "system:bootstrap:"+tokenID {
		t.Errorf("the request's username is %v, want system:bootstrap:%s", u, tokenID)
	}
	if s := field(csr, "spec", "signerName"); s != "kubernetes.io/kube-apiserver-client-kubelet" {
		t.Errorf("the request's signer is %v", s)
	}
	approved := false
	conds, _ := field(csr, "status", "conditions").([]any)
	for _, c := range conds {
		cond := c.(map[string]any)
		if cond["type"] == "Approved" && cond["status"] == "True" && cond["reason"] == "AutoApproved" {
			approved = true
		}
	}
	if !approved {
		t.Errorf("the request was not auto-approved: %v", conds)
	}
	certB64, _ := field(csr, "status", "certificate").(string)
	der, _ := base64.StdEncoding.DecodeString(certB64)
	cert, err := pki.ParseCert(der)
	if err != nil {
		t.Fatalf("the request's certificate: %v (%q)", err, certB64)
	}
	if cert.Subject.CommonName != "system:node:node-9" || strings.Join(cert.Subject.Organization, ",") != "system:nodes" {
		t.Errorf("issued certificate is for %s in %v, want system:node:node-9 in system:nodes", cert.Subject.CommonName, cert.Subject.Organization)
	}
	if _, err := os.Stat(filepath.Join(certDir, "kubelet-client-current.pem")); err != nil {
		t.Errorf("the kubelet kept no client certificate: %v", err)
	}

	// A pod lands on node-9 and runs there.
	c.mustDo(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods",
		`{"metadata":{"name":"joined"},"spec":{"containers":[{"name":"app","image":"nginx:1.27"}]}}`)
	eventually(t, "pod joined Running on node-9", func() (bool, string) {
		_, p := c.do("GET", "/api/v1/namespaces/default/pods/joined", "", "")
		return field(p, "spec", "nodeName") == "node-9" && field(p, "status", "phase") == "Running",
			fmt.Sprintf("node %v, phase %v", field(p, "spec", "nodeName"), field(p, "status", "phase"))
	})

	// The audit log shows who did it: the node's status and the pod's
	// by system:node:node-9 in system:nodes, the request by the token.
	seen := map[string]bool{}
	eventually(t, "node-9's requests in the audit log", func() (bool, string) {
		data, err := os.ReadFile(auditLog)
		if err != nil {
			return false, err.Error()
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			var ev struct {
				User struct {
					Username string   `json:"username"`
					Groups   []string `json:"groups"`
				} `json:"user"`
				ObjectRef struct {
					Resource, Subresource, Name string
				} `json:"objectRef"`
				Verb string `json:"verb"`
			}
			if json.Unmarshal(line, &ev) != nil {
				continue
			}
			switch {
			case ev.User.Username == "system:node:node-9" && strings.Contains(strings.Join(ev.User.Groups, ","), "system:nodes") &&
				ev.ObjectRef.Resource == "pods" && ev.ObjectRef.Subresource == "status" && ev.ObjectRef.Name == "joined":
				seen["pod status"] = true
			case ev.User.Username == "system:node:node-9" && ev.ObjectRef.Resource == "nodes" && ev.Verb == "create":
				seen["node create"] = true
			case ev.User.Username == "system:bootstrap:"+tokenID && ev.ObjectRef.Resource == "certificatesigningrequests" && ev.Verb == "create":
				seen["csr create"] = true
			}
		}
		return len(seen) == 3, fmt.Sprint(seen)
	})
	if strings.Contains(readFile(t, auditLog), tokenSecret) || strings.Contains(c.Stderr.String()+c.Stdout.String()+kubelet.Stdout.String(), tokenSecret) {
		t.Errorf("the bootstrap token's secret appears in a log")
	}
}

// TestControllerRunsUnderItsRole takes the deployment controller's
// ClusterRoleBinding away: the controller, running as its own
// ServiceAccount, is refused the ReplicaSet it creates for a Deployment
// with kube's sentence naming it, and creates nothing.
func TestControllerRunsUnderItsRole(t *testing.T) {
	addr, dataDir := minitest.FreeAddr(t), t.TempDir()
	// The timeline (the default log format) says that a sync failed; the
	// text log says why.
	c := up(t, addr, dataDir, "--fast", "--nodes", "0", "--log-format", "text")
	c.mustDo(http.StatusOK, "DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:controller:deployment-controller", "")
	c.mustDo(http.StatusCreated, "POST", "/apis/apps/v1/namespaces/default/deployments",
		`{"metadata":{"name":"web"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},
		  "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}}}`)
	const refusal = `replicasets.apps is forbidden: User \"system:serviceaccount:kube-system:deployment-controller\" cannot create resource \"replicasets\" in API group \"apps\" in the namespace \"default\"`
	eventually(t, "the deployment controller's 403 in the log", func() (bool, string) {
		return strings.Contains(c.Stderr.String(), refusal) || strings.Contains(c.Stderr.String(), strings.ReplaceAll(refusal, `\"`, `"`)), ""
	})
	rs := c.mustDo(http.StatusOK, "GET", "/apis/apps/v1/namespaces/default/replicasets", "")
	if items, _ := rs["items"].([]any); len(items) != 0 {
		t.Errorf("the refused controller created ReplicaSets: %v", items)
	}
}

// TestBadCredentialsAreUnauthorized presents the secure port with
// credentials that prove nothing: each is a 401 Unauthorized, whatever
// was asked is not done, and no token shows in minictl's log or the audit
// log.
func TestBadCredentialsAreUnauthorized(t *testing.T) {
	addr, dataDir := minitest.FreeAddr(t), t.TempDir()
	auditLog := filepath.Join(t.TempDir(), "audit.log")
	c := up(t, addr, dataDir, "--fast", "--nodes", "0", "--audit-log-path", auditLog)
	const issuer = "https://kubernetes.default.svc.cluster.local"

	sa := func(name string) *corev1.ServiceAccount {
		out := c.mustDo(http.StatusCreated, "POST", "/api/v1/namespaces/default/serviceaccounts", `{"metadata":{"name":"`+name+`"}}`)
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			UID: types.UID(field(out, "metadata", "uid").(string))}}
	}
	tokenFor := func(name, spec string) string {
		out := c.mustDo(http.StatusCreated, "POST", "/api/v1/namespaces/default/serviceaccounts/"+name+"/token",
			`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":`+spec+`}`)
		return field(out, "status", "token").(string)
	}
	// A good token of robot is a 403 where robot may not go: it proves
	// robot, so the same request with a bad one must be a 401.
	isRobot := func(what, token, name string) {
		t.Helper()
		code, st := c.secureDo(dataDir, credentials{token: token}, "GET", "/api/v1/namespaces/default/secrets", "")
		if code != http.StatusForbidden || !strings.Contains(fmt.Sprint(st["message"]), `"system:serviceaccount:default:`+name+`"`) {
			t.Fatalf("%s: %d %v, want 403 naming system:serviceaccount:default:%s", what, code, st, name)
		}
	}

	robot := sa("robot")
	key, err := serviceaccount.ReadPrivateKey(filepath.Join(dataDir, "pki", "sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	clusterSigner, err := serviceaccount.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherSigner, err := serviceaccount.NewSigner(otherKey)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(s *serviceaccount.Signer, issued time.Time, audiences ...string) string {
		tok, err := s.Sign(serviceaccount.NewClaims(issuer, robot, serviceaccount.Bound{}, issued, 3600, time.Time{}, audiences))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good := sign(clusterSigner, time.Now(), issuer)
	isRobot("a token signed with the cluster's key", good, "robot")

	bad := map[string]credentials{
		"expired":         {token: sign(clusterSigner, time.Now().Add(-3*time.Hour), issuer)},
		"forged":          {token: sign(otherSigner, time.Now(), issuer)},
		"wrong audience":  {token: tokenFor("robot", `{"audiences":["https://vault.example.com"]}`)},
		"not a JWT":       {token: "not-a-token"},
		"bootstrap token": {token: "abcdef.0123456789abcdef"}, // bootstrap token auth is off
	}

	// A ServiceAccount's token dies with it.
	gone := sa("gone")
	goneToken := tokenFor("gone", `{}`)
	isRobot("the token of gone", goneToken, "gone")
	c.mustDo(http.StatusOK, "DELETE", "/api/v1/namespaces/default/serviceaccounts/gone", "")
	bad["deleted ServiceAccount"] = credentials{token: goneToken}
	_ = gone

	// A token bound to a pod dies with the pod.
	pod := c.mustDo(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods",
		`{"metadata":{"name":"holder"},"spec":{"serviceAccountName":"robot","containers":[{"name":"app","image":"nginx:1.27"}]}}`)
	podToken := tokenFor("robot", fmt.Sprintf(`{"boundObjectRef":{"apiVersion":"v1","kind":"Pod","name":"holder","uid":%q}}`, field(pod, "metadata", "uid")))
	isRobot("the token bound to pod holder", podToken, "robot")
	c.mustDo(http.StatusOK, "DELETE", "/api/v1/namespaces/default/pods/holder?gracePeriodSeconds=0", "")
	eventually(t, "pod holder gone", func() (bool, string) {
		code, _ := c.do("GET", "/api/v1/namespaces/default/pods/holder", "", "")
		return code == http.StatusNotFound, fmt.Sprint(code)
	})
	bad["bound to a deleted pod"] = credentials{token: podToken}

	// A client certificate of another CA, even for the admin's name.
	otherCA, err := pki.NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := otherCA.Issue(pki.CertRequest{CommonName: "minictl-admin", Organization: []string{"system:masters"}})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	bad["certificate of another CA"] = credentials{cert: &foreign}

	for what, cred := range bad {
		name := "cm-" + strings.ReplaceAll(what, " ", "-")
		code, st := c.secureDo(dataDir, cred, "POST", "/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"`+name+`"}}`)
		if code != http.StatusUnauthorized || st["reason"] != "Unauthorized" || st["message"] != "Unauthorized" || st["kind"] != "Status" {
			t.Errorf("%s: %d %v, want 401 Unauthorized", what, code, st)
		}
		if code, _ := c.do("GET", "/api/v1/namespaces/default/configmaps/"+name, "", ""); code != http.StatusNotFound {
			t.Errorf("%s: the configmap was stored (%d)", what, code)
		}
	}

	logs := readFile(t, auditLog) + c.Stdout.String() + c.Stderr.String()
	if !strings.Contains(readFile(t, auditLog), `"code":401`) {
		t.Errorf("the audit log records no 401")
	}
	for what, cred := range bad {
		if cred.token != "" && len(cred.token) > 20 && strings.Contains(logs, cred.token) {
			t.Errorf("the %s token appears in a log", what)
		}
	}
	for _, tok := range []string{good, goneToken, podToken} {
		// A JWT's signature is what makes it a credential.
		if sig := tok[strings.LastIndex(tok, ".")+1:]; strings.Contains(logs, sig) {
			t.Errorf("a token's signature appears in a log: %s…", tok[:20])
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
