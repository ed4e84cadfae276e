package compat

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// The tests here use the secure port only, with the admin kubeconfig up
// writes to its data dir, the way a user of a real cluster does: every
// request is authenticated by its client certificate or token and
// authorized by RBAC.

// secureKubectl runs kubectl with kubeconfig (not the plain listener's).
func secureKubectl(t *testing.T, kubeconfig string, args ...string) result {
	t.Helper()
	return kubectlRun(t, "", nil, append([]string{"--kubeconfig", kubeconfig}, args...)...)
}

// mustSecureKubectl is secureKubectl that fails the test unless kubectl
// succeeds; it returns kubectl's stdout.
func mustSecureKubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	r := secureKubectl(t, kubeconfig, args...)
	if r.err != nil {
		t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.err, r.stdout, r.stderr)
	}
	return r.stdout
}

// exitCode is kubectl's exit status; -1 when it did not exit by itself.
func exitCode(err error) int {
	var ee *exec.ExitError
	if err == nil {
		return 0
	}
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// whoami is what `kubectl auth whoami -o json` reports for kubeconfig.
func whoami(t *testing.T, kubeconfig string, args ...string) authenticationv1.UserInfo {
	t.Helper()
	out := mustSecureKubectl(t, kubeconfig, append([]string{"auth", "whoami", "-o", "json"}, args...)...)
	var review authenticationv1.SelfSubjectReview
	if err := json.Unmarshal([]byte(out), &review); err != nil {
		t.Fatalf("auth whoami -o json: %v\n%s", err, out)
	}
	if review.Kind != "SelfSubjectReview" || review.APIVersion != "authentication.k8s.io/v1" {
		t.Errorf("auth whoami printed %s %s, want authentication.k8s.io/v1 SelfSubjectReview", review.APIVersion, review.Kind)
	}
	return review.Status.UserInfo
}

// credentialID is the extra kube-apiserver adds to a user to name the
// credential that proved who it is.
const credentialID = "authentication.kubernetes.io/credential-id"

// claimsOf are a JWT's claims, read without verifying it.
func claimsOf(t *testing.T, token string) tokenClaims {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token is not a JWT: %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("token payload: %v", err)
	}
	var claims tokenClaims
	if err := json.Unmarshal(payload, &claims); err != nil || claims.ID == "" {
		t.Fatalf("token claims: %v, jti %q", err, claims.ID)
	}
	return claims
}

// tokenClaims are the claims of a ServiceAccount token the tests look at.
type tokenClaims struct {
	ID        string `json:"jti"`
	IssuedAt  int64  `json:"iat"`
	ExpiresAt int64  `json:"exp"`
}

