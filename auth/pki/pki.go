// Package pki is the cluster's certificate authority and the keys kept
// beside it, as kubeadm lays them out under /etc/kubernetes/pki: a CA that
// signs the API server's serving certificate and every client
// certificate, and the key pair ServiceAccount tokens are signed with.
//
// minictl up keeps them in <data-dir>/pki, made on first start and reused
// after, keys with mode 0600:
//
//	ca.crt, ca.key              the cluster CA (kube's --client-ca-file, --cluster-signing-*, --root-ca-file)
//	apiserver.crt, .key         the API server's serving certificate, for localhost, the listen
//	                            addresses and the kubernetes Service's names and address
//	sa.key, sa.pub              the ServiceAccount signing key pair (--service-account-*-key-file)
//	admin.crt, admin.key        the admin's client certificate: minictl-admin in system:masters
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// CA is a certificate authority: its certificate and the key that signs.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	Key     crypto.Signer
}

// Lifetimes, as kubeadm's: the CA ten years, what it signs one.
const (
	CADuration   = 10 * 365 * 24 * time.Hour
	CertDuration = 365 * 24 * time.Hour
)

// NewCA makes a self-signed CA named commonName.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(CADuration),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, CertPEM: encodeCert(der), Key: key}, nil
}

// LoadCA reads a CA from a PEM certificate and a PEM private key.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	cert, err := ParseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	return &CA{Cert: cert, CertPEM: certPEM, Key: key}, nil
}

// Pool is a certificate pool holding the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// CertRequest says what certificate Issue makes: a client certificate
// (user CommonName in groups Organization) unless Serving, then one for
// DNSNames and IPs.
type CertRequest struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	Serving      bool
	Duration     time.Duration // 0: CertDuration
}

// Issue makes a new key and a certificate for it signed by the CA, both
// PEM-encoded.
func (ca *CA) Issue(r CertRequest) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	usage := x509.ExtKeyUsageClientAuth
	if r.Serving {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		Subject:  pkix.Name{CommonName: r.CommonName, Organization: r.Organization},
		DNSNames: r.DNSNames, IPAddresses: r.IPs,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := ca.sign(tmpl, key.Public(), r.Duration)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// SignRequest signs a parsed certificate signing request, after checking
// its signature: the subject and names it asks for, the key usages given,
// valid for duration (0: CertDuration) but never past the CA's own end.
func (ca *CA) SignRequest(csr *x509.CertificateRequest, keyUsage x509.KeyUsage, extUsages []x509.ExtKeyUsage, duration time.Duration) ([]byte, error) {
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("the request's signature does not verify: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:  csr.Subject,
		DNSNames: csr.DNSNames, IPAddresses: csr.IPAddresses, EmailAddresses: csr.EmailAddresses, URIs: csr.URIs,
		KeyUsage: keyUsage, ExtKeyUsage: extUsages,
	}
	der, err := ca.sign(tmpl, csr.PublicKey, duration)
	if err != nil {
		return nil, err
	}
	return encodeCert(der), nil
}

func (ca *CA) sign(tmpl *x509.Certificate, pub crypto.PublicKey, duration time.Duration) ([]byte, error) {
	if duration <= 0 {
		duration = CertDuration
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Minute) // a little slack for clocks
	tmpl.NotAfter = now.Add(duration)
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	tmpl.BasicConstraintsValid = true
	return x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
}

// serial is a random 128-bit serial number, as RFC 5280 asks.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n.Add(n, big.NewInt(1))
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// ParseCert reads the first CERTIFICATE block of PEM data.
func ParseCert(data []byte) (*x509.Certificate, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("no PEM CERTIFICATE found")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

// ParseKey reads a PEM private key: PKCS#8, EC or PKCS#1 RSA.
func ParseKey(data []byte) (crypto.Signer, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("no PEM private key found")
		}
		switch b.Type {
		case "EC PRIVATE KEY":
			return x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			return x509.ParsePKCS1PrivateKey(b.Bytes)
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				return nil, err
			}
			s, ok := k.(crypto.Signer)
			if !ok {
				return nil, fmt.Errorf("a %T cannot sign", k)
			}
			return s, nil
		}
	}
}

// ParsePublicKeys reads every public key in PEM data: PUBLIC KEY blocks,
// RSA PUBLIC KEY blocks and the keys of CERTIFICATE blocks, as kube reads
// --service-account-key-file.
func ParsePublicKeys(data []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		switch b.Type {
		case "PUBLIC KEY":
			k, err := x509.ParsePKIXPublicKey(b.Bytes)
			if err != nil {
				return nil, err
			}
			keys = append(keys, k)
		case "RSA PUBLIC KEY":
			k, err := x509.ParsePKCS1PublicKey(b.Bytes)
			if err != nil {
				return nil, err
			}
			keys = append(keys, k)
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, err
			}
			keys = append(keys, c.PublicKey)
		case "EC PRIVATE KEY", "RSA PRIVATE KEY", "PRIVATE KEY":
			k, err := ParseKey(pem.EncodeToMemory(b))
			if err != nil {
				return nil, err
			}
			keys = append(keys, k.Public())
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM public key found")
	}
	return keys, nil
}

