// Package serviceaccounttoken fills and cleans up the Secrets that hold
// legacy ServiceAccount tokens, as kube-controller-manager's
// serviceaccount-token controller does.
//
// Properties:
//
//   - A Secret of type kubernetes.io/service-account-token annotated with
//     the name of an existing ServiceAccount gets, in data, a token of that
//     ServiceAccount signed with --service-account-private-key-file (if it
//     has none), the cluster's CA from --root-ca-file as ca.crt (kept
//     equal to the file), and its namespace; and the ServiceAccount's uid
//     in its kubernetes.io/service-account.uid annotation.
//   - Such a Secret whose ServiceAccount does not exist, or is another
//     ServiceAccount than the one it was made for (another uid), is
//     deleted; so is every such Secret of a ServiceAccount that is deleted.
//     The token dies with it: the API server accepts a legacy token only
//     while its Secret holds it.
//   - Without a private key the controller does not run, as in kube.
//
// Tokens are never logged.
package serviceaccounttoken

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sa "github.com/minictl/minictl/auth/serviceaccount"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's kube-controller-manager name.
const Name = "serviceaccount-token"

// Options is what the controller needs besides the common options.
type Options struct {
	controller.Common
	// Signer signs the tokens. Required.
	Signer *sa.Signer
	// RootCA is the PEM the Secrets get as ca.crt; empty: none.
	RootCA []byte
}

// Controller keeps the token Secrets. Its queue holds Secret keys.
type Controller struct {
	secrets  *client.Client[*corev1.Secret]
	accounts *client.Client[*corev1.ServiceAccount]
	secretLs informer.Lister[*corev1.Secret]
	saLs     informer.Lister[*corev1.ServiceAccount]
	synced   []func() bool
	signer   *sa.Signer
	rootCA   []byte

	queue *workqueue.Queue[string]
	log   *slog.Logger
}

// New returns a controller reading Secrets and ServiceAccounts from
// opts.Informers. Call Run to start it.
func New(opts Options) (*Controller, error) {
	if opts.Signer == nil {
		return nil, fmt.Errorf("%s: a signing key is required", Name)
	}
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	c := &Controller{
		secrets:  client.For[*corev1.Secret](opts.Client),
		accounts: client.For[*corev1.ServiceAccount](opts.Client),
		signer:   opts.Signer,
		rootCA:   opts.RootCA,
		queue:    controller.NewQueue[string](Name, opts.Common),
		log:      opts.Logger,
	}
	secrets := informer.For[*corev1.Secret](opts.Informers)
	accounts := informer.For[*corev1.ServiceAccount](opts.Informers)
	c.secretLs, c.saLs = secrets.Lister(), accounts.Lister()
	secReg, err := secrets.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueueSecret(obj) },
		UpdateFunc: func(_, obj any) { c.enqueueSecret(obj) },
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	saReg, err := accounts.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueueSecretsOf(obj) },
		UpdateFunc: func(_, obj any) { c.enqueueSecretsOf(obj) },
		DeleteFunc: c.enqueueSecretsOf,
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c.synced = []func() bool{secReg.HasSynced, saReg.HasSynced}
	return c, nil
}

func (c *Controller) enqueueSecret(obj any) {
	if s, ok := obj.(*corev1.Secret); ok && s.Type == corev1.SecretTypeServiceAccountToken {
		c.queue.Add(s.Namespace + "/" + s.Name)
	}
}

// enqueueSecretsOf enqueues the token Secrets that name a ServiceAccount
// that came, changed or went.
func (c *Controller) enqueueSecretsOf(obj any) {
	if tomb, ok := obj.(informer.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	acct, ok := obj.(*corev1.ServiceAccount)
	if !ok {
		return
	}
	for _, s := range c.secretLs.ByNamespace(acct.Namespace).List(nil) {
		if s.Type == corev1.SecretTypeServiceAccountToken && s.Annotations[corev1.ServiceAccountNameKey] == acct.Name {
			c.queue.Add(s.Namespace + "/" + s.Name)
		}
	}
}

// Run waits for the caches, runs workers until ctx is done, then shuts the
// queue down and waits for the workers.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	c.log.Info("starting", slog.Int("workers", workers))
	if !informer.WaitForCacheSync(ctx, c.synced...) {
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

// sync brings one token Secret in line with its ServiceAccount.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	secret, err := c.secretLs.Get(ns, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if secret.Type != corev1.SecretTypeServiceAccountToken || secret.DeletionTimestamp != nil {
		return nil
	}
	saName := secret.Annotations[corev1.ServiceAccountNameKey]
	acct, err := c.serviceAccount(ctx, ns, saName)
	if err != nil {
		return err
	}
	if uid := secret.Annotations[corev1.ServiceAccountUIDKey]; acct == nil || (uid != "" && uid != string(acct.UID)) {
		c.log.Info("token secret's ServiceAccount is gone → delete the secret",
			slog.String("object", key), slog.String("serviceAccount", saName))
		uid := secret.UID
		err := c.secrets.Delete(ctx, ns, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if client.IsNotFound(err) || client.IsConflict(err) {
			return nil // gone already, or replaced: the new one is queued
		}
		return err
	}

	needToken := len(secret.Data[corev1.ServiceAccountTokenKey]) == 0
	needCA := len(c.rootCA) > 0 && !bytes.Equal(secret.Data[corev1.ServiceAccountRootCAKey], c.rootCA)
	needNamespace := len(secret.Data[corev1.ServiceAccountNamespaceKey]) == 0
	needUID := secret.Annotations[corev1.ServiceAccountUIDKey] == ""
	if !needToken && !needCA && !needNamespace && !needUID {
		return nil
	}
	s := secret.DeepCopy()
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	if needToken {
		tok, err := c.signer.Sign(sa.NewLegacyClaims(acct, s))
		if err != nil {
			return fmt.Errorf("generate token for %s: %w", key, err)
		}
		s.Data[corev1.ServiceAccountTokenKey] = []byte(tok)
	}
	if needCA {
		s.Data[corev1.ServiceAccountRootCAKey] = c.rootCA
	}
	if needNamespace {
		s.Data[corev1.ServiceAccountNamespaceKey] = []byte(ns)
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[corev1.ServiceAccountUIDKey] = string(acct.UID)
	c.log.Info("token secret is incomplete → fill it",
		slog.String("object", key), slog.String("serviceAccount", saName),
		slog.Bool("token", needToken), slog.Bool("ca.crt", needCA), slog.Bool("namespace", needNamespace))
	_, err = c.secrets.Update(ctx, s)
	if client.IsNotFound(err) {
		return nil
	}
	return err // a conflict is retried on the Secret as it now is
}

// serviceAccount finds namespace/name in the cache, and in the API when
// the cache has not seen it yet, so that a Secret made right after its
// ServiceAccount is not taken for an orphan; nil when there is none.
func (c *Controller) serviceAccount(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	if name == "" {
		return nil, nil
	}
	acct, err := c.saLs.Get(ns, name)
	if err == nil {
		return acct, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	acct, err = c.accounts.Get(ctx, ns, name)
	if client.IsNotFound(err) {
		return nil, nil
	}
	return acct, err
}
