// Package disruption is the disruption controller: it keeps the status of
// every PodDisruptionBudget, which the eviction subresource reads to decide
// whether a pod may go, as kube-controller-manager's disruption controller
// does.
//
// For each budget a sync finds the pods its selector selects, works out
// how many pods there should be (expectedPods) and how many of them must
// stay healthy (desiredHealthy), counts the Ready ones (currentHealthy),
// and writes disruptionsAllowed = currentHealthy - desiredHealthy (never
// below 0, and 0 while no pod is expected), with the DisruptionAllowed
// condition: SufficientPods or InsufficientPods.
//
// Properties:
//
//   - minAvailable as a number: expectedPods is the number of selected
//     pods and desiredHealthy is minAvailable. A percentage, or
//     maxUnavailable: expectedPods is the sum of the scales of the pods'
//     controllers (a ReplicationController's, a ReplicaSet's, a
//     Deployment's for the pods of its ReplicaSets, or the /scale
//     subresource of any other kind that serves one, found by discovery),
//     and the bound is rounded up.
//   - A pod without a controller is left out of that sum, with an
//     UnmanagedPods Event; a pod whose controller has no scale fails the
//     sync (CalculateExpectedPodCountFailed, NoControllers) and the budget
//     is written as allowing nothing (the SyncFailed reason): a budget that
//     cannot be computed fails closed.
//   - A pod the eviction subresource has put in status.disruptedPods does
//     not count as healthy for 2 minutes (DeletionTimeout), or until it is
//     gone or being deleted; the budget is synced again when an entry is
//     due to expire.
//   - The status is written through the status subresource only when it
//     changed, with observedGeneration: the eviction subresource refuses
//     evictions (429) until the budget's current spec has been observed.
//
// Handlers only enqueue budget keys: a pod change enqueues every budget of
// its namespace that selects the pod's old or new labels. One worker runs,
// as in kube-controller-manager, which has no --concurrent flag for it.
package disruption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Name is the controller's kube-controller-manager name: its --controllers
// name, its logger's controller attribute and its workqueue's name.
const Name = "disruption"

// DeletionTimeout is how long a pod in a budget's disruptedPods is taken
// for being deleted: past it, the eviction that put it there is taken to
// have failed, and the pod counts again.
const DeletionTimeout = 2 * time.Minute

// Options is what the controller needs: the options every controller takes
// (Client and Informers required); it has no knobs of its own. Its
// Recorder gets the budgets' Events.
type Options struct {
	controller.Common
}

// Controller keeps the status of PodDisruptionBudgets. Its queue holds
// budget keys.
type Controller struct {
	pdbs      *client.Client[*policyv1.PodDisruptionBudget]
	rest      *client.RESTClient // scales of kinds with no lister here
	pdbLister informer.Lister[*policyv1.PodDisruptionBudget]
	podLister informer.Lister[*corev1.Pod]
	rcLister  informer.Lister[*corev1.ReplicationController]
	rsLister  informer.Lister[*appsv1.ReplicaSet]
	dLister   informer.Lister[*appsv1.Deployment]
	synced    []func() bool

	queue    *workqueue.Queue[string]
	recorder record.EventRecorder
	log      *slog.Logger
	clock    clock.Clock
}

// New returns a controller reading budgets, pods, ReplicationControllers,
// ReplicaSets and Deployments from opts.Informers, with its event handlers
// registered. Nothing runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	pdbInformer := informer.For[*policyv1.PodDisruptionBudget](opts.Informers)
	podInformer := informer.For[*corev1.Pod](opts.Informers)
	rcInformer := informer.For[*corev1.ReplicationController](opts.Informers)
	rsInformer := informer.For[*appsv1.ReplicaSet](opts.Informers)
	dInformer := informer.For[*appsv1.Deployment](opts.Informers)
	c := &Controller{
		pdbs:      client.For[*policyv1.PodDisruptionBudget](opts.Client),
		rest:      opts.Client,
		pdbLister: pdbInformer.Lister(),
		podLister: podInformer.Lister(),
		rcLister:  rcInformer.Lister(),
		rsLister:  rsInformer.Lister(),
		dLister:   dInformer.Lister(),
		queue:     controller.NewQueue[string](Name, opts.Common),
		recorder:  opts.Recorder,
		log:       opts.Logger,
		clock:     opts.Clock,
	}
	pdbReg, err := pdbInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.enqueue(obj) },
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	podReg, err := podInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { c.podChanged(nil, obj) },
		UpdateFunc: c.podChanged,
		DeleteFunc: func(obj any) { c.podChanged(nil, obj) },
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c.synced = []func() bool{pdbReg.HasSynced, podReg.HasSynced, rcInformer.HasSynced, rsInformer.HasSynced, dInformer.HasSynced}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	if tomb, ok := obj.(informer.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(api.Object); ok {
		c.queue.Add(o.GetNamespace() + "/" + o.GetName())
	}
}

