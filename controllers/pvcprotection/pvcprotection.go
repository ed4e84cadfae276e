// Package pvcprotection is the pvc-protection controller: a claim that a
// pod uses is not deleted until no pod does, as kube-controller-manager's
// pvc-protection controller keeps it.
//
// Every claim carries the kubernetes.io/pvc-protection finalizer (the API
// server's StorageObjectInUseProtection admission adds it on create; this
// controller adds it to a claim that lacks it). For each claim being
// deleted, sync looks for a pod that uses it: a pod scheduled to a node
// whose volumes name the claim (or, for a generic ephemeral volume, a pod
// not yet shut down whose claim it is). It asks its cache first and the
// API second, since a pod the cache has not seen yet may use the claim.
// None: the finalizer is removed, and the claim goes.
//
// Properties:
//
//   - A claim a scheduled pod names is never released by this
//     controller, whatever that pod's phase: kube keeps it until the pod
//     object is gone.
//   - Only the finalizer changes; nothing is deleted here.
package pvcprotection

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's kube-controller-manager name.
const Name = "pvc-protection"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required).
type Options struct {
	controller.Common
}

// Controller is the pvc-protection controller. Create it with New, then
// Run it.
type Controller struct {
	claims    *client.Client[*corev1.PersistentVolumeClaim]
	pods      *client.Client[*corev1.Pod]
	claimList informer.Lister[*corev1.PersistentVolumeClaim]
	podList   informer.Lister[*corev1.Pod]
	hasSynced []func() bool
	queue     *workqueue.Queue[string]
	log       *slog.Logger
}

// New returns a controller reading claims and pods from opts.Informers,
// with its event handlers registered. Nothing runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	pvcInformer := informer.For[*corev1.PersistentVolumeClaim](opts.Informers)
	podInformer := informer.For[*corev1.Pod](opts.Informers)
	c := &Controller{
		claims:    client.For[*corev1.PersistentVolumeClaim](opts.Client),
		pods:      client.For[*corev1.Pod](opts.Client),
		claimList: informer.NewLister[*corev1.PersistentVolumeClaim](pvcInformer.GetIndexer()),
		podList:   informer.NewLister[*corev1.Pod](podInformer.GetIndexer()),
		queue:     controller.NewQueue[string](Name, opts.Common),
		log:       opts.Logger,
	}
	claimReg, err := pvcInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueueClaim(obj) },
		UpdateFunc: func(_, obj any) { c.enqueueClaim(obj) },
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	podReg, err := podInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueuePodClaims(obj) },
		UpdateFunc: func(_, obj any) { c.enqueuePodClaims(obj) },
		DeleteFunc: c.enqueuePodClaims,
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c.hasSynced = []func() bool{claimReg.HasSynced, podReg.HasSynced}
	return c, nil
}

// enqueueClaim adds a claim that lacks the finalizer, or is being
// deleted with it.
func (c *Controller) enqueueClaim(obj any) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	if slices.Contains(pvc.Finalizers, api.PVCProtectionFinalizer) == (pvc.DeletionTimestamp != nil) {
		c.queue.Add(pvc.Namespace + "/" + pvc.Name)
	}
}

// enqueuePodClaims adds the claims a pod names: its going (or finishing)
// may free them.
func (c *Controller) enqueuePodClaims(obj any) {
	if d, ok := obj.(informer.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	for _, v := range pod.Spec.Volumes {
		if name := claimName(pod, &v); name != "" {
			c.queue.Add(pod.Namespace + "/" + name)
		}
	}
}

// claimName is the claim a pod's volume names: its persistentVolumeClaim,
// or the claim of a generic ephemeral volume (<pod>-<volume>).
func claimName(pod *corev1.Pod, v *corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		return pod.Name + "-" + v.Name
	}
	return ""
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
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	controller.HandleErr(ctx, c.log, c.queue, key, c.sync(ctx, key))
	return true
}

// sync gives a live claim the finalizer, and takes it from a deleted one
// that no pod uses.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // a malformed key never gets better
	}
	pvc, err := c.claimList.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		return nil // gone
	}
	if err != nil {
		return err
	}
	has := slices.Contains(pvc.Finalizers, api.PVCProtectionFinalizer)
	switch {
	case pvc.DeletionTimestamp == nil && !has:
		pvc = pvc.DeepCopy()
		pvc.Finalizers = append(pvc.Finalizers, api.PVCProtectionFinalizer)
		_, err := c.claims.Update(ctx, pvc)
		return notFoundIsDone(err)
	case pvc.DeletionTimestamp == nil || !has:
		return nil
	}
	used, by, err := c.inUse(ctx, pvc)
	if err != nil {
		return err
	}
	if used {
		c.log.Info(fmt.Sprintf("deleted, but pod %s uses it → keep the finalizer", by), slog.String("object", key))
		return nil
	}
	c.log.Info("deleted and no pod uses it → remove the finalizer", slog.String("object", key))
	pvc = pvc.DeepCopy()
	pvc.Finalizers = slices.DeleteFunc(pvc.Finalizers, func(f string) bool { return f == api.PVCProtectionFinalizer })
	_, err = c.claims.Update(ctx, pvc)
	return notFoundIsDone(err)
}

// inUse reports whether a pod uses pvc, and which: from the cache, and
// then, if the cache knows none, from the API.
func (c *Controller) inUse(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, string, error) {
	for _, pod := range c.podList.ByNamespace(pvc.Namespace).List(labels.Everything()) {
		if uses(pod, pvc) {
			return true, pod.Name, nil
		}
	}
	live, err := c.pods.List(ctx, pvc.Namespace, metav1.ListOptions{})
	if err != nil {
		return false, "", fmt.Errorf("live list of pods: %w", err)
	}
	for _, pod := range live.Items {
		if uses(pod, pvc) {
			return true, pod.Name, nil
		}
	}
	return false, "", nil
}

// uses reports whether pod uses pvc: it is scheduled (the kubelet sees
// only scheduled pods, and starts none whose claim is being deleted) and
// one of its volumes names the claim, or it has not shut down and the
// claim is one of its generic ephemeral volumes.
func uses(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) bool {
	if pod.Spec.NodeName == "" {
		return false
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		switch {
		case v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name:
			return true
		case v.Ephemeral != nil && claimName(pod, v) == pvc.Name && metav1.IsControlledBy(pvc, pod) && !shutDown(pod):
			return true
		}
	}
	return false
}

// shutDown reports whether the kubelet is done with pod: it has finished,
// or it is being deleted and no container runs.
func shutDown(pod *corev1.Pod) bool {
	if api.IsPodTerminal(pod) {
		return true
	}
	if pod.DeletionTimestamp == nil {
		return false
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Running != nil {
			return false
		}
	}
	return true
}

func notFoundIsDone(err error) error {
	if client.IsNotFound(err) {
		return nil
	}
	return err
}
