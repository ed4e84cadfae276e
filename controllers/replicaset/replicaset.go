// Package replicaset is the ReplicaSet controller: it keeps exactly
// spec.replicas pods that match each ReplicaSet's selector, as
// kube-controller-manager's replicaset controller does.
//
// Properties:
//
//   - Pods are counted from the informer's cache, only the active ones (not
//     Succeeded or Failed, not being deleted) that the ReplicaSet controls.
//   - A matching orphan pod is adopted (a controller reference is patched
//     in, after re-reading the ReplicaSet from the API to be sure it is
//     still there and not being deleted); a controlled pod whose labels no
//     longer match is released.
//   - No over-creation when the cache is behind: after creating or
//     deleting, a ReplicaSet waits until its informer has observed every
//     one of those writes (or ExpectationsTimeout passes) before it counts
//     pods again; meanwhile syncs only update status.
//   - Creates go in doubling batches (1, 2, 4, ...) and stop at the first
//     failure; at most BurstReplicas pods are created or deleted per sync.
//   - Scale-down deletes the pods doing least work first: unscheduled,
//     pending, not ready, recently ready, newest.
//   - Status (replicas, fullyLabeledReplicas, readyReplicas,
//     availableReplicas, observedGeneration, the ReplicaFailure condition)
//     is written through the status subresource, only when it changed.
//
// Handlers only enqueue keys; every decision is made in sync, which logs
// one line per decision: "want 3, have 2 → create 1", with the object and
// the counts as attributes.
//
// The same controller keeps ReplicationControllers' pods (package
// controllers/replicationcontroller), as kube-controller-manager's
// replication manager is its replicaset controller run over
// ReplicationControllers converted to ReplicaSets: a Kind says how to see
// an object as a ReplicaSet and how to write its status back.
package replicaset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// DefaultBurstReplicas is how many pods one sync creates or deletes at
// most, upstream's BurstReplicas.
const DefaultBurstReplicas = 500

// slowStartInitialBatch is the size of the first batch of creates.
const slowStartInitialBatch = 1

// Name is the controller's kube-controller-manager name: its --controllers
// name, its logger's controller attribute and its workqueue's name.
const Name = "replicaset"

// Kind is the kind whose objects the controller keeps pods for, T, seen
// as a ReplicaSet: kube's replication manager converts each
// ReplicationController to a ReplicaSet (pkg/controller/replication/
// conversion.go), and so does a Kind. Everything the controller decides,
// it decides on the ReplicaSet view; what it writes (pods' controller
// references, Events, the status) names the object of kind T itself.
type Kind[T api.Object] struct {
	// Name is the controller's kube-controller-manager name: its
	// workqueue's and its metrics' name, and its errors' prefix.
	Name string
	// GroupVersionKind is T's, as the pods' controller references name it.
	GroupVersionKind schema.GroupVersionKind
	// AsReplicaSet returns obj as a ReplicaSet with obj's metadata, spec
	// and status. The controller never modifies it, so it may share obj's
	// memory.
	AsReplicaSet func(obj T) *appsv1.ReplicaSet
	// WithStatus returns a copy of obj whose status is status, to write
	// through the status subresource.
	WithStatus func(obj T, status appsv1.ReplicaSetStatus) T
}

// ReplicaSets is the Kind of the ReplicaSet controller: a ReplicaSet is
// its own view.
var ReplicaSets = Kind[*appsv1.ReplicaSet]{
	Name:             Name,
	GroupVersionKind: appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
	AsReplicaSet:     func(rs *appsv1.ReplicaSet) *appsv1.ReplicaSet { return rs },
	WithStatus: func(rs *appsv1.ReplicaSet, status appsv1.ReplicaSetStatus) *appsv1.ReplicaSet {
		cp := rs.DeepCopy()
		cp.Status = status
		return cp
	},
}

// Options is what the controller needs: the options every controller takes
// (Client and Informers required), and its own.
type Options struct {
	controller.Common
	// BurstReplicas caps the creates or deletes of one sync; 0 means
	// DefaultBurstReplicas.
	BurstReplicas int
}

