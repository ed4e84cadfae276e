package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/auth/pki"
	"github.com/minictl/minictl/client"
)

// installWebhooks prepares the test's webhook server (its address and a
// serving certificate from the cluster's CA) and creates the webhook
// configurations, each webhook pointed at that server.
func (e *Env) installWebhooks(ctx context.Context, rc *client.RESTClient) {
	e.t.Helper()
	if e.cfg.webhooks == nil {
		return
	}
	w := *e.cfg.webhooks
	if w.LocalServingHost == "" {
		w.LocalServingHost = "127.0.0.1"
	}
	if w.LocalServingPort == 0 {
		port, err := freePort(w.LocalServingHost)
		if err != nil {
			e.t.Fatalf("testenv: a port for the webhook server on %s: %v", w.LocalServingHost, err)
		}
		w.LocalServingPort = port
	}
	if w.LocalServingCertDir == "" {
		w.LocalServingCertDir = filepath.Join(e.DataDir, "webhook")
	}
	if err := e.webhookCert(w.LocalServingHost, w.LocalServingCertDir); err != nil {
		e.t.Fatalf("testenv: webhook serving certificate: %v", err)
	}
	w.LocalServingCAData = e.CAData
	base := "https://" + net.JoinHostPort(w.LocalServingHost, strconv.Itoa(w.LocalServingPort))

	// The configurations as created go back to the caller in
	// Env.WebhookInstallOptions, in slices of their own.
	w.MutatingWebhooks = slices.Clone(w.MutatingWebhooks)
	w.ValidatingWebhooks = slices.Clone(w.ValidatingWebhooks)
	mutating := client.For[*admissionregistrationv1.MutatingWebhookConfiguration](rc)
	for i, c := range w.MutatingWebhooks {
		c = c.DeepCopy()
		for j := range c.Webhooks {
			pointAt(&c.Webhooks[j].ClientConfig, base, e.CAData)
		}
		created, err := mutating.Create(ctx, c)
		if err != nil {
			e.t.Fatalf("testenv: install MutatingWebhookConfiguration %q: %v", c.Name, err)
		}
		w.MutatingWebhooks[i] = created
	}
	validating := client.For[*admissionregistrationv1.ValidatingWebhookConfiguration](rc)
	for i, c := range w.ValidatingWebhooks {
		c = c.DeepCopy()
		for j := range c.Webhooks {
			pointAt(&c.Webhooks[j].ClientConfig, base, e.CAData)
		}
		created, err := validating.Create(ctx, c)
		if err != nil {
			e.t.Fatalf("testenv: install ValidatingWebhookConfiguration %q: %v", c.Name, err)
		}
		w.ValidatingWebhooks[i] = created
	}
	e.WebhookInstallOptions = w
	// The API server finds webhooks in its watch caches: a list not
	// older than the last configuration made returns once the caches
	// have it, so that the test's first request is already judged.
	if n := len(w.MutatingWebhooks); n > 0 {
		e.waitCached(ctx, "MutatingWebhookConfigurations", func(o metav1.ListOptions) error {
			_, err := mutating.List(ctx, "", o)
			return err
		}, w.MutatingWebhooks[n-1].ResourceVersion)
	}
	if n := len(w.ValidatingWebhooks); n > 0 {
		e.waitCached(ctx, "ValidatingWebhookConfigurations", func(o metav1.ListOptions) error {
			_, err := validating.List(ctx, "", o)
			return err
		}, w.ValidatingWebhooks[n-1].ResourceVersion)
	}
}

func (e *Env) waitCached(ctx context.Context, what string, list func(metav1.ListOptions) error, rv string) {
	e.t.Helper()
	if err := list(metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}); err != nil {
		e.t.Fatalf("testenv: list %s at resourceVersion %s: %v", what, rv, err)
	}
}

// pointAt makes a webhook call base at its service's path (or at its own
// URL's, kept as given), trusting ca, as envtest does with a webhook
// configuration meant for an in-cluster Service.
func pointAt(cc *admissionregistrationv1.WebhookClientConfig, base string, ca []byte) {
	if cc.Service != nil {
		path := ""
		if cc.Service.Path != nil {
			path = *cc.Service.Path
		}
		u := base + path
		cc.URL, cc.Service = &u, nil
	}
	if len(cc.CABundle) == 0 {
		cc.CABundle = ca
	}
}

// webhookCert writes tls.crt and tls.key for host into dir, signed by the
// cluster's CA.
func (e *Env) webhookCert(host, dir string) error {
	req := pki.CertRequest{CommonName: "testenv-webhook", Serving: true, DNSNames: []string{"localhost"}}
	if ip := net.ParseIP(host); ip != nil {
		req.IPs = []net.IP{ip}
	} else {
		req.DNSNames = append(req.DNSNames, host)
	}
	certPEM, keyPEM, err := e.id.ca.Issue(req)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600)
}

// freePort is a port nobody listens on at host now. The test's server
// listens there later: another process may take it in between, a race
// envtest has too and that a test lost would report as a taken port.
func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// String is where the webhook server listens, host:port.
func (w WebhookInstallOptions) String() string {
	return fmt.Sprintf("%s:%d", w.LocalServingHost, w.LocalServingPort)
}
