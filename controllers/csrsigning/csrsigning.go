// Package csrsigning is kube-controller-manager's csrsigning controller:
// it signs approved CertificateSigningRequests addressed to the signers
// Kubernetes defines, with the cluster's CA.
//
// For each request, sync reads it from the cache and does nothing unless
// it is approved, not failed, not issued yet, and addressed to one of:
//
//   - kubernetes.io/kube-apiserver-client: any client certificate; the
//     usages may be digital signature and key encipherment, and must
//     include client auth;
//   - kubernetes.io/kube-apiserver-client-kubelet: a kubelet's client
//     certificate: organization exactly system:nodes, a common name
//     system:node:<name>, no subject alternative names, and the usages
//     digital signature and client auth (key encipherment too for RSA);
//   - kubernetes.io/kubelet-serving: a kubelet's serving certificate:
//     organization system:nodes, common name system:node:<name>, DNS or
//     IP names and no others, the usages digital signature and server
//     auth (key encipherment too for RSA).
//
// A request its signer's rules refuse gets a Failed condition (reason
// SignerValidationFailure) and no certificate. One they accept gets a
// certificate valid for --cluster-signing-duration, or for the request's
// spec.expirationSeconds when that is shorter (but never less than ten
// minutes), written through the status subresource. Requests for other
// signers are someone else's.
package csrsigning

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/auth/pki"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/csr"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's kube-controller-manager name.
const Name = "csrsigning"

// DefaultDuration is kube-controller-manager's --cluster-signing-duration.
const DefaultDuration = 365 * 24 * time.Hour

// Options is what the controller needs: the options every controller takes
// (Client and Informers required), the CA that signs (required) and how
// long what it signs is valid (0: DefaultDuration).
type Options struct {
	controller.Common
	CA       *pki.CA
	Duration time.Duration
}

// Controller is the csrsigning controller. Create it with New, then Run it.
type Controller struct {
	client    *client.Client[*certificatesv1.CertificateSigningRequest]
	lister    informer.Lister[*certificatesv1.CertificateSigningRequest]
	hasSynced []func() bool
	queue     *workqueue.Queue[string]
	log       *slog.Logger
	ca        *pki.CA
	duration  time.Duration
}

// New returns a controller reading requests from opts.Informers, with its
// event handlers registered. Nothing runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	if opts.CA == nil {
		return nil, fmt.Errorf("%s: Options.CA is required", Name)
	}
	if opts.Duration <= 0 {
		opts.Duration = DefaultDuration
	}
	inf := informer.For[*certificatesv1.CertificateSigningRequest](opts.Informers)
	c := &Controller{
		client:   client.For[*certificatesv1.CertificateSigningRequest](opts.Client),
		lister:   informer.NewLister[*certificatesv1.CertificateSigningRequest](inf.GetIndexer()),
		queue:    controller.NewQueue[string](Name, opts.Common),
		log:      opts.Logger,
		ca:       opts.CA,
		duration: opts.Duration,
	}
	reg, err := inf.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueue(obj) },
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c.hasSynced = []func() bool{reg.HasSynced}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	if r, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && waiting(r) {
		c.queue.Add(r.Name)
	}
}

// waiting reports whether r waits for a signature: approved, not failed,
// not issued, and addressed to one of ours.
func waiting(r *certificatesv1.CertificateSigningRequest) bool {
	return csr.Approved(r) && !csr.HasTrue(r, certificatesv1.CertificateFailed) &&
		len(r.Status.Certificate) == 0 && rules[r.Spec.SignerName] != nil
}