// Controller is the ReplicaSet controller, for the objects of kind T.
// Create it with New (or NewFor), then Run it.
type Controller[T api.Object] struct {
	kind       Kind[T]
	rsClient   *client.Client[T]
	podClient  *client.Client[*corev1.Pod] // adoption and release patches
	podControl controller.PodControl       // creates and deletes

	rsLister   informer.Lister[T]
	podIndexer informer.Indexer // with controller.ControllerUIDIndex
	hasSynced  []func() bool

	queue        *workqueue.Queue[string]
	expectations *controller.Expectations

	recorder      record.EventRecorder
	log           *slog.Logger
	burstReplicas int
	// clock times availability (minReadySeconds), expectations and the
	// workqueue.
	clock clock.Clock
}

// New returns a controller reading pods and ReplicaSets from
// opts.Informers, with its event handlers registered; it adds
// controller.ControllerUIDIndex to the pod informer. Nothing runs until
// Run.
func New(opts Options) (*Controller[*appsv1.ReplicaSet], error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	return NewFor(opts, ReplicaSets)
}

// NewFor is New for the objects of kind, whose opts.Common is already
// complete: Complete(kind.Name).
func NewFor[T api.Object](opts Options, kind Kind[T]) (*Controller[T], error) {
	rsInformer := informer.For[T](opts.Informers)
	podInformer := informer.For[*corev1.Pod](opts.Informers)
	if err := controller.EnsureControllerUIDIndex(podInformer); err != nil {
		return nil, fmt.Errorf("%s: %w", kind.Name, err)
	}
	c := newController(opts, kind, rsInformer.GetIndexer(), podInformer.GetIndexer())

	rsReg, err := rsInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.addReplicaSet(obj) },
		UpdateFunc: c.updateReplicaSet,
		DeleteFunc: c.deleteReplicaSet,
	})
	if err != nil {
		c.queue.ShutDown() // its goroutine and metrics go with it
		return nil, fmt.Errorf("%s: %w", kind.Name, err)
	}
	podReg, err := podInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.addPod(obj) },
		UpdateFunc: c.updatePod,
		DeleteFunc: c.deletePod,
	})
	if err != nil {
		c.queue.ShutDown() // its goroutine and metrics go with it
		return nil, fmt.Errorf("%s: %w", kind.Name, err)
	}
	c.hasSynced = []func() bool{rsReg.HasSynced, podReg.HasSynced}
	return c, nil
}

// newController is NewFor without informers: tests hand it indexers they
// fill themselves. opts.Common has its defaults (Complete or WithDefaults),
// and podIndexer has controller.ControllerUIDIndex.
func newController[T api.Object](opts Options, kind Kind[T], rsIndexer, podIndexer informer.Indexer) *Controller[T] {
	c := &Controller[T]{
		kind:          kind,
		rsClient:      client.For[T](opts.Client),
		podClient:     client.For[*corev1.Pod](opts.Client),
		rsLister:      informer.NewLister[T](rsIndexer),
		podIndexer:    podIndexer,
		recorder:      opts.Recorder,
		log:           opts.Logger,
		burstReplicas: opts.BurstReplicas,
		clock:         opts.Clock,
		expectations:  controller.NewExpectations(opts.Clock),
		queue:         controller.NewQueue[string](kind.Name, opts.Common),
	}
	if c.burstReplicas <= 0 {
		c.burstReplicas = DefaultBurstReplicas
	}
	c.podControl = controller.ClientPodControl{Client: c.podClient, Recorder: c.recorder}
	return c
}

// Run waits for the caches to sync, runs workers workers, and blocks until
// ctx is done; then it shuts the queue down and waits for the workers to
// finish what they are doing.
func (c *Controller[T]) Run(ctx context.Context, workers int) {
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

// processNextWorkItem syncs one key, and leaves it to controller.HandleErr
// to decide whether to retry it, forget it or look again later. It returns
// false once the queue is shut down.
func (c *Controller[T]) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	controller.HandleErr(ctx, c.log, c.queue, key, c.sync(ctx, key))
	return true
}