// Cluster is what <data-dir>/pki holds, loaded.
type Cluster struct {
	Dir string
	CA  *CA
	// ServingCertFile and ServingKeyFile are the API server's.
	ServingCertFile, ServingKeyFile string
	// ServiceAccountKey signs ServiceAccount tokens; its public half
	// verifies them. ServiceAccountKeyFile and ServiceAccountPubFile are
	// where they are kept.
	ServiceAccountKey                            crypto.Signer
	ServiceAccountKeyFile, ServiceAccountPubFile string
	// AdminCertPEM and AdminKeyPEM are the admin's client credentials.
	AdminCertPEM, AdminKeyPEM []byte
}

// CAFile is the path of the CA's certificate.
func (c *Cluster) CAFile() string { return filepath.Join(c.Dir, "ca.crt") }

// CAKeyFile is the path of the CA's key.
func (c *Cluster) CAKeyFile() string { return filepath.Join(c.Dir, "ca.key") }

// LoadOrCreate loads the cluster's keys and certificates from dir, making
// whatever is missing. The serving certificate is made again when it does
// not name every one of dnsNames and ips (a new listen address) or is about
// to expire.
func LoadOrCreate(dir string, dnsNames []string, ips []net.IP) (*Cluster, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	c := &Cluster{
		Dir:             dir,
		ServingCertFile: filepath.Join(dir, "apiserver.crt"), ServingKeyFile: filepath.Join(dir, "apiserver.key"),
		ServiceAccountKeyFile: filepath.Join(dir, "sa.key"), ServiceAccountPubFile: filepath.Join(dir, "sa.pub"),
	}
	var err error
	if c.CA, err = loadOrCreateCA(c.CAFile(), c.CAKeyFile()); err != nil {
		return nil, err
	}
	if err := c.ensureServing(dnsNames, ips); err != nil {
		return nil, err
	}
	if c.ServiceAccountKey, err = loadOrCreateSAKey(c.ServiceAccountKeyFile, c.ServiceAccountPubFile); err != nil {
		return nil, err
	}
	adminCert, adminKey := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	c.AdminCertPEM, c.AdminKeyPEM, err = loadOrIssue(c.CA, adminCert, adminKey, CertRequest{
		CommonName: "minictl-admin", Organization: []string{"system:masters"},
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

func loadOrCreateCA(certFile, keyFile string) (*CA, error) {
	if ca, err := LoadCA(certFile, keyFile); err == nil {
		return ca, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ca, err := NewCA("minictl-ca")
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(ca.Key)
	if err != nil {
		return nil, err
	}
	if err := writeFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	return ca, writeFile(certFile, ca.CertPEM, 0o644)
}

// ensureServing keeps a serving certificate for every name and address.
func (c *Cluster) ensureServing(dnsNames []string, ips []net.IP) error {
	if b, err := os.ReadFile(c.ServingCertFile); err == nil {
		if cert, err := ParseCert(b); err == nil && covers(cert, dnsNames, ips) &&
			time.Until(cert.NotAfter) > 30*24*time.Hour && cert.CheckSignatureFrom(c.CA.Cert) == nil {
			if _, err := os.Stat(c.ServingKeyFile); err == nil {
				return nil
			}
		}
	}
	certPEM, keyPEM, err := c.CA.Issue(CertRequest{CommonName: "kube-apiserver", DNSNames: dnsNames, IPs: ips, Serving: true})
	if err != nil {
		return err
	}
	if err := writeFile(c.ServingKeyFile, keyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(c.ServingCertFile, certPEM, 0o644)
}

func covers(cert *x509.Certificate, dnsNames []string, ips []net.IP) bool {
	for _, n := range dnsNames {
		if !slices.Contains(cert.DNSNames, n) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

func loadOrCreateSAKey(keyFile, pubFile string) (crypto.Signer, error) {
	if b, err := os.ReadFile(keyFile); err == nil {
		return ParseKey(b)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	if err := writeFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	return key, writeFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
}

// loadOrIssue reads a client certificate and key, or issues and writes
// them when they are missing, not the CA's, or about to expire.
func loadOrIssue(ca *CA, certFile, keyFile string, r CertRequest) (certPEM, keyPEM []byte, err error) {
	certPEM, err1 := os.ReadFile(certFile)
	keyPEM, err2 := os.ReadFile(keyFile)
	if err1 == nil && err2 == nil {
		if cert, err := ParseCert(certPEM); err == nil && cert.CheckSignatureFrom(ca.Cert) == nil &&
			time.Until(cert.NotAfter) > 30*24*time.Hour && bytes.Contains(keyPEM, []byte("PRIVATE KEY")) {
			return certPEM, keyPEM, nil
		}
	}
	if certPEM, keyPEM, err = ca.Issue(r); err != nil {
		return nil, nil, err
	}
	if err := writeFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, writeFile(certFile, certPEM, 0o644)
}

func encodeKey(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// writeFile writes data to path with mode perm, through a temporary file
// renamed into place, so that a crash leaves the old file or the new one.
func writeFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename, nothing is there
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
