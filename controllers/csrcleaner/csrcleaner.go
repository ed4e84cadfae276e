// Package csrcleaner is kube-controller-manager's csrcleaner controller:
// it deletes CertificateSigningRequests nobody needs any more.
//
// Every hour, and once when it starts, it looks at every request in the
// cache and deletes those that are:
//
//   - issued: approved and given a certificate, an hour after the
//     approval (its lastUpdateTime);
//   - denied, an hour after the denial;
//   - failed, an hour after the failure;
//   - pending (no conditions at all), a day after they were created;
//   - issued with a certificate that has expired, whenever.
//
// An approved request still waiting for its signer is kept. Times are
// read on the controller's clock.
package csrcleaner

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
)

// Name is the controller's kube-controller-manager name.
const Name = "csrcleaner"

// kube's ages.
const (
	PollingInterval    = time.Hour
	ApprovedExpiration = time.Hour
	DeniedExpiration   = time.Hour
	FailedExpiration   = time.Hour
	PendingExpiration  = 24 * time.Hour
)

// Options is what the controller needs: the options every controller takes
// (Client and Informers required).
type Options struct {
	controller.Common
}

// Controller is the csrcleaner controller. Create it with New, then Run it.
type Controller struct {
	client    *client.Client[*certificatesv1.CertificateSigningRequest]
	lister    informer.Lister[*certificatesv1.CertificateSigningRequest]
	hasSynced []func() bool
	log       *slog.Logger
	clock     clock.Clock
}

// New returns a controller reading requests from opts.Informers. Nothing
// runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	inf := informer.For[*certificatesv1.CertificateSigningRequest](opts.Informers)
	c := &Controller{
		client: client.For[*certificatesv1.CertificateSigningRequest](opts.Client),
		lister: informer.NewLister[*certificatesv1.CertificateSigningRequest](inf.GetIndexer()),
		log:    opts.Logger,
		clock:  opts.Clock,
	}
	// The cleaner reacts to no event: it looks at everything on its
	// period. Registering a handler makes the factory run the informer.
	reg, err := inf.AddEventHandler(informer.ResourceEventHandlerFuncs{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c.hasSynced = []func() bool{reg.HasSynced}
	return c, nil
}

// Run waits for the cache to sync, then cleans up at once and every
// PollingInterval until ctx is done. It has one worker, whatever workers
// says, as kube's.
func (c *Controller) Run(ctx context.Context, _ int) {
	c.log.Info("starting")
	if !informer.WaitForCacheSync(ctx, c.hasSynced...) {
		c.log.Info("stopped before the caches synced")
		return
	}
	var wg sync.WaitGroup
	for range controller.Workers(1) {
		wg.Go(func() {
			for {
				c.cleanUp(ctx)
				if !clock.Sleep(ctx, c.clock, PollingInterval) {
					return
				}
			}
		})
	}
	wg.Wait()
	c.log.Info("stopped")
}

// cleanUp deletes every request past its age.
func (c *Controller) cleanUp(ctx context.Context) {
	csrs := c.lister.List(labels.Everything())
	now := c.clock.Now()
	for _, r := range csrs {
		why := expired(r, now)
		if why == "" {
			continue
		}
		err := c.client.Delete(ctx, "", r.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &r.UID}})
		if err != nil && !client.IsNotFound(err) && !client.IsConflict(err) {
			c.log.Warn(fmt.Sprintf("unable to delete CSR %q: %v", r.Name, err), "object", r.Name)
			continue
		}
		c.log.Info(why+" → delete", "object", r.Name)
	}
}

// expired says why r is past its age, or "" if it is not.
func expired(r *certificatesv1.CertificateSigningRequest, now time.Time) string {
	issued := len(r.Status.Certificate) > 0
	if len(r.Status.Conditions) == 0 && olderThan(r.CreationTimestamp, PendingExpiration, now) {
		return "pending for more than " + PendingExpiration.String()
	}
	for _, cond := range r.Status.Conditions {
		switch cond.Type {
		case certificatesv1.CertificateApproved:
			if issued && olderThan(cond.LastUpdateTime, ApprovedExpiration, now) {
				return "issued more than " + ApprovedExpiration.String() + " ago"
			}
			if issued && certificateExpired(r.Status.Certificate, now) {
				return "its certificate has expired"
			}
		case certificatesv1.CertificateDenied:
			if olderThan(cond.LastUpdateTime, DeniedExpiration, now) {
				return "denied more than " + DeniedExpiration.String() + " ago"
			}
		case certificatesv1.CertificateFailed:
			if olderThan(cond.LastUpdateTime, FailedExpiration, now) {
				return "failed more than " + FailedExpiration.String() + " ago"
			}
		}
	}
	return ""
}

func olderThan(t metav1.Time, d time.Duration, now time.Time) bool {
	return !t.IsZero() && now.Sub(t.Time) > d
}

// certificateExpired reports whether the first certificate of data is
// past its NotAfter; one that cannot be read has not.
func certificateExpired(data []byte, now time.Time) bool {
	block, _ := pem.Decode(data)
	if block == nil {
		return false
	}
	certs, err := x509.ParseCertificates(block.Bytes)
	if err != nil || len(certs) == 0 {
		return false
	}
	return now.After(certs[0].NotAfter)
}
