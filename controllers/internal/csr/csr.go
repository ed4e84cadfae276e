// Package csr is what the certificate controllers read of a
// CertificateSigningRequest: its state by its conditions, as kube's
// certificates helpers read them.
package csr

import (
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// Condition returns the condition of type t, if the request has one.
func Condition(r *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) (certificatesv1.CertificateSigningRequestCondition, bool) {
	for _, c := range r.Status.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return certificatesv1.CertificateSigningRequestCondition{}, false
}

// HasTrue reports whether the request has a condition of type t with
// status True.
func HasTrue(r *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	c, ok := Condition(r, t)
	return ok && c.Status == corev1.ConditionTrue
}

// Approved reports whether the request is approved and not denied.
func Approved(r *certificatesv1.CertificateSigningRequest) bool {
	return HasTrue(r, certificatesv1.CertificateApproved) && !HasTrue(r, certificatesv1.CertificateDenied)
}

// Decided reports whether an approver has said yes or no already.
func Decided(r *certificatesv1.CertificateSigningRequest) bool {
	_, approved := Condition(r, certificatesv1.CertificateApproved)
	_, denied := Condition(r, certificatesv1.CertificateDenied)
	return approved || denied
}

// The reasons a kubelet's request is refused, in kube's words.
var (
	ErrOrganizationNotSystemNodes = errors.New("subject organization is not system:nodes")
	ErrCommonNameNotSystemNode    = errors.New("subject common name does not begin with system:node:")
	ErrDNSSANNotAllowed           = errors.New("DNS subjectAltNames are not allowed")
	ErrEmailSANNotAllowed         = errors.New("Email subjectAltNames are not allowed")
	ErrIPSANNotAllowed            = errors.New("IP subjectAltNames are not allowed")
	ErrURISANNotAllowed           = errors.New("URI subjectAltNames are not allowed")
)

// ValidateKubeletClient is kube's rule for a kubelet's client certificate:
// organization exactly system:nodes, a common name system:node:<name>, no
// subject alternative names, the usages digital signature and client auth
// (and key encipherment, for an RSA key).
func ValidateKubeletClient(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	switch {
	case !slices.Equal(req.Subject.Organization, []string{"system:nodes"}):
		return ErrOrganizationNotSystemNodes
	case len(req.DNSNames) > 0:
		return ErrDNSSANNotAllowed
	case len(req.EmailAddresses) > 0:
		return ErrEmailSANNotAllowed
	case len(req.IPAddresses) > 0:
		return ErrIPSANNotAllowed
	case len(req.URIs) > 0:
		return ErrURISANNotAllowed
	case !strings.HasPrefix(req.Subject.CommonName, "system:node:"):
		return ErrCommonNameNotSystemNode
	}
	return UsagesAre(usages, certificatesv1.UsageClientAuth)
}

// UsagesAre accepts exactly digital signature and auth, with key
// encipherment or without it (an RSA key needs it, an ECDSA key does not).
func UsagesAre(usages []certificatesv1.KeyUsage, auth certificatesv1.KeyUsage) error {
	set := map[certificatesv1.KeyUsage]bool{}
	for _, u := range usages {
		set[u] = true
	}
	want := []string{string(auth), string(certificatesv1.UsageDigitalSignature), string(certificatesv1.UsageKeyEncipherment)}
	slices.Sort(want)
	ok := set[auth] && set[certificatesv1.UsageDigitalSignature] &&
		(len(set) == 2 || (len(set) == 3 && set[certificatesv1.UsageKeyEncipherment]))
	if !ok {
		return fmt.Errorf("usages did not match %v", want)
	}
	return nil
}
