package api

import (
	certificatesv1 "k8s.io/api/certificates/v1"
)

// prepareCSRForCreate: a request is created without status; its
// conditions come through /approval and its certificate through /status.
func prepareCSRForCreate(csr *certificatesv1.CertificateSigningRequest) {
	csr.Status = certificatesv1.CertificateSigningRequestStatus{}
}

// prepareCSRForUpdate: an update of the request itself keeps its status.
func prepareCSRForUpdate(csr, old *certificatesv1.CertificateSigningRequest) {
	csr.Status = old.Status
}
