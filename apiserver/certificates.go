package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/auth/authorizer"
	"github.com/minictl/minictl/auth/user"
)

// A CertificateSigningRequest's three writers (see api/certificates.go)
// are told apart here: the requester is recorded on create, the approval
// subresource is served, and kube-apiserver's certificate admission
// plugins check that an approver may approve for the request's signer,
// that a signer may sign for it, and that nobody asks the client signer
// for a certificate in system:masters.

// setRequester records who asks for a CertificateSigningRequest being
// created; other kinds are left alone.
func setRequester(ctx context.Context, obj api.Object) {
	if _, ok := obj.(*certificatesv1.CertificateSigningRequest); !ok {
		return
	}
	if u, ok := user.From(ctx); ok {
		api.SetCSRRequester(obj, u.Name, u.UID, u.Groups, u.Extra)
	}
}

// serveApproval answers the approval subresource: reads return the whole
// request; writes change its Approved and Denied conditions, and nothing
// else (api.PrepareCSRForApprovalUpdate, in updateObject).
func (s *Server) serveApproval(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	if ri.res != api.CertificateSigningRequests {
		return apierrors.NewNotFound(ri.res.GroupResource(), ri.name)
	}
	return s.servePart(w, r, ri, "approval", modeApproval)
}

// validateCertificateApproval is kube-apiserver's CertificateApproval
// plugin: a write to /approval needs the approve verb on the request's
// signer.
func (s *Server) validateCertificateApproval(ctx context.Context, a *attributes) (func(), error) {
	if a.res != api.CertificateSigningRequests || a.op != opUpdate || a.subresource != "approval" {
		return nil, nil
	}
	csr := a.obj.(*certificatesv1.CertificateSigningRequest)
	if !s.allowedForSigner(ctx, "approve", csr.Spec.SignerName) {
		return nil, apierrors.NewForbidden(a.res.GroupResource(), a.name, fmt.Errorf("user not permitted to approve requests with signerName %q", csr.Spec.SignerName))
	}
	return nil, nil
}

// validateCertificateSigning is kube-apiserver's CertificateSigning
// plugin: a write to /status that changes the certificate needs the sign
// verb on the request's signer.
func (s *Server) validateCertificateSigning(ctx context.Context, a *attributes) (func(), error) {
	if a.res != api.CertificateSigningRequests || a.op != opUpdate || a.subresource != "status" {
		return nil, nil
	}
	csr, old := a.obj.(*certificatesv1.CertificateSigningRequest), a.old.(*certificatesv1.CertificateSigningRequest)
	if bytes.Equal(csr.Status.Certificate, old.Status.Certificate) {
		return nil, nil
	}
	if !s.allowedForSigner(ctx, "sign", old.Spec.SignerName) {
		return nil, apierrors.NewForbidden(a.res.GroupResource(), a.name, fmt.Errorf("user not permitted to sign requests with signerName %q", old.Spec.SignerName))
	}
	return nil, nil
}

// validateCertificateSubjectRestriction is kube-apiserver's
// CertificateSubjectRestriction plugin: the client signer does not issue
// certificates in system:masters, which would be allowed everything.
func (s *Server) validateCertificateSubjectRestriction(_ context.Context, a *attributes) (func(), error) {
	if a.res != api.CertificateSigningRequests || a.op != opCreate {
		return nil, nil
	}
	csr := a.obj.(*certificatesv1.CertificateSigningRequest)
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName {
		return nil, nil
	}
	req, err := api.ParseCSR(csr.Spec.Request)
	if err != nil {
		return nil, apierrors.NewForbidden(a.res.GroupResource(), a.name, fmt.Errorf("failed to parse CSR: %v", err))
	}
	for _, o := range req.Subject.Organization {
		if o == user.SystemPrivilegedGroup {
			return nil, apierrors.NewForbidden(a.res.GroupResource(), a.name,
				fmt.Errorf("use of %s signer with %s group is not allowed", certificatesv1.KubeAPIServerClientSignerName, user.SystemPrivilegedGroup))
		}
	}
	return nil, nil
}

// allowedForSigner asks the authorizer whether the request's user may
// verb the signer: by its name, or by its domain's wildcard
// (example.com/*), as kube-apiserver does.
func (s *Server) allowedForSigner(ctx context.Context, verb, signerName string) bool {
	u, _ := user.From(ctx)
	if u == nil || s.authorizer == nil {
		return false
	}
	names := []string{signerName}
	if domain, _, ok := strings.Cut(signerName, "/"); ok {
		names = append(names, domain+"/*")
	}
	for _, name := range names {
		d, _, _ := s.authorizer.Authorize(ctx, authorizer.Attributes{
			User: u, Verb: verb, ResourceRequest: true,
			APIGroup: certificatesv1.GroupName, APIVersion: "*", Resource: "signers", Name: name,
		})
		if d == authorizer.Allow {
			return true
		}
	}
	return false
}