// kubeconfigAs writes a kubeconfig for the admin's cluster and context
// with user's credentials instead of the admin's.
func kubeconfigAs(t *testing.T, user clientcmdapi.AuthInfo) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.adminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo] = &user
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// adminClientset is client-go on the secure port as the admin, from up's
// kubeconfig.
func adminClientset(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", env.adminKubeconfig)
	if err != nil {
		t.Fatalf("admin kubeconfig: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestAuthKubectlAdmin(t *testing.T) {
	admin := env.adminKubeconfig
	cfg, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		t.Fatalf("admin kubeconfig: %v", err)
	}
	if server := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server; server != env.secureURL {
		t.Fatalf("admin kubeconfig's server is %s, want the secure port %s", server, env.secureURL)
	}

	nodes := parseTable(t, mustSecureKubectl(t, admin, "get", "nodes"))
	if len(nodes.rows) < 3 {
		t.Errorf("get nodes over TLS: %d nodes, want up's 3", len(nodes.rows))
	}

	me := whoami(t, admin)
	if me.Username != "minictl-admin" || !slices.Contains(me.Groups, "system:masters") || !slices.Contains(me.Groups, "system:authenticated") {
		t.Errorf("auth whoami: %+v, want minictl-admin in system:masters and system:authenticated", me)
	}
	table := parseTable(t, mustSecureKubectl(t, admin, "auth", "whoami"))
	wantHeader(t, table, "ATTRIBUTE", "VALUE")
	if got := table.col(t, table.find(t, "ATTRIBUTE", "Username"), "VALUE"); got != "minictl-admin" {
		t.Errorf("auth whoami Username %q, want minictl-admin", got)
	}

	// system:masters is bound to cluster-admin: everything on every
	// resource and every non-resource URL.
	list := parseTable(t, mustSecureKubectl(t, admin, "auth", "can-i", "--list"))
	wantHeader(t, list, "Resources", "Non-Resource URLs", "Resource Names", "Verbs")
	if verbs := list.col(t, list.find(t, "Resources", "*.*"), "Verbs"); verbs != "[*]" {
		t.Errorf("auth can-i --list: *.* may %s, want [*]", verbs)
	}
	if verbs := list.col(t, list.find(t, "Non-Resource URLs", "[*]"), "Verbs"); verbs != "[*]" {
		t.Errorf("auth can-i --list: non-resource URLs [*] may %s, want [*]", verbs)
	}

	// A ServiceAccount nobody bound may not create pods; can-i says no
	// and exits 1.
	r := secureKubectl(t, admin, "auth", "can-i", "create", "pods", "--as", "system:serviceaccount:default:x")
	if strings.TrimSpace(r.stdout) != "no" || exitCode(r.err) != 1 {
		t.Errorf("can-i create pods as an unbound ServiceAccount: %q exit %d (%s), want no, exit 1", r.stdout, exitCode(r.err), r.stderr)
	}

	// A RoleBinding to edit lets alice create pods in its namespace, and
	// there only.
	const ns = "compat-auth-kubectl"
	mustSecureKubectl(t, admin, "create", "namespace", ns)
	t.Cleanup(func() { secureKubectl(t, admin, "delete", "namespace", ns, "--wait=false") })
	r = secureKubectl(t, admin, "auth", "can-i", "create", "pods", "-n", ns, "--as", "alice")
	if strings.TrimSpace(r.stdout) != "no" {
		t.Errorf("can-i create pods as alice before her RoleBinding: %q, want no", r.stdout)
	}
	mustSecureKubectl(t, admin, "create", "rolebinding", "alice-edit", "-n", ns, "--clusterrole", "edit", "--user", "alice")
	eventually(t, 10*time.Second, "alice may create pods after her RoleBinding", func() (bool, string) {
		r := secureKubectl(t, admin, "auth", "can-i", "create", "pods", "-n", ns, "--as", "alice")
		return strings.TrimSpace(r.stdout) == "yes" && r.err == nil, r.stdout + r.stderr
	})
	r = secureKubectl(t, admin, "auth", "can-i", "create", "pods", "-n", "default", "--as", "alice")
	if strings.TrimSpace(r.stdout) != "no" {
		t.Errorf("can-i create pods as alice in default: %q, want no (her RoleBinding is in %s)", r.stdout, ns)
	}
	alice := whoami(t, admin, "--as", "alice")
	if alice.Username != "alice" || !slices.Equal(alice.Groups, []string{"system:authenticated"}) {
		t.Errorf("auth whoami --as alice: %+v, want alice in system:authenticated", alice)
	}
	mustSecureKubectl(t, admin, "get", "pods", "-n", ns, "--as", "alice")

	// jane has no binding: kube-apiserver's Forbidden, word for word.
	r = secureKubectl(t, admin, "get", "pods", "-n", "default", "--as", "jane")
	const forbidden = `Error from server (Forbidden): pods is forbidden: User "jane" cannot list resource "pods" in API group "" in the namespace "default"`
	if r.err == nil || strings.TrimSpace(r.stderr) != forbidden {
		t.Errorf("get pods as jane: %v\nstderr: %q\nwant: %q", r.err, r.stderr, forbidden)
	}
}

func TestCertificateApproveKubectl(t *testing.T) {
	admin := env.adminKubeconfig
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "carol", Organization: []string{"compat-devs"}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	request := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	const name = "compat-carol"
	manifest := fmt.Sprintf(`apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: %s
spec:
  request: %s
  signerName: kubernetes.io/kube-apiserver-client
  expirationSeconds: 86400
  usages:
  - client auth
`, name, base64.StdEncoding.EncodeToString(request))
	path := filepath.Join(t.TempDir(), "csr.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	out := mustSecureKubectl(t, admin, "create", "-f", path)
	if want := "certificatesigningrequest.certificates.k8s.io/" + name + " created"; strings.TrimSpace(out) != want {
		t.Errorf("create -f: %q, want %q", out, want)
	}
	t.Cleanup(func() { secureKubectl(t, admin, "delete", "csr", name) })

	csrs := parseTable(t, mustSecureKubectl(t, admin, "get", "csr", name))
	wantHeader(t, csrs, "NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION")
	row := csrs.find(t, "NAME", name)
	if got := csrs.col(t, row, "CONDITION"); got != "Pending" {
		t.Errorf("CONDITION before approval %q, want Pending", got)
	}
	if got := csrs.col(t, row, "REQUESTOR"); got != "minictl-admin" {
		t.Errorf("REQUESTOR %q, want minictl-admin (whoever created it)", got)
	}
	if got := csrs.col(t, row, "REQUESTEDDURATION"); got != "24h" {
		t.Errorf("REQUESTEDDURATION %q, want 24h", got)
	}

	out = mustSecureKubectl(t, admin, "certificate", "approve", name)
	if want := "certificatesigningrequest.certificates.k8s.io/" + name + " approved"; strings.TrimSpace(out) != want {
		t.Errorf("certificate approve: %q, want %q", out, want)
	}
	var certPEM string
	eventually(t, 30*time.Second, "csrsigning issues the approved certificate", func() (bool, string) {
		r := secureKubectl(t, admin, "get", "csr", name, "-o", "jsonpath={.status.certificate}")
		certPEM = r.stdout
		return r.err == nil && certPEM != "", r.stdout + r.stderr
	})
	csrs = parseTable(t, mustSecureKubectl(t, admin, "get", "csr", name))
	if got := csrs.col(t, csrs.find(t, "NAME", name), "CONDITION"); got != "Approved,Issued" {
		t.Errorf("CONDITION after signing %q, want Approved,Issued", got)
	}
	cert, err := base64.StdEncoding.DecodeString(certPEM)
	if err != nil {
		t.Fatalf("status.certificate is not base64: %v", err)
	}
	block, _ := pem.Decode(cert)
	if block == nil {
		t.Fatalf("status.certificate holds no PEM: %q", cert)
	}
	issued, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if issued.Subject.CommonName != "carol" || !slices.Equal(issued.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("issued certificate: subject %v, usages %v; want carol for client auth", issued.Subject, issued.ExtKeyUsage)
	}

	// carol's kubeconfig: the admin's cluster, her certificate and key.
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	carol := kubeconfigAs(t, clientcmdapi.AuthInfo{
		ClientCertificateData: cert,
		ClientKeyData:         pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	})
	me := whoami(t, carol)
	if me.Username != "carol" || !slices.Equal(me.Groups, []string{"compat-devs", "system:authenticated"}) {
		t.Errorf("auth whoami with the issued certificate: %+v, want carol in [compat-devs system:authenticated]", me)
	}
	// kube-apiserver names the credential: the certificate's SHA-256.
	sum := sha256.Sum256(issued.Raw)
	if got, want := me.Extra[credentialID], "X509SHA256="+hex.EncodeToString(sum[:]); !slices.Equal(got, []string{want}) {
		t.Errorf("auth whoami extra %s: %v, want [%s]", credentialID, got, want)
	}
	r := secureKubectl(t, carol, "get", "pods", "-n", "default")
	const forbidden = `Error from server (Forbidden): pods is forbidden: User "carol" cannot list resource "pods" in API group "" in the namespace "default"`
	if strings.TrimSpace(r.stderr) != forbidden {
		t.Errorf("get pods as carol: %v\nstderr: %q\nwant: %q", r.err, r.stderr, forbidden)
	}
}

func TestServiceAccountTokenClientGo(t *testing.T) {
	ctx := context.Background()
	admin := adminClientset(t)
	const ns, sa = "compat-auth-sa", "reader"
	createNamespace(t, admin, ns)
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ServiceAccount: %v", err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	if tr.Status.Token == "" || tr.Status.ExpirationTimestamp.IsZero() {
		t.Fatalf("TokenRequest status: %+v, want a token and its expiry", tr.Status)
	}

	// What rest.InClusterConfig builds inside a pod: the server, the
	// ServiceAccount's bearer token, and the cluster CA's file.
	cfg := &rest.Config{
		Host:            env.secureURL,
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(env.dataDir, "pki", "ca.crt")},
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview with the token: %v", err)
	}
	username := "system:serviceaccount:" + ns + ":" + sa
	wantGroups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	if u := review.Status.UserInfo; u.Username != username || !slices.Equal(u.Groups, wantGroups) {
		t.Errorf("SelfSubjectReview: %+v, want %s in %v", u, username, wantGroups)
	}
	// kube-apiserver names the credential by the token's jti.
	if got, want := review.Status.UserInfo.Extra[credentialID], "JTI="+claimsOf(t, tr.Status.Token).ID; !slices.Equal(got, []string{want}) {
		t.Errorf("SelfSubjectReview extra %s: %v, want [%s]", credentialID, got, want)
	}

	_, err = cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	wantMsg := fmt.Sprintf(`pods is forbidden: User %q cannot list resource "pods" in API group "" in the namespace %q`, username, ns)
	if !apierrors.IsForbidden(err) || err.Error() != wantMsg {
		t.Fatalf("list pods before any binding: %v, want 403 %q", err, wantMsg)
	}

	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "reader-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RoleBinding: %v", err)
	}
	eventually(t, 10*time.Second, "the ServiceAccount may list pods after its RoleBinding to view", func() (bool, string) {
		_, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
	// view reads; it does not write.
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("create a ConfigMap with view: %v, want Forbidden", err)
	}
	if _, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list pods in default with a RoleBinding in %s: %v, want Forbidden", ns, err)
	}

	// A token the server did not sign proves nothing: 401.
	bad := rest.CopyConfig(cfg)
	bad.BearerToken = tr.Status.Token[:len(tr.Status.Token)-4] + "AAAA"
	bcs, err := kubernetes.NewForConfig(bad)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bcs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("list pods with a forged token: %v, want 401 Unauthorized", err)
	}
}