// podChanged queues every budget that selects the pod, as it is and (on an
// update) as it was.
func (c *Controller) podChanged(oldObj, obj any) {
	if tomb, ok := obj.(informer.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	old, _ := oldObj.(*corev1.Pod)
	if old != nil && old.ResourceVersion == pod.ResourceVersion {
		return // a resync: nothing about the pod changed
	}
	for _, pdb := range c.pdbLister.ByNamespace(pod.Namespace).List(nil) {
		if api.PodDisruptionBudgetMatches(pdb, pod.Labels) || (old != nil && !maps.Equal(old.Labels, pod.Labels) && api.PodDisruptionBudgetMatches(pdb, old.Labels)) {
			c.queue.Add(pdb.Namespace + "/" + pdb.Name)
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

// processNextWorkItem syncs one budget, and leaves it to
// controller.HandleErr to decide whether to retry it, forget it or look
// again later. It returns false once the queue is shut down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	controller.HandleErr(ctx, c.log, c.queue, key, c.sync(ctx, key))
	return true
}

// sync brings the status of budget key up to date with its pods. A sync
// that cannot compute the status writes one that allows no disruption
// (failSafe); a conflict is only retried.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		c.log.Error("bad key", slog.String("key", key), slog.Any("err", err))
		return nil // a malformed key never gets better
	}
	pdb, err := c.pdbLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		return nil // the budget is gone; nothing to keep
	}
	if err != nil {
		return err
	}
	err = c.trySync(ctx, pdb)
	if client.IsConflict(err) {
		return err
	}
	if err != nil {
		c.log.Warn("sync failed → allow no disruption", slog.String("object", key), slog.Any("err", err))
		return c.failSafe(ctx, pdb, err)
	}
	return nil
}

// trySync computes and writes pdb's status, and asks to look again when
// the first of its disruptedPods entries is due to expire.
func (c *Controller) trySync(ctx context.Context, pdb *policyv1.PodDisruptionBudget) error {
	key := pdb.Namespace + "/" + pdb.Name
	pods := c.podsFor(pdb)
	if len(pods) == 0 {
		c.recorder.Event(pdb, corev1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	expected, desired, unmanaged, err := c.expectedPodCount(ctx, pdb, pods)
	if err != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", err)
		return err
	}
	if len(unmanaged) > 0 {
		c.log.Debug("pods without a controller are left out of the expected count", slog.String("object", key), slog.Any("pods", unmanaged))
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "UnmanagedPods", "Pods selected by this PodDisruptionBudget (selector: %v) were found "+
			"to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. "+
			"To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.", pdb.Spec.Selector)
	}
	now := c.clock.Now()
	disrupted, recheck := c.disruptedPods(pdb, pods, now)
	healthy := countHealthy(pods, disrupted, now)
	if err := c.updateStatus(ctx, pdb, healthy, desired, expected, disrupted); err != nil {
		return err
	}
	if recheck != nil {
		c.queue.AddAfter(key, recheck.Sub(now))
	}
	return nil
}

// podsFor lists the pods pdb selects, from the cache.
func (c *Controller) podsFor(pdb *policyv1.PodDisruptionBudget) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range c.podLister.ByNamespace(pdb.Namespace).List(nil) {
		if api.PodDisruptionBudgetMatches(pdb, pod.Labels) {
			out = append(out, pod)
		}
	}
	return out
}

// expectedPodCount is how many pods pdb expects and how many of them must
// be healthy, and the names of the pods left out of the count for having
// no controller.
func (c *Controller) expectedPodCount(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) (expected, desired int32, unmanaged []string, err error) {
	switch spec := pdb.Spec; {
	case spec.MaxUnavailable != nil:
		if expected, unmanaged, err = c.expectedScale(ctx, pdb, pods); err != nil {
			return 0, 0, nil, err
		}
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		desired = max(expected-int32(maxUnavailable), 0)
	case spec.MinAvailable != nil && spec.MinAvailable.Type == intstr.Int:
		expected, desired = int32(len(pods)), spec.MinAvailable.IntVal
	case spec.MinAvailable != nil:
		if expected, unmanaged, err = c.expectedScale(ctx, pdb, pods); err != nil {
			return 0, 0, nil, err
		}
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		desired = int32(minAvailable)
	}
	return expected, desired, unmanaged, nil
}

