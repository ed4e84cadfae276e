package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLoadOrCreateMakesOnceAndReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	c, err := LoadOrCreate(dir, []string{"localhost"}, ips)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.key", "apiserver.key", "sa.key", "admin.key"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	again, err := LoadOrCreate(dir, []string{"localhost"}, ips)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.CA.CertPEM, again.CA.CertPEM) || !bytes.Equal(c.AdminCertPEM, again.AdminCertPEM) {
		t.Error("a second start made a new CA or admin certificate")
	}
	serving, _ := os.ReadFile(c.ServingCertFile)
	// A new address needs a new serving certificate, from the same CA.
	moved, err := LoadOrCreate(dir, []string{"localhost"}, append(ips, net.ParseIP("127.0.0.2")))
	if err != nil {
		t.Fatal(err)
	}
	servingNow, _ := os.ReadFile(moved.ServingCertFile)
	if bytes.Equal(serving, servingNow) {
		t.Error("the serving certificate was not made again for a new address")
	}
	cert, err := ParseCert(servingNow)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: c.CA.Pool(), DNSName: "localhost"}); err != nil {
		t.Errorf("serving certificate does not verify for localhost: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: c.CA.Pool(), DNSName: "127.0.0.2"}); err != nil {
		t.Errorf("serving certificate does not verify for 127.0.0.2: %v", err)
	}
	admin, err := ParseCert(c.AdminCertPEM)
	if err != nil {
		t.Fatal(err)
	}
	if admin.Subject.CommonName != "minictl-admin" || len(admin.Subject.Organization) != 1 || admin.Subject.Organization[0] != "system:masters" {
		t.Errorf("admin subject %v", admin.Subject)
	}
	if _, err := admin.Verify(x509.VerifyOptions{Roots: c.CA.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("admin certificate is not a client certificate of the CA: %v", err)
	}
}

func TestSignRequest(t *testing.T) {
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:node-1", Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr, _ := x509.ParseCertificateRequest(der)
	certPEM, err := ca.SignRequest(csr, x509.KeyUsageDigitalSignature, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ParseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:node-1" || time.Until(cert.NotAfter) > time.Hour {
		t.Errorf("signed %v until %v", cert.Subject, cert.NotAfter)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Error(err)
	}
	csr.Signature[len(csr.Signature)-1] ^= 0xff
	if _, err := ca.SignRequest(csr, x509.KeyUsageDigitalSignature, nil, 0); err == nil {
		t.Error("a request whose signature does not verify was signed")
	}
}
