// Package bootstrap is the kubelet's TLS bootstrap: a node that has only
// a bootstrap kubeconfig (a bootstrap token, good for nothing but asking
// for a certificate) asks the cluster for a client certificate of its own
// through a CertificateSigningRequest, and writes the kubeconfig it runs
// with from then on, as kubelet --bootstrap-kubeconfig does.
//
// LoadClientCert does nothing when the kubeconfig exists already. Else it
// makes an ECDSA P-256 key, asks, with the bootstrap credentials, for a
// certificate for system:node:<name> in system:nodes from the
// kubernetes.io/kube-apiserver-client-kubelet signer (usages digital
// signature and client auth), waits until the request is issued (an
// approver, such as the csrapproving controller, approves it; the
// csrsigning controller signs it), refused (Denied) or failed (Failed),
// then writes the key and the certificate to
// <cert-dir>/kubelet-client-current.pem and a kubeconfig that uses them,
// with the bootstrap kubeconfig's server and CA.
package bootstrap

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
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
)

// CertFileName is the file under --cert-dir holding the client key and
// certificate, kube's name for the current one.
const CertFileName = "kubelet-client-current.pem"

// pollInterval is how often the request is looked at while it waits.
const pollInterval = 500 * time.Millisecond

// LoadClientCert makes sure kubeconfigPath exists, bootstrapping it with
// the credentials of bootstrapPath if it does not (see the package
// comment). It returns when the kubeconfig is there, or ctx ends, or the
// request is refused.
func LoadClientCert(ctx context.Context, kubeconfigPath, bootstrapPath, certDir, nodeName string, log *slog.Logger) error {
	if _, err := os.Stat(kubeconfigPath); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bcfg, err := client.LoadKubeconfig(bootstrapPath, "")
	if err != nil {
		return fmt.Errorf("bootstrap kubeconfig: %w", err)
	}
	rc, err := client.New(bcfg)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	req, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		return err
	}
	csrs := client.For[*certificatesv1.CertificateSigningRequest](rc)
	name := csrName(req)
	_, err = csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: req}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	})
	if err != nil {
		return fmt.Errorf("create the certificate signing request: %w", err)
	}
	log.Info("waiting for the client certificate", "csr", name, "node", nodeName)
	cert, err := waitForCertificate(ctx, csrs, name)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	certPath := filepath.Join(certDir, CertFileName)
	pemData := append(append([]byte{}, cert...), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	if err := writeFile(certPath, pemData); err != nil {
		return err
	}
	abs, err := filepath.Abs(certPath)
	if err != nil {
		return err
	}
	ca := bcfg.CAData
	if len(ca) == 0 && bcfg.CAFile != "" {
		if ca, err = os.ReadFile(bcfg.CAFile); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(kubeconfigPath), 0o700); err != nil {
		return err
	}
	if err := writeFile(kubeconfigPath, []byte(kubeconfig(bcfg.Server, ca, abs))); err != nil {
		return err
	}
	log.Info("client certificate issued; kubeconfig written", "csr", name, "kubeconfig", kubeconfigPath)
	return nil
}

// csrName is the request's name, the same for the same key and subject,
// so that a kubelet restarted while it waits asks under one name.
func csrName(der []byte) string {
	sum := sha256.Sum256(der)
	return "node-csr-" + hex.EncodeToString(sum[:16])
}

// waitForCertificate polls the request until it is issued, denied or
// failed, or ctx ends.
func waitForCertificate(ctx context.Context, csrs *client.Client[*certificatesv1.CertificateSigningRequest], name string) ([]byte, error) {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		r, err := csrs.Get(ctx, "", name)
		if err == nil {
			for _, c := range r.Status.Conditions {
				switch c.Type {
				case certificatesv1.CertificateDenied:
					return nil, fmt.Errorf("certificate signing request %s is denied, reason: %s, message: %s", name, c.Reason, c.Message)
				case certificatesv1.CertificateFailed:
					return nil, fmt.Errorf("certificate signing request %s failed, reason: %s, message: %s", name, c.Reason, c.Message)
				}
			}
			if len(r.Status.Certificate) > 0 {
				return r.Status.Certificate, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("timed out waiting for the certificate of %s: %w", name, ctx.Err())
		case <-t.C:
		}
	}
}

// kubeconfig is the kubelet's: server and CA from the bootstrap
// kubeconfig, the user its client certificate.
func kubeconfig(server string, caPEM []byte, certPath string) string {
	ca := ""
	if len(caPEM) > 0 {
		ca = "\n    certificate-authority-data: " + base64.StdEncoding.EncodeToString(caPEM)
	}
	return strings.NewReplacer("SERVER", server, "CAKEY", ca, "CERT", certPath).Replace(`apiVersion: v1
kind: Config
clusters:
- name: default-cluster
  cluster:
    server: SERVERCAKEY
users:
- name: default-auth
  user:
    client-certificate: CERT
    client-key: CERT
contexts:
- name: default-context
  context:
    cluster: default-cluster
    user: default-auth
    namespace: default
current-context: default-context
`)
}

// writeFile writes data to path atomically, readable by its owner only.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
