package apiserver

import (
	"context"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/auth/authorizer"
	"github.com/minictl/minictl/auth/user"
)

// The certificate plugins ask the server's authorizer about signers. Here
// the authorizer is a rule table (the RBAC mode that would hold such rules
// is not needed to check what is asked and what is answered).
func TestCertificatePluginsAskAboutSigners(t *testing.T) {
	// alice may approve for every example.com signer; bob may sign for
	// example.com/one only.
	var asked []authorizer.Attributes
	s := &Server{authorizer: authorizer.Func(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		asked = append(asked, a)
		if a.APIGroup != "certificates.k8s.io" || a.Resource != "signers" {
			return authorizer.NoOpinion, "", nil
		}
		switch {
		case a.User.Name == "alice" && a.Verb == "approve" && a.Name == "example.com/*",
			a.User.Name == "bob" && a.Verb == "sign" && a.Name == "example.com/one":
			return authorizer.Allow, "", nil
		}
		return authorizer.NoOpinion, "", nil
	})}
	as := func(name string) context.Context {
		return user.WithUser(context.Background(), &user.Info{Name: name})
	}
	csr := func(signer string, cert []byte) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "r"},
			Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: signer},
			Status:     certificatesv1.CertificateSigningRequestStatus{Certificate: cert},
		}
	}
	approval := func(signer string) *attributes {
		return &attributes{op: opUpdate, res: api.CertificateSigningRequests, name: "r", subresource: "approval", obj: csr(signer, nil), old: csr(signer, nil)}
	}
	signing := func(signer string, cert []byte) *attributes {
		return &attributes{op: opUpdate, res: api.CertificateSigningRequests, name: "r", subresource: "status", obj: csr(signer, cert), old: csr(signer, nil)}
	}

	if _, err := s.validateCertificateApproval(as("alice"), approval("example.com/two")); err != nil {
		t.Errorf("alice approving for example.com/two (by the domain's wildcard): %v", err)
	}
	if len(asked) != 2 || asked[0].Name != "example.com/two" || asked[1].Name != "example.com/*" || asked[0].Verb != "approve" {
		t.Errorf("asked %+v, want approve on signers example.com/two, then example.com/*", asked)
	}
	_, err := s.validateCertificateApproval(as("bob"), approval("example.com/one"))
	if want := `certificatesigningrequests.certificates.k8s.io "r" is forbidden: user not permitted to approve requests with signerName "example.com/one"`; err == nil || err.Error() != want {
		t.Errorf("bob approving: %v, want %s", err, want)
	}

	if _, err := s.validateCertificateSigning(as("bob"), signing("example.com/one", []byte("cert"))); err != nil {
		t.Errorf("bob signing for example.com/one: %v", err)
	}
	_, err = s.validateCertificateSigning(as("bob"), signing("example.com/two", []byte("cert")))
	if want := `certificatesigningrequests.certificates.k8s.io "r" is forbidden: user not permitted to sign requests with signerName "example.com/two"`; err == nil || err.Error() != want {
		t.Errorf("bob signing for example.com/two: %v, want %s", err, want)
	}
	// A status write that leaves the certificate alone needs no sign.
	if _, err := s.validateCertificateSigning(as("carol"), signing("example.com/two", nil)); err != nil {
		t.Errorf("carol writing a condition: %v", err)
	}
}
