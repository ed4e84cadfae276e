// Package bootstrapsigner is kube-controller-manager's bootstrapsigner
// controller: it signs the cluster-info ConfigMap in kube-public with
// every bootstrap token allowed to sign, so that a node joining with a
// token can trust the kubeconfig it reads there before it trusts anything
// else.
//
// Whenever cluster-info or a bootstrap token Secret changes, sync computes
// for each token Secret in kube-system that is well formed, not expired
// and has usage-bootstrap-signing "true" a detached JWS of cluster-info's
// kubeconfig key, and makes the ConfigMap's jws-kubeconfig-<token-id> keys
// exactly those signatures: new tokens' added, changed ones replaced,
// those of tokens deleted, expired or no longer signing removed. A
// cluster-info without a kubeconfig is left alone.
//
// It is off by default, as in kube: it runs when --controllers names it.
package bootstrapsigner

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/bootstraptoken"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's kube-controller-manager name.
const Name = "bootstrapsigner"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required).
type Options struct {
	controller.Common
}

// Controller is the bootstrapsigner controller. Create it with New, then
// Run it.
type Controller struct {
	cms       *client.Client[*corev1.ConfigMap]
	cmLister  informer.Lister[*corev1.ConfigMap]
	secrets   informer.Lister[*corev1.Secret]
	hasSynced []func() bool
	queue     *workqueue.Queue[string]
	log       *slog.Logger
	clock     clock.Clock
}

// key is the queue's one key: there is one ConfigMap to sign.
const key = metav1.NamespacePublic + "/" + bootstraptoken.ConfigMapClusterInfo

// New returns a controller reading ConfigMaps and Secrets from
// opts.Informers, with its event handlers registered. Nothing runs until
// Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	cmInf := informer.For[*corev1.ConfigMap](opts.Informers)
	secretInf := informer.For[*corev1.Secret](opts.Informers)
	c := &Controller{
		cms:      client.For[*corev1.ConfigMap](opts.Client),
		cmLister: informer.NewLister[*corev1.ConfigMap](cmInf.GetIndexer()),
		secrets:  informer.NewLister[*corev1.Secret](secretInf.GetIndexer()),
		queue:    controller.NewQueue[string](Name, opts.Common),
		log:      opts.Logger,
		clock:    opts.Clock,
	}
	onCM := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Namespace == metav1.NamespacePublic && cm.Name == bootstraptoken.ConfigMapClusterInfo {
			c.queue.Add(key)
		}
	}
	onSecret := func(obj any) {
		if d, ok := obj.(informer.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if s, ok := obj.(*corev1.Secret); ok && s.Type == bootstraptoken.SecretType && s.Namespace == bootstraptoken.Namespace {
			c.queue.Add(key)
		}
	}
	cmReg, err := cmInf.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc: func(obj any, _ bool) { onCM(obj) }, UpdateFunc: func(_, obj any) { onCM(obj) },
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	secretReg, err := secretInf.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc: func(obj any, _ bool) { onSecret(obj) }, UpdateFunc: func(_, obj any) { onSecret(obj) }, DeleteFunc: onSecret,
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c.hasSynced = []func() bool{cmReg.HasSynced, secretReg.HasSynced}
	return c, nil
}

// Run waits for the caches to sync, runs workers workers, and blocks until
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
	k, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(k)
	controller.HandleErr(ctx, c.log, c.queue, k, c.sync(ctx))
	return true
}

// sync makes cluster-info's signatures those of the signing tokens.
func (c *Controller) sync(ctx context.Context) error {
	cm, err := c.cmLister.Get(metav1.NamespacePublic, bootstraptoken.ConfigMapClusterInfo)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	content, ok := cm.Data[bootstraptoken.KubeConfigKey]
	if !ok {
		c.log.Info("no "+bootstraptoken.KubeConfigKey+" key in the ConfigMap: nothing to sign", "object", key)
		return nil
	}
	want := c.signatures(content)
	have := map[string]string{}
	for k, v := range cm.Data {
		if id, ok := strings.CutPrefix(k, bootstraptoken.JWSSignatureKeyPrefix); ok {
			have[id] = v
		}
	}
	if maps.Equal(want, have) {
		return nil
	}
	next := cm.DeepCopy()
	for id := range have {
		delete(next.Data, bootstraptoken.JWSSignatureKeyPrefix+id)
	}
	for id, sig := range want {
		next.Data[bootstraptoken.JWSSignatureKeyPrefix+id] = sig
	}
	if _, err := c.cms.Update(ctx, next); err != nil {
		return fmt.Errorf("update cluster-info: %w", err)
	}
	c.log.Info(fmt.Sprintf("signed by %d bootstrap tokens", len(want)), "object", key)
	return nil
}

// signatures are content's, by each token that may sign, keyed by token id.
func (c *Controller) signatures(content string) map[string]string {
	out := map[string]string{}
	now := c.clock.Now()
	secrets := c.secrets.ByNamespace(bootstraptoken.Namespace).List(labels.Everything())
	for _, s := range secrets {
		t, ok := bootstraptoken.Parse(s)
		if !ok || bootstraptoken.Expired(s, now) || string(s.Data[bootstraptoken.UsageSigningKey]) != "true" {
			continue
		}
		out[t.ID] = bootstraptoken.DetachedSignature(content, t)
	}
	return out
}
