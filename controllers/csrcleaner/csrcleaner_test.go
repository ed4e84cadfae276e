package csrcleaner

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// The cleaner runs against a real API server on a real etcd, on a fake
// clock: the test writes conditions with the times it wants (the API
// server keeps a lastUpdateTime the writer gives), and moves the clock for
// what only creation time decides.

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func certPEM(t *testing.T, notAfter time.Time) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "x"}, NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestDeletesRequestsPastTheirAge(t *testing.T) {
	env := controllertest.Start(t)
	csrs := client.For[*certificatesv1.CertificateSigningRequest](env.Client)
	now := time.Now()
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

	// add creates a request, decides it with cond (if any) at its time
	// through /approval or /status, and gives it cert (if any).
	add := func(name string, cond *certificatesv1.CertificateSigningRequestCondition, cert []byte) {
		t.Helper()
		r, err := csrs.Create(testCtx(t), controllertest.CSR(t, name, "example.com/signer", name, nil, certificatesv1.UsageClientAuth))
		if err != nil {
			t.Fatal(err)
		}
		if cond == nil {
			return
		}
		r.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{*cond}
		if cond.Type == certificatesv1.CertificateFailed {
			r, err = csrs.UpdateStatus(testCtx(t), r)
		} else {
			r, err = csrs.UpdateApproval(testCtx(t), r)
		}
		if err != nil {
			t.Fatal(err)
		}
		if cert != nil {
			r.Status.Certificate = cert
			if _, err := csrs.UpdateStatus(testCtx(t), r); err != nil {
				t.Fatal(err)
			}
		}
	}
	cond := func(typ certificatesv1.RequestConditionType, at metav1.Time) *certificatesv1.CertificateSigningRequestCondition {
		return &certificatesv1.CertificateSigningRequestCondition{Type: typ, Status: corev1.ConditionTrue, LastUpdateTime: at}
	}
	valid := certPEM(t, now.Add(30*24*time.Hour))

	add("issued-old", cond(certificatesv1.CertificateApproved, ago(2*time.Hour)), valid)
	add("issued-recent", cond(certificatesv1.CertificateApproved, ago(10*time.Minute)), valid)
	add("issued-expired", cond(certificatesv1.CertificateApproved, ago(10*time.Minute)), certPEM(t, now.Add(-time.Minute)))
	add("approved-unsigned-old", cond(certificatesv1.CertificateApproved, ago(2*time.Hour)), nil)
	add("denied-old", cond(certificatesv1.CertificateDenied, ago(2*time.Hour)), nil)
	add("denied-recent", cond(certificatesv1.CertificateDenied, ago(10*time.Minute)), nil)
	add("failed-old", cond(certificatesv1.CertificateFailed, ago(2*time.Hour)), nil)
	add("pending", nil, nil)

	clk := clock.NewFake(now)
	c, err := New(Options{Common: controller.Common{Client: env.Client, Informers: env.Informers, Logger: controllertest.Logger(t), Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 1, c)

	names := func() []string {
		l, err := csrs.List(testCtx(t), "", metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range l.Items {
			out = append(out, r.Name)
		}
		slices.Sort(out)
		return out
	}
	// waitForPass waits until the cleaner, its pass done, sleeps until the
	// next one.
	waitForPass := func(next time.Time) {
		t.Helper()
		controllertest.Eventually(t, "the cleaner to wait for its next pass", func() (bool, string) {
			return slices.Contains(clk.Waiters(), next), "not yet"
		})
	}

	waitForPass(now.Add(PollingInterval))
	if got, want := names(), []string{"approved-unsigned-old", "denied-recent", "issued-recent", "pending"}; !slices.Equal(got, want) {
		t.Fatalf("after the first pass: %v, want %v", got, want)
	}

	// A day later, everything decided is past its hour, and the pending
	// request past its day; an approved request still waits for its
	// signer.
	clk.Step(PollingInterval)
	waitForPass(now.Add(2 * PollingInterval))
	clk.Step(PendingExpiration)
	waitForPass(now.Add(2*PollingInterval + PendingExpiration))
	if got, want := names(), []string{"approved-unsigned-old"}; !slices.Equal(got, want) {
		t.Fatalf("a day later: %v, want %v", got, want)
	}
}