// sync makes one ReplicaSet's pods match its spec and writes its status.
func (c *Controller[T]) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		c.log.Error("bad key", "key", key, "err", err)
		return nil // a malformed key never gets better
	}
	obj, err := c.rsLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		c.expectations.Delete(key)
		return nil // the replica set is gone; its pods are the garbage collector's
	}
	if err != nil {
		return err
	}
	rs := c.kind.AsReplicaSet(obj)
	selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		c.log.Error("invalid selector", slog.String("object", key), slog.Any("err", err))
		return nil // retrying will not fix the selector; an update will enqueue it
	}

	// Read the expectations before the pods: a pod observed in between
	// then makes us wait once more, rather than act on a cache that lacks it.
	canManage := c.expectations.Satisfied(key)
	pods, err := c.claimPods(ctx, obj, selector)
	if err != nil {
		return err
	}

	var manageErr error
	switch {
	case rs.DeletionTimestamp != nil:
		c.log.Debug("being deleted → status only", slog.String("object", key))
	case !canManage:
		adds, dels := c.expectations.Pending(key)
		c.log.Debug(fmt.Sprintf("waiting to observe %d creates and %d deletes → status only", adds, dels),
			slog.String("object", key), slog.Int("creates", adds), slog.Int("deletes", dels))
	default:
		manageErr = c.manageReplicas(ctx, key, obj, rs, pods)
	}

	status := calculateStatus(rs, pods, manageErr, c.clock.Now())
	updated, err := c.updateStatus(ctx, obj, rs, status)
	if err != nil {
		return errors.Join(manageErr, err)
	}
	if manageErr == nil && updated.Spec.MinReadySeconds > 0 &&
		updated.Status.ReadyReplicas == replicasOf(updated) &&
		updated.Status.AvailableReplicas != replicasOf(updated) {
		// Every pod is ready; look again when the last of them has been
		// ready for minReadySeconds and so becomes available.
		c.queue.AddAfter(key, time.Duration(updated.Spec.MinReadySeconds)*time.Second)
	}
	return manageErr
}

// claimPods returns the active pods rs controls, after adopting matching
// orphans and releasing controlled pods that no longer match.
func (c *Controller[T]) claimPods(ctx context.Context, rs T, selector labels.Selector) ([]*corev1.Pod, error) {
	namespace, name, uid := rs.GetNamespace(), rs.GetName(), rs.GetUID()
	candidates, err := controller.OwnedAndOrphans[*corev1.Pod](c.podIndexer, namespace, uid)
	if err != nil {
		return nil, err
	}
	m := &controller.RefManager[*corev1.Pod]{
		Owner:     rs,
		OwnerKind: c.kind.GroupVersionKind,
		Selector:  selector,
		Client:    c.podClient,
		CanAdopt: controller.RecheckOwner(func(ctx context.Context) (T, error) {
			return c.rsClient.Get(ctx, namespace, name)
		}, uid),
	}
	pods, err := m.Claim(ctx, controller.FilterActivePods(candidates))
	if err != nil {
		return nil, fmt.Errorf("claim pods: %w", err)
	}
	return pods, nil
}

