package bootstrap_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/auth/pki"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/csrsigning"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/internal/testenv"
	"github.com/minictl/minictl/kubelet/bootstrap"
)

// The bootstrap runs against a real API server on a real etcd, with the
// csrsigning controller signing; the test approves, as an administrator
// (or the csrapproving controller) would. The bootstrap kubeconfig here
// reaches the plain listener, where everyone is the admin: the flow, not
// the bootstrap token's authentication, is what is tested.

func TestBootstrapAsksWaitsAndWritesTheKubeconfig(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	informers := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	opts := csrsigning.Options{CA: ca}
	opts.Client, opts.Informers = rc, informers
	signer, err := csrsigning.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	informers.Start(runCtx)
	go func() { defer close(done); signer.Run(runCtx, 1) }()
	t.Cleanup(func() { stop(); <-done; informers.Shutdown() })

	dir := t.TempDir()
	bootstrapPath := filepath.Join(dir, "bootstrap-kubeconfig")
	if err := os.WriteFile(bootstrapPath, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: "+env.URL+"\nusers:\n- name: u\n  user:\n    token: abcdef.0123456789abcdef\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(dir, "kubelet.conf")
	certDir := filepath.Join(dir, "pki")

	// The approver: approve the node's request once it is there.
	csrs := client.For[*certificatesv1.CertificateSigningRequest](rc)
	approved := make(chan error, 1)
	go func() {
		for {
			l, err := csrs.List(ctx, "", metav1.ListOptions{})
			if err != nil {
				approved <- err
				return
			}
			if len(l.Items) > 0 {
				r := l.Items[0]
				r.Status.Conditions = append(r.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
					Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "TestApproved",
				})
				_, err := csrs.UpdateApproval(ctx, r)
				approved <- err
				return
			}
			select {
			case <-ctx.Done():
				approved <- ctx.Err()
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	if err := bootstrap.LoadClientCert(ctx, kubeconfigPath, bootstrapPath, certDir, "node-7", nil); err != nil {
		t.Fatal(err)
	}
	if err := <-approved; err != nil {
		t.Fatal(err)
	}

	// The kubeconfig works, with a key and a certificate that go together,
	// for system:node:node-7 in system:nodes, signed by the cluster CA.
	cfg, err := client.LoadKubeconfig(kubeconfigPath, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server != env.URL || cfg.CertFile == "" {
		t.Fatalf("kubeconfig: server %q cert %q, want the bootstrap server and a client certificate", cfg.Server, cfg.CertFile)
	}
	pair, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		t.Fatalf("the key and certificate written: %v", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:node-7" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:nodes" {
		t.Errorf("subject %v, want system:node:node-7 in system:nodes", cert.Subject)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the certificate does not verify as a client certificate of the CA: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(certDir, bootstrap.CertFileName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key file: %v, mode %v; want it readable by its owner only", err, fi.Mode().Perm())
	}

	// With the kubeconfig there, a restart asks for nothing.
	if err := bootstrap.LoadClientCert(ctx, kubeconfigPath, bootstrapPath, certDir, "node-7", nil); err != nil {
		t.Fatal(err)
	}
	l, err := csrs.List(ctx, "", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 {
		t.Errorf("%d requests, want the one of the first start", len(l.Items))
	}
}

func TestBootstrapStopsWhenDenied(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bootstrapPath := filepath.Join(dir, "bootstrap-kubeconfig")
	if err := os.WriteFile(bootstrapPath, []byte("clusters:\n- name: c\n  cluster: {server: \""+env.URL+"\"}\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	csrs := client.For[*certificatesv1.CertificateSigningRequest](rc)
	go func() {
		for ctx.Err() == nil {
			l, err := csrs.List(ctx, "", metav1.ListOptions{})
			if err == nil && len(l.Items) > 0 {
				r := l.Items[0]
				r.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{
					Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "NotYou", Message: "unknown node",
				}}
				_, _ = csrs.UpdateApproval(ctx, r)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	kubeconfigPath := filepath.Join(dir, "kubelet.conf")
	err = bootstrap.LoadClientCert(ctx, kubeconfigPath, bootstrapPath, filepath.Join(dir, "pki"), "node-8", nil)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("err %v, want the denial", err)
	}
	if _, statErr := os.Stat(kubeconfigPath); !os.IsNotExist(statErr) {
		t.Errorf("a kubeconfig was written after a denial: %v", statErr)
	}
	t.Log(err)
}
