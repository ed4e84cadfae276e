package csrsigning

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/auth/pki"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/controllers/internal/csr"
)

// These tests run the signer against a real API server on a real etcd;
// the test is the approver, through the approval subresource.

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type fixture struct {
	t    *testing.T
	ca   *pki.CA
	csrs *client.Client[*certificatesv1.CertificateSigningRequest]
}

func start(t *testing.T, duration time.Duration) *fixture {
	env := controllertest.Start(t)
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Common: controller.Common{Client: env.Client, Informers: env.Informers, Logger: controllertest.Logger(t)}, CA: ca, Duration: duration})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 2, c)
	return &fixture{t: t, ca: ca, csrs: client.For[*certificatesv1.CertificateSigningRequest](env.Client)}
}

// createApproved creates r and approves it.
func (f *fixture) createApproved(r *certificatesv1.CertificateSigningRequest) {
	f.t.Helper()
	created, err := f.csrs.Create(testCtx(f.t), r)
	if err != nil {
		f.t.Fatal(err)
	}
	created.Status.Conditions = append(created.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "TestApproved",
	})
	if _, err := f.csrs.UpdateApproval(testCtx(f.t), created); err != nil {
		f.t.Fatal(err)
	}
}

// settled waits until the request named name is issued or failed.
func (f *fixture) settled(name string) *certificatesv1.CertificateSigningRequest {
	f.t.Helper()
	var got *certificatesv1.CertificateSigningRequest
	controllertest.Eventually(f.t, name+" issued or failed", func() (bool, string) {
		r, err := f.csrs.Get(testCtx(f.t), "", name)
		if err != nil {
			return false, err.Error()
		}
		got = r
		return len(r.Status.Certificate) > 0 || csr.HasTrue(r, certificatesv1.CertificateFailed), "conditions " + fmtConds(r)
	})
	return got
}

func fmtConds(r *certificatesv1.CertificateSigningRequest) string {
	var s []string
	for _, c := range r.Status.Conditions {
		s = append(s, string(c.Type)+"="+string(c.Status))
	}
	return strings.Join(s, ",")
}

func (f *fixture) certOf(r *certificatesv1.CertificateSigningRequest) *x509.Certificate {
	f.t.Helper()
	block, _ := pem.Decode(r.Status.Certificate)
	if block == nil {
		f.t.Fatalf("%s: no PEM certificate", r.Name)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: f.ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		f.t.Errorf("%s: the certificate does not verify against the CA: %v", r.Name, err)
	}
	return cert
}

func TestSignsApprovedRequestsForTheKubernetesSigners(t *testing.T) {
	f := start(t, 0)
	hour := int32(3600)
	kubelet := controllertest.CSR(t, "node-1", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:node-1", []string{"system:nodes"},
		certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)
	kubelet.Spec.ExpirationSeconds = &hour
	f.createApproved(kubelet)
	alice := controllertest.CSR(t, "alice", certificatesv1.KubeAPIServerClientSignerName, "alice", []string{"devs"},
		certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth)
	f.createApproved(alice)

	got := f.settled("node-1")
	cert := f.certOf(got)
	if cert.Subject.CommonName != "system:node:node-1" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:nodes" {
		t.Errorf("subject %v, want the request's", cert.Subject)
	}
	if len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth || cert.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("usages %v %v, want digital signature and client auth", cert.KeyUsage, cert.ExtKeyUsage)
	}
	// The certificate is backdated a minute for clocks that lag, so it is
	// valid an hour from its signing: the requested duration.
	if d := cert.NotAfter.Sub(cert.NotBefore); d != time.Hour+time.Minute {
		t.Errorf("valid for %v, want the hour asked for (plus the minute of backdating)", d)
	}

	cert = f.certOf(f.settled("alice"))
	if d := cert.NotAfter.Sub(cert.NotBefore); d != DefaultDuration+time.Minute {
		t.Errorf("valid for %v, want --cluster-signing-duration's %v", d, DefaultDuration)
	}
}

func TestRequestedDurationIsCappedBySigningDuration(t *testing.T) {
	f := start(t, 2*time.Hour)
	day := int32(86400)
	r := controllertest.CSR(t, "long", certificatesv1.KubeAPIServerClientSignerName, "bob", nil, certificatesv1.UsageClientAuth)
	r.Spec.ExpirationSeconds = &day
	f.createApproved(r)
	cert := f.certOf(f.settled("long"))
	if d := cert.NotAfter.Sub(cert.NotBefore); d != 2*time.Hour+time.Minute {
		t.Errorf("valid for %v, want the signing duration 2h", d)
	}
}

func TestRefusesWhatTheSignerDoesNotAllow(t *testing.T) {
	f := start(t, 0)
	cases := []struct {
		r    *certificatesv1.CertificateSigningRequest
		want string
	}{
		{controllertest.CSR(t, "server-usage", certificatesv1.KubeAPIServerClientSignerName, "carol", nil,
			certificatesv1.UsageClientAuth, certificatesv1.UsageServerAuth), "invalid usage for client certificate: server auth"},
		{controllertest.CSR(t, "no-client-auth", certificatesv1.KubeAPIServerClientSignerName, "carol", nil,
			certificatesv1.UsageDigitalSignature), "missing required usage for client certificate: client auth"},
		{controllertest.CSR(t, "not-a-node", certificatesv1.KubeAPIServerClientKubeletSignerName, "carol", []string{"system:nodes"},
			certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth), "subject common name does not begin with system:node:"},
		{controllertest.CSR(t, "wrong-group", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:n", []string{"devs"},
			certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth), "subject organization is not system:nodes"},
		{controllertest.CSR(t, "kubelet-usages", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:n", []string{"system:nodes"},
			certificatesv1.UsageClientAuth), "usages did not match [client auth digital signature key encipherment]"},
		{controllertest.CSR(t, "serving-no-names", certificatesv1.KubeletServingSignerName, "system:node:n", []string{"system:nodes"},
			certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth), "DNS or IP subjectAltName is required"},
	}
	for _, tc := range cases {
		f.createApproved(tc.r)
	}
	for _, tc := range cases {
		got := f.settled(tc.r.Name)
		if len(got.Status.Certificate) > 0 {
			t.Errorf("%s: signed, want Failed: %s", tc.r.Name, tc.want)
			continue
		}
		c, _ := csr.Condition(got, certificatesv1.CertificateFailed)
		if c.Reason != "SignerValidationFailure" || c.Message != tc.want {
			t.Errorf("%s: Failed %q %q, want SignerValidationFailure %q", tc.r.Name, c.Reason, c.Message, tc.want)
		}
	}
}

func TestValidity(t *testing.T) {
	s := func(n int32) *int32 { return &n }
	for _, tc := range []struct {
		ttl  time.Duration
		exp  *int32
		want time.Duration
	}{
		{time.Hour, nil, time.Hour},
		{time.Hour, s(1800), 30 * time.Minute},
		{time.Hour, s(7200), time.Hour},
		{time.Hour, s(60), 10 * time.Minute},
	} {
		if got := validity(tc.ttl, tc.exp); got != tc.want {
			t.Errorf("validity(%v, %v) = %v, want %v", tc.ttl, tc.exp, got, tc.want)
		}
	}
}