// manageReplicas creates or deletes pods until obj (seen as rs) has
// spec.replicas, at most burstReplicas in this sync, and records what it
// expects to observe.
func (c *Controller[T]) manageReplicas(ctx context.Context, key string, obj T, rs *appsv1.ReplicaSet, pods []*corev1.Pod) error {
	want, have := int(replicasOf(rs)), len(pods)
	switch {
	case want > have:
		n := min(want-have, c.burstReplicas)
		c.log.Info(fmt.Sprintf("want %d, have %d → create %d", want, have, n),
			slog.String("object", key), slog.Int("want", want), slog.Int("have", have), slog.Int("create", n))
		c.expectations.ExpectCreations(key, n)
		ref := controller.NewControllerRef(obj, c.kind.GroupVersionKind)
		created, err := controller.SlowStartBatch(n, slowStartInitialBatch, func() error {
			_, err := c.podControl.CreatePod(ctx, &rs.Spec.Template, obj, ref)
			if client.IsTimeout(err) {
				// The server may still create it: keep expecting it,
				// and let the informer (or the timeout) tell.
				return nil
			}
			return err
		})
		// The creates never made (a failed batch stops the rest) will
		// never be observed.
		for range n - created {
			c.expectations.CreationObserved(key)
		}
		if err != nil {
			return fmt.Errorf("create pods: %w", err)
		}
	case want < have:
		n := min(have-want, c.burstReplicas)
		victims := controller.PodsToDelete(pods, n)
		c.log.Info(fmt.Sprintf("want %d, have %d → delete %d", want, have, n),
			slog.String("object", key), slog.Int("want", want), slog.Int("have", have), slog.Int("delete", n))
		podKeys := make([]string, len(victims))
		for i, p := range victims {
			podKeys[i] = controller.PodKey(p)
		}
		c.expectations.ExpectDeletions(key, podKeys)
		errs := make([]error, len(victims))
		var wg sync.WaitGroup
		for i, pod := range victims {
			wg.Go(func() {
				err := c.podControl.DeletePod(ctx, pod.Namespace, pod.Name, obj)
				if err == nil {
					return
				}
				// This deletion will never be observed.
				c.expectations.DeletionObserved(key, controller.PodKey(pod))
				if !client.IsNotFound(err) {
					errs[i] = fmt.Errorf("delete pod %s: %w", pod.Name, err)
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	default:
		c.log.Debug(fmt.Sprintf("want %d, have %d → nothing to do", want, have),
			slog.String("object", key), slog.Int("want", want), slog.Int("have", have))
	}
	return nil
}

// updateStatus writes status unless obj (seen as rs) already has it, and
// returns the view of what was written. A conflict (obj changed since the
// cache saw it) is returned: the change is on its way to the informer,
// which enqueues obj again.
func (c *Controller[T]) updateStatus(ctx context.Context, obj T, rs *appsv1.ReplicaSet, status appsv1.ReplicaSetStatus) (*appsv1.ReplicaSet, error) {
	if apiequality.Semantic.DeepEqual(rs.Status, status) {
		return rs, nil
	}
	written, err := c.rsClient.UpdateStatus(ctx, c.kind.WithStatus(obj, status))
	if err != nil {
		return nil, fmt.Errorf("update status: %w", err)
	}
	updated := c.kind.AsReplicaSet(written)
	c.log.Debug(fmt.Sprintf("status replicas=%d ready=%d available=%d", status.Replicas, status.ReadyReplicas, status.AvailableReplicas),
		slog.String("object", rs.Namespace+"/"+rs.Name), slog.Int("replicas", int(status.Replicas)),
		slog.Int("ready", int(status.ReadyReplicas)), slog.Int("available", int(status.AvailableReplicas)))
	return updated, nil
}

// calculateStatus returns rs's status for its active, claimed pods.
// manageErr, the failure of this sync's creates or deletes, sets the
// ReplicaFailure condition; a sync without failure clears it.
func calculateStatus(rs *appsv1.ReplicaSet, pods []*corev1.Pod, manageErr error, now time.Time) appsv1.ReplicaSetStatus {
	status := *rs.Status.DeepCopy()
	status.ObservedGeneration = rs.Generation
	templateLabels := labels.SelectorFromSet(rs.Spec.Template.Labels)
	var fullyLabeled, ready, available int32
	for _, pod := range pods {
		if templateLabels.Matches(labels.Set(pod.Labels)) {
			fullyLabeled++
		}
		if api.PodIsReady(pod) {
			ready++
		}
		if controller.IsPodAvailable(pod, rs.Spec.MinReadySeconds, now) {
			available++
		}
	}
	status.Replicas = int32(len(pods))
	status.FullyLabeledReplicas = fullyLabeled
	status.ReadyReplicas = ready
	status.AvailableReplicas = available

	failure := findCondition(status.Conditions, appsv1.ReplicaSetReplicaFailure)
	switch {
	case manageErr != nil && failure == nil:
		reason := controller.FailedCreateReason
		if len(pods) > int(replicasOf(rs)) {
			reason = controller.FailedDeleteReason
		}
		status.Conditions = append(status.Conditions, appsv1.ReplicaSetCondition{
			Type:               appsv1.ReplicaSetReplicaFailure,
			Status:             corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now),
			Reason:             reason,
			Message:            manageErr.Error(),
		})
	case manageErr == nil && failure != nil:
		status.Conditions = removeCondition(status.Conditions, appsv1.ReplicaSetReplicaFailure)
	}
	return status
}

// replicasOf is spec.replicas, 1 when unset as the API server defaults it.
func replicasOf(rs *appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}

func findCondition(conds []appsv1.ReplicaSetCondition, t appsv1.ReplicaSetConditionType) *appsv1.ReplicaSetCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func removeCondition(conds []appsv1.ReplicaSetCondition, t appsv1.ReplicaSetConditionType) []appsv1.ReplicaSetCondition {
	var out []appsv1.ReplicaSetCondition
	for _, c := range conds {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}

// Event handlers: they only find the ReplicaSets a change concerns and
// enqueue them, and tell the expectations what was observed.

func (c *Controller[T]) enqueue(rs api.Object) { c.queue.Add(rsKey(rs)) }

func rsKey(rs api.Object) string { return rs.GetNamespace() + "/" + rs.GetName() }

func (c *Controller[T]) addReplicaSet(obj any) {
	if rs, ok := obj.(T); ok {
		c.enqueue(rs)
	}
}

func (c *Controller[T]) updateReplicaSet(oldObj, newObj any) {
	old, ok1 := oldObj.(T)
	cur, ok2 := newObj.(T)
	if !ok1 || !ok2 {
		return
	}
	if old.GetUID() != cur.GetUID() {
		// Deleted and created again under the same name while the watch
		// was down: the old one's expectations must go.
		c.deleteReplicaSet(informer.DeletedFinalStateUnknown{Key: rsKey(old), Obj: old})
	}
	c.enqueue(cur)
}

func (c *Controller[T]) deleteReplicaSet(obj any) {
	rs, ok := controller.ObjectFromDelete[T](obj)
	if !ok {
		return
	}
	key := rsKey(rs)
	c.expectations.Delete(key)
	c.queue.Add(key)
}

func (c *Controller[T]) addPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already being deleted (after a
		// restart, say): for the expectations that is a deletion.
		c.deletePod(pod)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		rs, ok := c.resolveControllerRef(pod.Namespace, ref)
		if !ok {
			return
		}
		c.expectations.CreationObserved(rsKey(rs))
		c.enqueue(rs)
		return
	}
	for _, rs := range c.replicaSetsSelecting(pod) {
		c.enqueue(rs) // it may adopt this orphan
	}
}

func (c *Controller[T]) updatePod(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return // a resync: nothing changed
	}
	labelsChanged := !maps.Equal(old.Labels, cur.Labels)
	if cur.DeletionTimestamp != nil {
		// A graceful deletion began: the ReplicaSet should replace the
		// pod now, not when the kubelet is done with it.
		c.deletePod(cur)
		if labelsChanged {
			c.deletePod(old)
		}
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !sameRef(curRef, oldRef)
	if refChanged && oldRef != nil {
		if rs, ok := c.resolveControllerRef(old.Namespace, oldRef); ok {
			c.enqueue(rs) // it lost a pod
		}
	}
	if curRef != nil {
		rs, ok := c.resolveControllerRef(cur.Namespace, curRef)
		if !ok {
			return
		}
		c.enqueue(rs)
		if minReady := c.kind.AsReplicaSet(rs).Spec.MinReadySeconds; !api.PodIsReady(old) && api.PodIsReady(cur) && minReady > 0 {
			// Look again once the pod has been ready long enough to be
			// available.
			c.queue.AddAfter(rsKey(rs), time.Duration(minReady)*time.Second+time.Second)
		}
		return
	}
	if labelsChanged || refChanged {
		for _, rs := range c.replicaSetsSelecting(cur) {
			c.enqueue(rs)
		}
	}
}

func (c *Controller[T]) deletePod(obj any) {
	pod, ok := controller.ObjectFromDelete[*corev1.Pod](obj)
	if !ok {
		return
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return // an orphan's deletion changes no replica set
	}
	rs, ok := c.resolveControllerRef(pod.Namespace, ref)
	if !ok {
		return
	}
	key := rsKey(rs)
	c.expectations.DeletionObserved(key, controller.PodKey(pod))
	c.queue.Add(key)
}

// resolveControllerRef returns the object of kind T that ref names, if
// the cache has it with the same uid.
func (c *Controller[T]) resolveControllerRef(namespace string, ref *metav1.OwnerReference) (T, bool) {
	var none T
	gvk := c.kind.GroupVersionKind
	if ref.Kind != gvk.Kind || ref.APIVersion != gvk.GroupVersion().String() {
		return none, false
	}
	rs, err := c.rsLister.Get(namespace, ref.Name)
	if err != nil || rs.GetUID() != ref.UID {
		return none, false
	}
	return rs, true
}

// replicaSetsSelecting returns the objects in pod's namespace whose
// selector matches its labels: those that may adopt it.
func (c *Controller[T]) replicaSetsSelecting(pod *corev1.Pod) []T {
	var out []T
	for _, rs := range c.rsLister.ByNamespace(pod.Namespace).List(nil) {
		selector, err := metav1.LabelSelectorAsSelector(c.kind.AsReplicaSet(rs).Spec.Selector)
		if err != nil || selector.Empty() {
			continue
		}
		if selector.Matches(labels.Set(pod.Labels)) {
			out = append(out, rs)
		}
	}
	return out
}

func sameRef(a, b *metav1.OwnerReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID
}