// expectedScale sums the scales of the controllers of pdb's pods, each
// once.
func (c *Controller) expectedScale(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) (int32, []string, error) {
	scales := map[types.UID]int32{}
	var unmanaged []string
	for _, pod := range pods {
		ref := metav1.GetControllerOf(pod)
		if ref == nil {
			unmanaged = append(unmanaged, pod.Name)
			continue
		}
		if _, seen := scales[ref.UID]; seen {
			continue
		}
		uid, scale, err := c.scaleOf(ctx, pod.Namespace, ref)
		if err != nil {
			return 0, nil, err
		}
		if uid == "" {
			err := fmt.Errorf("found no controllers for pod %q", pod.Name)
			c.recorder.Event(pdb, corev1.EventTypeWarning, "NoControllers", err.Error())
			return 0, nil, err
		}
		scales[uid] = scale
	}
	var sum int32
	for _, n := range scales {
		sum += n
	}
	return sum, unmanaged, nil
}

// scaleOf finds the controller ref names and its desired replicas: a
// ReplicaSet's own (or, for a Deployment's ReplicaSet, the Deployment's,
// under the Deployment's uid), a ReplicationController's, or else the
// /scale subresource of the ref's kind. An empty uid: no such controller.
func (c *Controller) scaleOf(ctx context.Context, namespace string, ref *metav1.OwnerReference) (types.UID, int32, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "", 0, err
	}
	switch (schema.GroupKind{Group: gv.Group, Kind: ref.Kind}) {
	case schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}:
		rs, err := c.rsLister.Get(namespace, ref.Name)
		if err != nil || rs.UID != ref.UID {
			return "", 0, nil
		}
		if dref := metav1.GetControllerOf(rs); dref != nil && dref.Kind == "Deployment" {
			d, err := c.dLister.Get(namespace, dref.Name)
			if err != nil || d.UID != dref.UID {
				return "", 0, nil
			}
			return d.UID, replicas(d.Spec.Replicas), nil
		}
		return rs.UID, replicas(rs.Spec.Replicas), nil
	case schema.GroupKind{Group: "", Kind: "ReplicationController"}:
		rc, err := c.rcLister.Get(namespace, ref.Name)
		if err != nil || rc.UID != ref.UID {
			return "", 0, nil
		}
		return rc.UID, replicas(rc.Spec.Replicas), nil
	}
	return c.scaleSubresource(ctx, namespace, gv, ref)
}

// scaleSubresource reads the Scale of the object ref names, of a kind this
// controller has no lister for (a StatefulSet, a custom resource), as
// kube's scale client does: discovery maps the kind to its resource,
// which must serve /scale.
func (c *Controller) scaleSubresource(ctx context.Context, namespace string, gv schema.GroupVersion, ref *metav1.OwnerReference) (types.UID, int32, error) {
	base := "/apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		base = "/api/" + gv.Version
	}
	var list metav1.APIResourceList
	if err := c.rest.Do(ctx, "GET", base, nil, "", nil, &list); err != nil {
		return "", 0, fmt.Errorf("discover %s: %w", gv, err)
	}
	plural, scalable := "", false
	for _, r := range list.APIResources {
		if r.Kind == ref.Kind && !isSubresource(r.Name) {
			plural = r.Name
		}
	}
	for _, r := range list.APIResources {
		scalable = scalable || (plural != "" && r.Name == plural+"/scale")
	}
	if plural == "" {
		return "", 0, fmt.Errorf("no resource of kind %s in %s", ref.Kind, gv)
	}
	gr := schema.GroupResource{Group: gv.Group, Resource: plural}
	if !scalable {
		return "", 0, fmt.Errorf("%s does not implement the scale subresource", gr)
	}
	var sc autoscalingv1.Scale
	err := c.rest.Do(ctx, "GET", base+"/namespaces/"+namespace+"/"+plural+"/"+ref.Name+"/scale", nil, "", nil, &sc)
	if apierrors.IsNotFound(err) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	if sc.UID != ref.UID {
		return "", 0, nil
	}
	return sc.UID, sc.Spec.Replicas, nil
}

func isSubresource(name string) bool { return strings.Contains(name, "/") }

func replicas(n *int32) int32 {
	if n == nil {
		return 1
	}
	return *n
}