func TestServiceAccountKubectlCreateToken(t *testing.T) {
	admin := env.adminKubeconfig
	const ns, sa = "compat-auth-token", "builder"
	mustSecureKubectl(t, admin, "create", "namespace", ns)
	t.Cleanup(func() { secureKubectl(t, admin, "delete", "namespace", ns, "--wait=false") })
	mustSecureKubectl(t, admin, "create", "serviceaccount", sa, "-n", ns)

	// kubectl create token asks for a TokenRequest of the duration given.
	token := strings.TrimSpace(mustSecureKubectl(t, admin, "create", "token", sa, "-n", ns, "--duration", "1h"))
	if c := claimsOf(t, token); c.ExpiresAt-c.IssuedAt != 3600 {
		t.Errorf("token lives %ds, want the 3600s asked for", c.ExpiresAt-c.IssuedAt)
	}
	builder := kubeconfigAs(t, clientcmdapi.AuthInfo{Token: token})
	username := "system:serviceaccount:" + ns + ":" + sa
	if me := whoami(t, builder); me.Username != username {
		t.Errorf("auth whoami with the token: %+v, want %s", me, username)
	}

	// Unbound, it has what every authenticated user has (basic-user,
	// discovery), and cannot create deployments.
	list := parseTable(t, mustSecureKubectl(t, builder, "auth", "can-i", "--list", "-n", ns))
	if verbs := list.col(t, list.find(t, "Resources", "selfsubjectreviews.authentication.k8s.io"), "Verbs"); verbs != "[create]" {
		t.Errorf("can-i --list: selfsubjectreviews may %s, want [create]", verbs)
	}
	if verbs := list.col(t, list.find(t, "Non-Resource URLs", "[/version]"), "Verbs"); verbs != "[get]" {
		t.Errorf("can-i --list: /version may %s, want [get]", verbs)
	}
	r := secureKubectl(t, builder, "auth", "can-i", "create", "deployments.apps", "-n", ns)
	if strings.TrimSpace(r.stdout) != "no" || exitCode(r.err) != 1 {
		t.Errorf("can-i create deployments before a binding: %q exit %d, want no, exit 1", r.stdout, exitCode(r.err))
	}
	r = secureKubectl(t, builder, "create", "deployment", "web", "--image", "nginx", "-n", ns)
	forbidden := fmt.Sprintf(`error: failed to create deployment: deployments.apps is forbidden: User %q cannot create resource "deployments" in API group "apps" in the namespace %q`, username, ns)
	if strings.TrimSpace(r.stderr) != forbidden {
		t.Errorf("create deployment before a binding: %v\nstderr: %q\nwant: %q", r.err, r.stderr, forbidden)
	}

	mustSecureKubectl(t, admin, "create", "rolebinding", "builder-edit", "-n", ns, "--clusterrole", "edit", "--serviceaccount", ns+":"+sa)
	eventually(t, 10*time.Second, "the ServiceAccount may create deployments after its RoleBinding to edit", func() (bool, string) {
		r := secureKubectl(t, builder, "auth", "can-i", "create", "deployments.apps", "-n", ns)
		return strings.TrimSpace(r.stdout) == "yes", r.stdout + r.stderr
	})
	out := mustSecureKubectl(t, builder, "create", "deployment", "web", "--image", "nginx", "-n", ns)
	if want := "deployment.apps/web created"; strings.TrimSpace(out) != want {
		t.Errorf("create deployment with edit: %q, want %q", out, want)
	}
}

