// Package rootcacertpublisher publishes the cluster's CA in every
// namespace, as kube-controller-manager's root-ca-cert-publisher does, so
// that a pod's projected token volume can mount it as ca.crt.
//
// Properties:
//
//   - Every namespace that is not terminating has a ConfigMap
//     kube-root-ca.crt whose data is exactly ca.crt, the PEM of
//     --root-ca-file, and whose kubernetes.io/description annotation says
//     what it is for.
//   - A changed or deleted one is put back soon after.
//   - Without a root CA the controller does not run, as in kube.
package rootcacertpublisher

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's kube-controller-manager name.
const Name = "root-ca-cert-publisher"

// ConfigMapName is the ConfigMap it keeps in every namespace, and
// DataKey the key of the CA in it.
const (
	ConfigMapName = "kube-root-ca.crt"
	DataKey       = "ca.crt"
)

// DescriptionAnnotation and Description are the annotation kube puts on
// the ConfigMap.
const (
	DescriptionAnnotation = "kubernetes.io/description"
	Description           = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. " +
		"No other usage is guaranteed across distributions of Kubernetes clusters."
)

// Options is what the controller needs besides the common options.
type Options struct {
	controller.Common
	// RootCA is the PEM to publish. Required.
	RootCA []byte
}

// Controller keeps kube-root-ca.crt in every namespace. Its queue holds
// namespace names.
type Controller struct {
	configMaps *client.Client[*corev1.ConfigMap]
	nsLister   informer.Lister[*corev1.Namespace]
	cmLister   informer.Lister[*corev1.ConfigMap]
	synced     []func() bool
	rootCA     string

	queue *workqueue.Queue[string]
	log   *slog.Logger
}

// New returns a controller reading namespaces and ConfigMaps from
// opts.Informers. Call Run to start it.
func New(opts Options) (*Controller, error) {
	if len(opts.RootCA) == 0 {
		return nil, fmt.Errorf("%s: a root CA is required", Name)
	}
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	c := &Controller{
		configMaps: client.For[*corev1.ConfigMap](opts.Client),
		rootCA:     string(opts.RootCA),
		queue:      controller.NewQueue[string](Name, opts.Common),
		log:        opts.Logger,
	}
	namespaces := informer.For[*corev1.Namespace](opts.Informers)
	configMaps := informer.For[*corev1.ConfigMap](opts.Informers)
	c.nsLister, c.cmLister = namespaces.Lister(), configMaps.Lister()
	nsReg, err := namespaces.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueueNamespace(obj) },
		UpdateFunc: func(_, obj any) { c.enqueueNamespace(obj) },
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	cmReg, err := configMaps.AddEventHandler(informer.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { c.enqueueConfigMap(obj) },
		DeleteFunc: c.enqueueConfigMap,
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c.synced = []func() bool{nsReg.HasSynced, cmReg.HasSynced}
	return c, nil
}

func (c *Controller) enqueueNamespace(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		c.queue.Add(ns.Name)
	}
}

func (c *Controller) enqueueConfigMap(obj any) {
	if tomb, ok := obj.(informer.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == ConfigMapName {
		c.queue.Add(cm.Namespace)
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
	ns, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(ns)
	controller.HandleErr(ctx, c.log, c.queue, ns, c.sync(ctx, ns))
	return true
}

// sync makes namespace ns's kube-root-ca.crt what it should be.
func (c *Controller) sync(ctx context.Context, ns string) error {
	namespace, err := c.nsLister.Get("", ns)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if namespace.DeletionTimestamp != nil || namespace.Status.Phase == corev1.NamespaceTerminating {
		return nil // nothing may be created in it
	}
	data := map[string]string{DataKey: c.rootCA}
	cm, err := c.cmLister.Get(ns, ConfigMapName)
	if apierrors.IsNotFound(err) {
		c.log.Info("namespace has no "+ConfigMapName+" → create it", slog.String("object", ns))
		_, err := c.configMaps.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: ns, Annotations: map[string]string{DescriptionAnnotation: Description}},
			Data:       data,
		})
		switch {
		case client.IsAlreadyExists(err):
			return nil // our cache was behind; its event is on its way
		case client.IsNotFound(err), client.IsForbidden(err):
			return nil // the namespace went, or began terminating
		}
		return err
	}
	if err != nil {
		return err
	}
	if maps.Equal(cm.Data, data) && len(cm.BinaryData) == 0 && cm.Annotations[DescriptionAnnotation] == Description {
		return nil
	}
	c.log.Info(ConfigMapName+" differs from the root CA → update it", slog.String("object", ns))
	cm = cm.DeepCopy()
	cm.Data, cm.BinaryData = data, nil
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[DescriptionAnnotation] = Description
	_, err = c.configMaps.Update(ctx, cm)
	if client.IsNotFound(err) {
		return nil // deleted meanwhile: its deletion is queued
	}
	return err
}
