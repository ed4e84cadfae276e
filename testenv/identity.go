package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/minictl/minictl/auth/pki"
)

// identity is an Env's certificate authority and the keys made from it.
// Every key is ECDSA P-256, which takes microseconds to make, where an
// RSA key takes tens of milliseconds: the whole set costs Start almost
// nothing.
type identity struct {
	ca *pki.CA
	// serving is the secure port's TLS configuration.
	serving *tls.Config
	// saKey signs ServiceAccount tokens (ES256, which kube-apiserver
	// issues too); saKeyFile, caFile and caKeyFile are where the
	// controller manager reads it and the CA from.
	saKey                        *ecdsa.PrivateKey
	saKeyFile, caFile, caKeyFile string
	// adminCert and adminKey are the admin's client credentials
	// (system:masters), PEM.
	adminCert, adminKey []byte
}

// newIdentity makes the cluster's keys and writes the files the
// controller manager reads into dir.
func newIdentity(dir string) (*identity, error) {
	ca, err := pki.NewCA("minictl-testenv-ca")
	if err != nil {
		return nil, err
	}
	id := &identity{ca: ca}
	certPEM, keyPEM, err := ca.Issue(pki.CertRequest{
		CommonName: "kube-apiserver", Serving: true,
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPs:      []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	})
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	id.serving = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if id.adminCert, id.adminKey, err = ca.Issue(pki.CertRequest{CommonName: "minictl-admin", Organization: []string{"system:masters"}}); err != nil {
		return nil, err
	}
	if id.saKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := encodeKey(ca.Key)
	if err != nil {
		return nil, err
	}
	saKey, err := encodeKey(id.saKey)
	if err != nil {
		return nil, err
	}
	id.caFile, id.caKeyFile, id.saKeyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"), filepath.Join(dir, "sa.key")
	for path, data := range map[string][]byte{id.caFile: ca.CertPEM, id.caKeyFile: caKey, id.saKeyFile: saKey} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return id, nil
}

func encodeKey(key any) ([]byte, error) {
	k, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("unexpected key type %T", key)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// User is a user of an Env's secure port: a client certificate of the
// cluster's CA, for Name in Groups (CN and O), as kubeadm makes them.
type User struct {
	Name   string
	Groups []string
	// CertData and KeyData are the client certificate and its key, PEM.
	CertData, KeyData []byte
	// Kubeconfig is a kubeconfig for the user on the secure port, with
	// the CA and the credentials inline.
	Kubeconfig []byte
}

// AddUser returns credentials for another user of the secure port, in
// groups: what that user may do is what RBAC says (nothing until a test
// binds it a role; system:masters may do everything).
func (e *Env) AddUser(name string, groups ...string) *User {
	e.t.Helper()
	certPEM, keyPEM, err := e.id.ca.Issue(pki.CertRequest{CommonName: name, Organization: groups})
	if err != nil {
		e.t.Fatalf("testenv: credentials for user %q: %v", name, err)
	}
	return &User{
		Name: name, Groups: groups, CertData: certPEM, KeyData: keyPEM,
		Kubeconfig: kubeconfig(e.URL, e.CAData, certPEM, keyPEM, name),
	}
}

// kubeconfig is a kubeconfig with one cluster, one user and one context,
// every credential inline, so that it can be handed around as bytes.
func kubeconfig(server string, ca, cert, key []byte, user string) []byte {
	b64 := base64.StdEncoding.EncodeToString
	r := strings.NewReplacer("$SERVER", server, "$CA", b64(ca), "$CERT", b64(cert), "$KEY", b64(key), "$USER", yamlString(user))
	return []byte(r.Replace(`apiVersion: v1
kind: Config
clusters:
- name: testenv
  cluster:
    server: $SERVER
    certificate-authority-data: $CA
users:
- name: $USER
  user:
    client-certificate-data: $CERT
    client-key-data: $KEY
contexts:
- name: testenv
  context:
    cluster: testenv
    user: $USER
current-context: testenv
`))
}

// yamlString quotes s as a YAML double-quoted scalar (a JSON string is
// one), so that a user name like "system:node:a" stays one string.
func yamlString(s string) string { return fmt.Sprintf("%q", s) }
