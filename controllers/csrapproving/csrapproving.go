// Package csrapproving is kube-controller-manager's csrapproving
// controller: it approves the client certificates kubelets ask for, when
// the one who asked may have them.
//
// For each request not yet approved, denied or issued, sync recognizes
// what it asks for:
//
//   - selfnodeclient: a kubelet renewing its own client certificate, a
//     kubelet client request (signer
//     kubernetes.io/kube-apiserver-client-kubelet, subject
//     system:node:<name> in system:nodes, digital signature and client
//     auth) made by the very user it names;
//   - nodeclient: any kubelet client request, such as a new node's, made
//     with a bootstrap token.
//
// For each recognized kind, most specific first, it asks the API server
// through a SubjectAccessReview whether the requester may create
// certificatesigningrequests/<kind> in certificates.k8s.io. The first yes
// approves the request (reason AutoApproved), through the approval
// subresource. No yes leaves it pending, and it is looked at again later
// (the requester may be granted the permission meanwhile). Requests of
// other kinds are left for a person to decide.
package csrapproving

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/csr"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's kube-controller-manager name.
const Name = "csrapproving"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required).
type Options struct {
	controller.Common
}

// Controller is the csrapproving controller. Create it with New, then Run
// it.
type Controller struct {
	rc        *client.RESTClient
	client    *client.Client[*certificatesv1.CertificateSigningRequest]
	lister    informer.Lister[*certificatesv1.CertificateSigningRequest]
	hasSynced []func() bool
	queue     *workqueue.Queue[string]
	log       *slog.Logger
}

// New returns a controller reading requests from opts.Informers, with its
// event handlers registered. Nothing runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	inf := informer.For[*certificatesv1.CertificateSigningRequest](opts.Informers)
	c := &Controller{
		rc:     opts.Client,
		client: client.For[*certificatesv1.CertificateSigningRequest](opts.Client),
		lister: informer.NewLister[*certificatesv1.CertificateSigningRequest](inf.GetIndexer()),
		queue:  controller.NewQueue[string](Name, opts.Common),
		log:    opts.Logger,
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
	if r, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && pending(r) {
		c.queue.Add(r.Name)
	}
}

// pending: nobody has decided on r, and it has no certificate.
func pending(r *certificatesv1.CertificateSigningRequest) bool {
	return len(r.Status.Certificate) == 0 && !csr.Decided(r)
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

// recognizer is one kind of request the approver knows, the permission
// that approves it, and what the approval says.
type recognizer struct {
	subresource string
	recognize   func(r *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) bool
	message     string
}

// recognizers, most specific first, as kube's approver tries them.
var recognizers = []recognizer{
	{subresource: "selfnodeclient", recognize: isSelfNodeClient, message: "Auto approving self kubelet client certificate after SubjectAccessReview."},
	{subresource: "nodeclient", recognize: isNodeClient, message: "Auto approving kubelet client certificate after SubjectAccessReview."},
}

func isNodeClient(r *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) bool {
	return r.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName &&
		csr.ValidateKubeletClient(req, r.Spec.Usages) == nil
}

func isSelfNodeClient(r *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) bool {
	return isNodeClient(r, req) && r.Spec.Username == req.Subject.CommonName
}

// sync approves one pending request if it is a kind the approver knows
// and a SubjectAccessReview allows its requester that kind.
func (c *Controller) sync(ctx context.Context, name string) error {
	cached, err := c.lister.Get("", name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !pending(cached) {
		return nil
	}
	req, err := api.ParseCSR(cached.Spec.Request)
	if err != nil {
		return fmt.Errorf("unable to parse csr %q: %v", name, err)
	}
	var tried []string
	for _, rz := range recognizers {
		if !rz.recognize(cached, req) {
			continue
		}
		tried = append(tried, rz.subresource)
		allowed, err := c.review(ctx, cached, rz.subresource)
		if err != nil {
			return err
		}
		if !allowed {
			continue
		}
		r := cached.DeepCopy()
		r.Status.Conditions = append(r.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApproved", Message: rz.message,
		})
		if _, err := c.client.UpdateApproval(ctx, r); err != nil {
			if client.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("error updating approval for csr: %w", err)
		}
		c.log.Info(fmt.Sprintf("%s may create certificatesigningrequests/%s → approved", r.Spec.Username, rz.subresource), "object", name)
		return nil
	}
	if len(tried) > 0 {
		return fmt.Errorf("recognized csr %q as %v but subject access review was not approved", name, tried)
	}
	return nil
}

// review asks the API server whether the request's requester may create
// certificatesigningrequests/subresource.
func (c *Controller) review(ctx context.Context, r *certificatesv1.CertificateSigningRequest, subresource string) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range r.Spec.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: r.Spec.Username, UID: r.Spec.UID, Groups: r.Spec.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: certificatesv1.GroupName, Version: "*", Resource: "certificatesigningrequests",
				Subresource: subresource, Verb: "create",
			},
		},
	}
	body, err := json.Marshal(&sar)
	if err != nil {
		return false, err
	}
	var out authorizationv1.SubjectAccessReview
	if err := c.rc.Do(ctx, http.MethodPost, "/apis/authorization.k8s.io/v1/subjectaccessreviews", nil, "application/json", body, &out); err != nil {
		return false, fmt.Errorf("subject access review: %w", err)
	}
	return out.Status.Allowed, nil
}