func TestAuthAnonymousClientGo(t *testing.T) {
	ctx := context.Background()
	// No credentials at all: only the cluster CA to trust the server by.
	cs, err := kubernetes.NewForConfig(&rest.Config{
		Host:            env.secureURL,
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(env.dataDir, "pki", "ca.crt")},
	})
	if err != nil {
		t.Fatal(err)
	}
	// system:public-info-viewer lets anyone read the version.
	if v, err := cs.Discovery().ServerVersion(); err != nil || v.GitVersion == "" {
		t.Errorf("version as system:anonymous: %v %+v, want it readable", err, v)
	}
	_, err = cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	const want = `pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" at the cluster scope`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("list pods as system:anonymous: %v, want 403 %q", err, want)
	}
}

func TestCertificateDenyKubectl(t *testing.T) {
	admin := env.adminKubeconfig
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "mallory"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	const name = "compat-mallory"
	manifest := fmt.Sprintf(`{"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
  "metadata": {"name": %q},
  "spec": {"request": %q, "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]}}`,
		name, base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})))
	path := filepath.Join(t.TempDir(), "csr.json")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	mustSecureKubectl(t, admin, "create", "-f", path)
	t.Cleanup(func() { secureKubectl(t, admin, "delete", "csr", name) })

	out := mustSecureKubectl(t, admin, "certificate", "deny", name)
	if want := "certificatesigningrequest.certificates.k8s.io/" + name + " denied"; strings.TrimSpace(out) != want {
		t.Errorf("certificate deny: %q, want %q", out, want)
	}
	csrs := parseTable(t, mustSecureKubectl(t, admin, "get", "csr", name))
	if got := csrs.col(t, csrs.find(t, "NAME", name), "CONDITION"); got != "Denied" {
		t.Errorf("CONDITION after deny %q, want Denied", got)
	}
	// A denied request stays denied: kubectl will not approve it, and
	// kube-apiserver refuses an approval beside the denial.
	r := secureKubectl(t, admin, "certificate", "approve", name)
	if want := fmt.Sprintf("error: certificate signing request %q is already Denied", name); strings.TrimSpace(r.stderr) != want {
		t.Errorf("approve after deny: %v\nstderr: %q\nwant: %q", r.err, r.stderr, want)
	}
	ctx := context.Background()
	csrClient := adminClientset(t).CertificatesV1().CertificateSigningRequests()
	csr, err := csrClient.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Forced",
	})
	_, err = csrClient.UpdateApproval(ctx, name, csr, metav1.UpdateOptions{})
	const exclusive = `status.conditions[1].type: Invalid value: "Approved": Approved and Denied conditions are mutually exclusive`
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), exclusive) {
		t.Errorf("approval beside the denial: %v, want 422 with %q", err, exclusive)
	}
}
