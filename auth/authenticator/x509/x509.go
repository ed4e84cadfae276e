// Package x509 authenticates requests by their TLS client certificate, as
// kube-apiserver's --client-ca-file: a certificate that chains to one of
// the client CAs and may be used for client authentication is the user
// named by its Common Name, in the groups named by its Organizations.
package x509

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/minictl/minictl/auth/authenticator"
	"github.com/minictl/minictl/auth/user"
)

// CredentialIDKey is the extra under which kube records which credential
// authenticated a request; a certificate's is X509SHA256= and its hash.
const CredentialIDKey = "authentication.kubernetes.io/credential-id"

// New authenticates client certificates that chain to roots. now is the
// time a certificate must be valid at (nil: time.Now).
func New(roots *x509.CertPool, now func() time.Time) authenticator.Request {
	if now == nil {
		now = time.Now
	}
	return authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			return nil, false, nil
		}
		certs := r.TLS.PeerCertificates
		opts := x509.VerifyOptions{
			Roots:         roots,
			Intermediates: x509.NewCertPool(),
			CurrentTime:   now(),
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		for _, c := range certs[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := certs[0].Verify(opts); err != nil {
			return nil, false, fmt.Errorf("verifying certificate %s failed: %w", describe(certs[0]), err)
		}
		leaf := certs[0]
		if leaf.Subject.CommonName == "" {
			return nil, false, nil
		}
		sum := sha256.Sum256(leaf.Raw)
		u := &user.Info{
			Name:   leaf.Subject.CommonName,
			Groups: append([]string(nil), leaf.Subject.Organization...),
			Extra:  map[string][]string{CredentialIDKey: {"X509SHA256=" + hex.EncodeToString(sum[:])}},
		}
		return &authenticator.Response{User: u}, true, nil
	})
}

// describe names a certificate in an error as kube does: its subject,
// issuer and serial, never its key.
func describe(c *x509.Certificate) string {
	return fmt.Sprintf("SN=%s, CN=%s, O=%v, issuer=%q", c.SerialNumber, c.Subject.CommonName, c.Subject.Organization, c.Issuer.String())
}