// disruptedPods keeps the entries of pdb's disruptedPods whose pod is
// still there, not being deleted, and not past DeletionTimeout, and
// returns when the first of them expires (nil: none). A pod whose eviction
// never deleted it gets a NotDeleted Event.
func (c *Controller) disruptedPods(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, now time.Time) (map[string]metav1.Time, *time.Time) {
	out := map[string]metav1.Time{}
	var recheck *time.Time
	if pdb.Status.DisruptedPods == nil {
		return out, nil
	}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue // its deletion is under way: the entry did its job
		}
		at, ok := pdb.Status.DisruptedPods[pod.Name]
		if !ok {
			continue
		}
		due := at.Add(DeletionTimeout)
		if due.Before(now) {
			c.log.Info("pod was expected to be deleted but it wasn't → counted again",
				slog.String("object", pdb.Namespace+"/"+pdb.Name), slog.String("pod", pod.Name))
			c.recorder.Eventf(pod, corev1.EventTypeWarning, "NotDeleted", "Pod was expected by PDB %s/%s to be deleted but it wasn't", pdb.Namespace, pdb.Name)
			continue
		}
		if recheck == nil || due.Before(*recheck) {
			recheck = &due
		}
		out[pod.Name] = at
	}
	return out, recheck
}

// countHealthy counts the Ready pods that are neither being deleted nor
// about to be (in disrupted and not yet expired).
func countHealthy(pods []*corev1.Pod, disrupted map[string]metav1.Time, now time.Time) int32 {
	var n int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if at, ok := disrupted[pod.Name]; ok && at.Add(DeletionTimeout).After(now) {
			continue
		}
		if api.PodIsReady(pod) {
			n++
		}
	}
	return n
}

// updateStatus writes pdb's status from the counts, unless it already says
// exactly that.
func (c *Controller) updateStatus(ctx context.Context, pdb *policyv1.PodDisruptionBudget, healthy, desired, expected int32, disrupted map[string]metav1.Time) error {
	allowed := healthy - desired
	if expected <= 0 || allowed <= 0 {
		allowed = 0 // a budget that expects no pod yet is safe when its first ones appear
	}
	key := pdb.Namespace + "/" + pdb.Name
	st := pdb.Status
	if st.CurrentHealthy == healthy && st.DesiredHealthy == desired && st.ExpectedPods == expected &&
		st.DisruptionsAllowed == allowed && apiequality.Semantic.DeepEqual(st.DisruptedPods, disrupted) &&
		st.ObservedGeneration == pdb.Generation && conditionUpToDate(pdb) {
		c.log.Debug(fmt.Sprintf("%d healthy, %d desired → %d allowed, unchanged", healthy, desired, allowed), slog.String("object", key))
		return nil
	}
	next := pdb.DeepCopy()
	next.Status = policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: healthy, DesiredHealthy: desired, ExpectedPods: expected,
		DisruptionsAllowed: allowed, DisruptedPods: disrupted,
		ObservedGeneration: pdb.Generation, Conditions: next.Status.Conditions,
	}
	api.SetDisruptionAllowedCondition(next)
	if _, err := c.pdbs.UpdateStatus(ctx, next); err != nil {
		return err
	}
	c.log.Info(fmt.Sprintf("%d healthy, %d desired of %d expected → %d disruptions allowed", healthy, desired, expected, allowed),
		slog.String("object", key), slog.Int("currentHealthy", int(healthy)), slog.Int("desiredHealthy", int(desired)),
		slog.Int("expectedPods", int(expected)), slog.Int("disruptionsAllowed", int(allowed)))
	return nil
}

// conditionUpToDate reports whether pdb's DisruptionAllowed condition says
// what its status does, for the generation it observed.
func conditionUpToDate(pdb *policyv1.PodDisruptionBudget) bool {
	cond := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if cond == nil || cond.ObservedGeneration != pdb.Status.ObservedGeneration {
		return false
	}
	if pdb.Status.DisruptionsAllowed > 0 {
		return cond.Status == metav1.ConditionTrue && cond.Reason == policyv1.SufficientPodsReason
	}
	return cond.Status == metav1.ConditionFalse && cond.Reason == policyv1.InsufficientPodsReason
}

// failSafe writes pdb as allowing no disruption, with the SyncFailed
// reason and err as the message: if its status cannot be computed, no
// eviction may rely on it.
func (c *Controller) failSafe(ctx context.Context, pdb *policyv1.PodDisruptionBudget, err error) error {
	next := pdb.DeepCopy()
	next.Status.DisruptionsAllowed = 0
	if next.Status.Conditions == nil {
		next.Status.Conditions = []metav1.Condition{}
	}
	apimeta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{
		Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: policyv1.SyncFailedReason,
		Message: err.Error(), ObservedGeneration: next.Status.ObservedGeneration,
	})
	if _, uerr := c.pdbs.UpdateStatus(ctx, next); uerr != nil {
		return errors.Join(err, uerr)
	}
	return nil
}