// Run waits for the cache to sync, runs workers workers, and blocks until
// ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	c.log.Info("starting", "workers", workers)
	if !informer.WaitForCacheSync(ctx, c.hasSynced...) {
		c.log.Info("stopped before the caches synced")
		return
	}
	var wg sync.WaitGroup
	for range controller.Workers(workers) {
		wg.Go(func() {
			for c.processNextWorkItem(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	c.log.Info("stopped")
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	controller.HandleErr(ctx, c.log, c.queue, key, c.sync(ctx, key))
	return true
}

// sync signs one request, or fails it, if it waits for a signature.
func (c *Controller) sync(ctx context.Context, name string) error {
	cached, err := c.lister.Get("", name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !waiting(cached) {
		return nil
	}
	r := cached.DeepCopy()
	req, err := api.ParseCSR(r.Spec.Request)
	if err != nil {
		return fmt.Errorf("unable to parse csr %q: %v", r.Name, err)
	}
	if err := rules[r.Spec.SignerName](req, r.Spec.Usages); err != nil {
		c.log.Info(fmt.Sprintf("signer %s refuses: %v → Failed", r.Spec.SignerName, err), "object", name)
		r.Status.Conditions = append(r.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue,
			Reason: "SignerValidationFailure", Message: err.Error(), LastUpdateTime: metav1.Now(),
		})
		if _, err := c.client.UpdateStatus(ctx, r); err != nil && !client.IsNotFound(err) {
			return fmt.Errorf("error adding failure condition for csr: %w", err)
		}
		return nil
	}
	keyUsage, extUsages, err := x509Usages(r.Spec.Usages)
	if err != nil {
		return err
	}
	d := validity(c.duration, r.Spec.ExpirationSeconds)
	cert, err := c.ca.SignRequest(req, keyUsage, extUsages, d)
	if err != nil {
		return fmt.Errorf("error auto signing csr: %w", err)
	}
	r.Status.Certificate = cert
	if _, err := c.client.UpdateStatus(ctx, r); err != nil {
		if client.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("error updating signature for csr: %w", err)
	}
	c.log.Info(fmt.Sprintf("approved, %s → signed for %s as %q %v", r.Spec.SignerName, d, req.Subject.CommonName, req.Subject.Organization), "object", name)
	return nil
}

// validity is how long a certificate is valid: the signer's duration, or
// the request's when that is shorter, but at least ten minutes.
func validity(ttl time.Duration, expirationSeconds *int32) time.Duration {
	if expirationSeconds == nil {
		return ttl
	}
	const least = 10 * time.Minute
	switch want := time.Duration(*expirationSeconds) * time.Second; {
	case want > ttl:
		return ttl
	case want < least:
		return least
	default:
		return want
	}
}

// rules are the signers this controller signs for, each with what it
// refuses to sign.
var rules = map[string]func(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error{
	certificatesv1.KubeAPIServerClientSignerName:        apiServerClient,
	certificatesv1.KubeAPIServerClientKubeletSignerName: csr.ValidateKubeletClient,
	certificatesv1.KubeletServingSignerName:             kubeletServing,
}

func apiServerClient(_ *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	clientAuth := false
	for _, u := range usages {
		switch u {
		case certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment:
		case certificatesv1.UsageClientAuth:
			clientAuth = true
		default:
			return fmt.Errorf("invalid usage for client certificate: %s", u)
		}
	}
	if !clientAuth {
		return fmt.Errorf("missing required usage for client certificate: %s", certificatesv1.UsageClientAuth)
	}
	return nil
}

var errDNSOrIPSANRequired = errors.New("DNS or IP subjectAltName is required")

func kubeletServing(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	switch {
	case !slices.Equal(req.Subject.Organization, []string{"system:nodes"}):
		return csr.ErrOrganizationNotSystemNodes
	case len(req.DNSNames) == 0 && len(req.IPAddresses) == 0:
		return errDNSOrIPSANRequired
	case len(req.EmailAddresses) > 0:
		return csr.ErrEmailSANNotAllowed
	case len(req.URIs) > 0:
		return csr.ErrURISANNotAllowed
	}
	if err := csr.UsagesAre(usages, certificatesv1.UsageServerAuth); err != nil {
		return err
	}
	if !strings.HasPrefix(req.Subject.CommonName, "system:node:") {
		return csr.ErrCommonNameNotSystemNode
	}
	return nil
}

// x509Usages maps a request's usages onto the certificate's key usage
// bits and extended key usages.
func x509Usages(usages []certificatesv1.KeyUsage) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	var ku x509.KeyUsage
	var ext []x509.ExtKeyUsage
	for _, u := range usages {
		if k, ok := keyUsages[u]; ok {
			ku |= k
		} else if e, ok := extKeyUsages[u]; ok {
			ext = append(ext, e)
		} else {
			return 0, nil, fmt.Errorf("unrecognized usage: %s", u)
		}
	}
	return ku, ext, nil
}

var keyUsages = map[certificatesv1.KeyUsage]x509.KeyUsage{
	"signing":            x509.KeyUsageDigitalSignature,
	"digital signature":  x509.KeyUsageDigitalSignature,
	"content commitment": x509.KeyUsageContentCommitment,
	"key encipherment":   x509.KeyUsageKeyEncipherment,
	"key agreement":      x509.KeyUsageKeyAgreement,
	"data encipherment":  x509.KeyUsageDataEncipherment,
	"cert sign":          x509.KeyUsageCertSign,
	"crl sign":           x509.KeyUsageCRLSign,
	"encipher only":      x509.KeyUsageEncipherOnly,
	"decipher only":      x509.KeyUsageDecipherOnly,
}

var extKeyUsages = map[certificatesv1.KeyUsage]x509.ExtKeyUsage{
	"any":              x509.ExtKeyUsageAny,
	"server auth":      x509.ExtKeyUsageServerAuth,
	"client auth":      x509.ExtKeyUsageClientAuth,
	"code signing":     x509.ExtKeyUsageCodeSigning,
	"email protection": x509.ExtKeyUsageEmailProtection,
	"s/mime":           x509.ExtKeyUsageEmailProtection,
	"ipsec end system": x509.ExtKeyUsageIPSECEndSystem,
	"ipsec tunnel":     x509.ExtKeyUsageIPSECTunnel,
	"ipsec user":       x509.ExtKeyUsageIPSECUser,
	"timestamping":     x509.ExtKeyUsageTimeStamping,
	"ocsp signing":     x509.ExtKeyUsageOCSPSigning,
	"microsoft sgc":    x509.ExtKeyUsageMicrosoftServerGatedCrypto,
	"netscape sgc":     x509.ExtKeyUsageNetscapeServerGatedCrypto,
}
