// Package csr is what the certificate controllers read of a
// CertificateSigningRequest: its state by its conditions, as kube's
// certificates helpers read them.
package csr

import (
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
