// Package daemonset is the DaemonSet controller: it keeps one pod of each
// DaemonSet on every node that should run one, and rolls a new template
// out node by node, as kube-controller-manager's daemonset controller
// does.
//
// Design, one line per file:
//
//   - daemonset.go: the controller (Options, New, Run, the sync story),
//     manage (which nodes need a pod, which pods must go) and the event
//     handlers.
//   - nodes.go: which nodes a DaemonSet's pod belongs on (node selector,
//     required node affinity, taints against tolerations, the default
//     tolerations of daemon pods) and the node affinity that pins a pod to
//     its node.
//   - history.go: ControllerRevisions, one per template, and the history
//     limit.
//   - update.go: the RollingUpdate strategy, with maxUnavailable or
//     maxSurge.
//   - status.go: the status counts.
//   - backoff.go: the slowing replacement of failed pods.
//
// A sync reads like this: find the nodes that should run the DaemonSet's
// pod; make sure the current template has a ControllerRevision, whose hash
// labels new pods; create a pod for each such node that has none, and
// delete the pods on nodes that should not run one, extra pods, and failed
// ones (at a slowing pace); then, if nothing was in flight, replace old
// pods with the RollingUpdate strategy (OnDelete waits for the user to
// delete them); trim the history; and write the status.
//
// Properties:
//
//   - A pod is created for a node with a required node affinity
//     "metadata.name In [node]" in place of the template's: the scheduler
//     binds it there, as kube's default scheduler binds daemon pods. It
//     carries the labels controller-revision-hash and
//     pod-template-generation and the default daemon tolerations.
//   - A node qualifies when the pod would match its name, node selector
//     and required node affinity and tolerate its NoSchedule and NoExecute
//     taints; a pod already on a node stays while only NoSchedule taints
//     are untolerated.
//   - No node gets a second pod from a cache that is behind: after
//     creating or deleting, a DaemonSet waits until its informer has
//     observed every one of those writes (or the expectations expire).
//   - RollingUpdate never has more than maxUnavailable nodes without an
//     available pod of the current template (maxSurge 0), or more than
//     maxSurge nodes running two pods (maxUnavailable 0); both are
//     percentages of the desired number, rounded up.
//   - A DaemonSet being deleted is left alone: its pods and revisions are
//     the garbage collector's.
//
// Handlers only enqueue keys; every decision is made in sync and logged as
// one line: "3 nodes want a pod, 1 has none → create 1, delete 0".
package daemonset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

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
const Name = "daemonset"

// The reasons of the controller's own Events, kube's; pods' creates and
// deletes are SuccessfulCreate, FailedCreate, SuccessfulDelete and
// FailedDelete (package controller). kube's FailedPlacement is not among
// them: since the scheduler places daemon pods, its FailedScheduling says
// why a pod pinned to a node does not fit there.
const (
	// SelectingAllReason: the selector is empty and would select every pod.
	SelectingAllReason = "SelectingAll"
	// FailedDaemonPodReason: a daemon pod failed and is deleted, to be
	// replaced.
	FailedDaemonPodReason = "FailedDaemonPod"
	// SucceededDaemonPodReason: a daemon pod exited and is deleted, to be
	// replaced.
	SucceededDaemonPodReason = "SucceededDaemonPod"
)

// DefaultBurstReplicas is how many pods one sync creates or deletes at
// most, upstream's BurstReplicas.
const DefaultBurstReplicas = 250

// The failed-pod back-off: 1s, doubling, up to 15m.
const (
	failedPodsBackoffInitial = time.Second
	failedPodsBackoffMax     = 15 * time.Minute
)

// TemplateGenerationLabel is the label of a daemon pod that names the
// template generation it was made from (extensions/v1beta1's
// DaemonSetTemplateGenerationKey).
const TemplateGenerationLabel = "pod-template-generation"

var controllerKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// Options is what the controller needs: the options every controller takes
// (Client and Informers required), and its own.
type Options struct {
	controller.Common
	// BurstReplicas caps the creates or deletes of one sync; 0 means
	// DefaultBurstReplicas.
	BurstReplicas int
}

// Controller is the DaemonSet controller. Create it with New, then Run it.
type Controller struct {
	dsClient   *client.Client[*appsv1.DaemonSet]
	crClient   *client.Client[*appsv1.ControllerRevision]
	podClient  *client.Client[*corev1.Pod] // adoption, release and relabel patches
	podControl controller.PodControl       // creates and deletes

	dsLister   informer.Lister[*appsv1.DaemonSet]
	nodeLister informer.Lister[*corev1.Node]
	crLister   informer.Lister[*appsv1.ControllerRevision]
	podIndexer informer.Indexer // with controller.ControllerUIDIndex
	hasSynced  []func() bool

	queue        *workqueue.Queue[string]
	expectations *controller.Expectations
	backoff      *backoff

	recorder      record.EventRecorder
	log           *slog.Logger
	burstReplicas int
	clock         clock.Clock
}

// New returns a controller reading DaemonSets, ControllerRevisions, pods
// and nodes from opts.Informers, with its event handlers registered; it
// adds controller.ControllerUIDIndex to the pod informer. Nothing runs
// until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	dsInformer := informer.For[*appsv1.DaemonSet](opts.Informers)
	crInformer := informer.For[*appsv1.ControllerRevision](opts.Informers)
	podInformer := informer.For[*corev1.Pod](opts.Informers)
	nodeInformer := informer.For[*corev1.Node](opts.Informers)
	if err := controller.EnsureControllerUIDIndex(podInformer); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c := &Controller{
		dsClient:      client.For[*appsv1.DaemonSet](opts.Client),
		crClient:      client.For[*appsv1.ControllerRevision](opts.Client),
		podClient:     client.For[*corev1.Pod](opts.Client),
		dsLister:      dsInformer.Lister(),
		nodeLister:    nodeInformer.Lister(),
		crLister:      crInformer.Lister(),
		podIndexer:    podInformer.GetIndexer(),
		recorder:      opts.Recorder,
		log:           opts.Logger,
		burstReplicas: opts.BurstReplicas,
		clock:         opts.Clock,
		expectations:  controller.NewExpectations(opts.Clock),
		backoff:       newBackoff(failedPodsBackoffInitial, failedPodsBackoffMax),
		queue:         controller.NewQueue[string](Name, opts.Common),
	}
	if c.burstReplicas <= 0 {
		c.burstReplicas = DefaultBurstReplicas
	}
	c.podControl = controller.ClientPodControl{Client: c.podClient, Recorder: c.recorder}

	handlers := []struct {
		inf interface {
			AddEventHandler(informer.ResourceEventHandler) (*informer.HandlerRegistration, error)
		}
		h informer.ResourceEventHandlerFuncs
	}{
		{dsInformer, informer.ResourceEventHandlerFuncs{AddFunc: func(obj any, _ bool) { c.addDaemonSet(obj) }, UpdateFunc: c.updateDaemonSet, DeleteFunc: c.deleteDaemonSet}},
		{crInformer, informer.ResourceEventHandlerFuncs{AddFunc: func(obj any, _ bool) { c.revisionChanged(obj) }, UpdateFunc: c.updateRevision, DeleteFunc: c.revisionChanged}},
		{podInformer, informer.ResourceEventHandlerFuncs{AddFunc: func(obj any, _ bool) { c.addPod(obj) }, UpdateFunc: c.updatePod, DeleteFunc: c.deletePod}},
		{nodeInformer, informer.ResourceEventHandlerFuncs{AddFunc: func(obj any, _ bool) { c.addNode(obj) }, UpdateFunc: c.updateNode, DeleteFunc: c.deleteNode}},
	}
	for _, h := range handlers {
		reg, err := h.inf.AddEventHandler(h.h)
		if err != nil {
			c.queue.ShutDown() // its goroutine and metrics go with it
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		c.hasSynced = append(c.hasSynced, reg.HasSynced)
	}
	return c, nil
}

// Run waits for the caches to sync, runs workers workers, and blocks until
// ctx is done; then it shuts the queue down and waits for the workers to
// finish what they are doing.
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
	wg.Go(func() { c.collectBackoff(ctx) })
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	c.log.Info("stopped")
}

// collectBackoff forgets, every minute, the failed-pod back-offs that
// have long been quiet, until ctx is done.
func (c *Controller) collectBackoff(ctx context.Context) {
	for clock.Sleep(ctx, c.clock, time.Minute) {
		c.backoff.gc(c.clock.Now())
	}
}

// processNextWorkItem syncs one key, and leaves it to controller.HandleErr
// to decide whether to retry it, forget it or look again later. It returns
// false once the queue is shut down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	controller.HandleErr(ctx, c.log, c.queue, key, c.sync(ctx, key))
	return true
}

// sync is the story of the package doc, for one DaemonSet.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		c.log.Error("bad key", "key", key, "err", err)
		return nil // a malformed key never gets better
	}
	ds, err := c.dsLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		c.expectations.Delete(key)
		return nil // the daemon set is gone; its pods and revisions are the garbage collector's
	}
	if err != nil {
		return err
	}
	if sel := ds.Spec.Selector; sel == nil || len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		c.recorder.Eventf(ds, corev1.EventTypeWarning, SelectingAllReason, "This daemon set is selecting all pods. A non-empty selector is required.")
		return nil // the API server refuses such a selector; nothing to do until it changes
	}
	if ds.DeletionTimestamp != nil {
		c.log.Debug("being deleted → nothing to do", slog.String("object", key))
		return nil // its revisions may already be gone, so no status can be trusted
	}
	nodes := c.nodeLister.List(nil)

	cur, old, err := c.constructHistory(ctx, ds)
	if err != nil {
		return fmt.Errorf("construct revisions: %w", err)
	}
	hash := cur.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]

	// Read the expectations before the pods: a pod observed in between
	// then makes us wait once more, rather than act on a cache that lacks it.
	canManage := c.expectations.Satisfied(key)
	pods, err := c.claimPods(ctx, ds)
	if err != nil {
		return err
	}
	nodeToPods := podsByNode(pods, false)
	if !canManage {
		adds, dels := c.expectations.Pending(key)
		c.log.Debug(fmt.Sprintf("waiting to observe %d creates and %d deletes → status only", adds, dels),
			slog.String("object", key), slog.Int("creates", adds), slog.Int("deletes", dels))
		return c.updateStatus(ctx, ds, nodes, nodeToPods, hash, false)
	}

	if err := c.manage(ctx, ds, nodes, nodeToPods, hash); err != nil {
		return err
	}
	if c.expectations.Satisfied(key) && ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if err := c.rollingUpdate(ctx, ds, nodes, nodeToPods, hash); err != nil {
			return err
		}
	}
	if err := c.cleanupHistory(ctx, ds, pods, old); err != nil {
		return fmt.Errorf("clean up revisions: %w", err)
	}
	return c.updateStatus(ctx, ds, nodes, nodeToPods, hash, true)
}

// claimPods returns the pods ds controls, after adopting matching orphans
// and releasing controlled pods that no longer match. Unlike a
// ReplicaSet's, they include the failed ones, which manage replaces.
func (c *Controller) claimPods(ctx context.Context, ds *appsv1.DaemonSet) ([]*corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, err
	}
	candidates, err := controller.OwnedAndOrphans[*corev1.Pod](c.podIndexer, ds.Namespace, ds.UID)
	if err != nil {
		return nil, err
	}
	m := &controller.RefManager[*corev1.Pod]{
		Owner: ds, OwnerKind: controllerKind, Selector: selector, Client: c.podClient,
		CanAdopt: controller.RecheckOwner(func(ctx context.Context) (*appsv1.DaemonSet, error) {
			return c.dsClient.Get(ctx, ds.Namespace, ds.Name)
		}, ds.UID),
	}
	pods, err := m.Claim(ctx, candidates)
	if err != nil {
		return nil, fmt.Errorf("claim pods: %w", err)
	}
	return pods, nil
}

// podsByNode groups pods by the node each is bound or pinned to. A pod
// that has finished and is being deleted is left out unless
// includeDeletedTerminal.
func podsByNode(pods []*corev1.Pod, includeDeletedTerminal bool) map[string][]*corev1.Pod {
	out := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		terminal := pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
		if !includeDeletedTerminal && terminal && pod.DeletionTimestamp != nil {
			continue
		}
		node, err := targetNode(pod)
		if err != nil {
			continue // not ours to place: no node names it
		}
		out[node] = append(out[node], pod)
	}
	return out
}

// manage creates a pod on every node that should run one and has none,
// and deletes the pods on nodes that should not run one, the extra pods
// of a node, its finished pods (failed ones at a slowing pace), and
// unbound pods pinned to nodes that are gone.
func (c *Controller) manage(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, nodeToPods map[string][]*corev1.Pod, hash string) error {
	var needPods, toDelete []string
	var failed, wanted int
	for _, node := range nodes {
		need, del, nFailed := c.podsShouldBeOnNode(ds, node, nodeToPods[node.Name], hash)
		if shouldRun, _ := nodeShouldRunDaemonPod(node, ds); shouldRun {
			wanted++
		}
		needPods = append(needPods, need...)
		toDelete = append(toDelete, del...)
		failed += nFailed
	}
	toDelete = append(toDelete, unscheduledPodsOnMissingNodes(nodes, nodeToPods)...)

	if len(needPods)+len(toDelete) == 0 {
		c.log.Debug(fmt.Sprintf("%d nodes want a pod, every one has it → nothing to do", wanted),
			slog.String("object", dsKey(ds)), slog.Int("want", wanted))
	} else {
		c.log.Info(fmt.Sprintf("%d nodes want a pod, %d have none → create %d, delete %d", wanted, len(needPods), len(needPods), len(toDelete)),
			slog.String("object", dsKey(ds)), slog.Int("want", wanted), slog.Any("create", needPods), slog.Any("delete", toDelete))
	}
	if err := c.syncNodes(ctx, ds, toDelete, needPods, hash); err != nil {
		return err
	}
	if failed > 0 {
		// An error, so that the queue's rate limit keeps a pod the kubelet
		// keeps failing from being replaced in a hot loop.
		return fmt.Errorf("deleted %d failed pods of DaemonSet %s", failed, dsKey(ds))
	}
	return nil
}

// podsShouldBeOnNode returns, for one node, whether it needs a pod (its
// name, or nothing), the names of the pods to delete there, and how many
// of those failed.
func (c *Controller) podsShouldBeOnNode(ds *appsv1.DaemonSet, node *corev1.Node, pods []*corev1.Pod, hash string) (need, toDelete []string, failed int) {
	shouldRun, shouldContinueRunning := nodeShouldRunDaemonPod(node, ds)
	switch {
	case shouldRun && len(pods) == 0:
		return []string{node.Name}, nil, 0
	case shouldContinueRunning:
		var running []*corev1.Pod
		for _, pod := range pods {
			if pod.DeletionTimestamp != nil {
				continue
			}
			switch pod.Status.Phase {
			case corev1.PodFailed:
				backoffKey := string(ds.UID) + "/" + node.Name
				now := c.clock.Now()
				if in, left := c.backoff.inBackoff(backoffKey, now); in {
					c.log.Debug(fmt.Sprintf("failed pod %s on node %s → wait %s before deleting it", pod.Name, node.Name, left.Round(time.Millisecond)),
						slog.String("object", dsKey(ds)), slog.String("pod", pod.Name), slog.String("node", node.Name))
					c.queue.AddAfter(dsKey(ds), left)
					continue
				}
				c.backoff.next(backoffKey, now)
				msg := fmt.Sprintf("Found failed daemon pod %s/%s on node %s, will try to kill it", pod.Namespace, pod.Name, node.Name)
				c.recorder.Eventf(ds, corev1.EventTypeWarning, FailedDaemonPodReason, "%s", msg)
				toDelete = append(toDelete, pod.Name)
				failed++
			case corev1.PodSucceeded:
				msg := fmt.Sprintf("Found succeeded daemon pod %s/%s on node %s, will try to delete it", pod.Namespace, pod.Name, node.Name)
				c.recorder.Eventf(ds, corev1.EventTypeNormal, SucceededDaemonPodReason, "%s", msg)
				toDelete = append(toDelete, pod.Name)
			default:
				running = append(running, pod)
			}
		}
		if len(running) <= 1 {
			return nil, toDelete, failed
		}
		slices.SortFunc(running, olderFirst)
		if !allowsSurge(ds) {
			// One pod per node: the oldest stays.
			for _, pod := range running[1:] {
				toDelete = append(toDelete, pod.Name)
			}
			return nil, toDelete, failed
		}
		// Surging: the oldest new pod and the oldest old one may both stay
		// while the new one is not yet available and the old one ready.
		var oldestNew, oldestOld *corev1.Pod
		for _, pod := range running {
			isNew := pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash
			switch {
			case isNew && oldestNew == nil:
				oldestNew = pod
			case !isNew && oldestOld == nil:
				oldestOld = pod
			default:
				toDelete = append(toDelete, pod.Name)
			}
		}
		if oldestNew != nil && oldestOld != nil &&
			(!api.PodIsReady(oldestOld) || controller.IsPodAvailable(oldestNew, ds.Spec.MinReadySeconds, c.clock.Now())) {
			toDelete = append(toDelete, oldestOld.Name)
		}
		return nil, toDelete, failed
	case len(pods) > 0:
		// The node should not run this pod: every one there goes.
		for _, pod := range pods {
			if pod.DeletionTimestamp == nil {
				toDelete = append(toDelete, pod.Name)
			}
		}
	}
	return nil, toDelete, failed
}

// unscheduledPodsOnMissingNodes returns the unbound pods pinned to nodes
// that no longer exist: the scheduler can never bind them, and the pod
// garbage collector only collects bound ones.
func unscheduledPodsOnMissingNodes(nodes []*corev1.Node, nodeToPods map[string][]*corev1.Pod) []string {
	exists := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		exists[n.Name] = true
	}
	var out []string
	for node, pods := range nodeToPods {
		if exists[node] {
			continue
		}
		for _, pod := range pods {
			if pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
				out = append(out, pod.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// syncNodes deletes the pods named toDelete and creates a pod on each node
// of needPods, at most burstReplicas of each, and records what it expects
// to observe. Creates go in doubling batches and stop at the first failure.
func (c *Controller) syncNodes(ctx context.Context, ds *appsv1.DaemonSet, toDelete, needPods []string, hash string) error {
	key := dsKey(ds)
	needPods = needPods[:min(len(needPods), c.burstReplicas)]
	toDelete = toDelete[:min(len(toDelete), c.burstReplicas)]
	podKeys := make([]string, len(toDelete))
	for i, name := range toDelete {
		podKeys[i] = ds.Namespace + "/" + name
	}
	c.expectations.Expect(key, len(needPods), podKeys)

	var errs []error
	if len(needPods) > 0 {
		template := podTemplate(ds, hash)
		ref := controller.NewControllerRef(ds, controllerKind)
		var next atomic.Int64
		created, err := controller.SlowStartBatch(len(needPods), 1, func() error {
			node := needPods[next.Add(1)-1]
			tmpl := template.DeepCopy()
			tmpl.Spec.Affinity = nodeAffinityFor(tmpl.Spec.Affinity, node)
			_, err := c.podControl.CreatePod(ctx, tmpl, ds, ref)
			if client.IsTimeout(err) {
				// The server may still create it: keep expecting it, and
				// let the informer (or the expectations' timeout) tell.
				return nil
			}
			if err != nil {
				return fmt.Errorf("create pod on node %s: %w", node, err)
			}
			return nil
		})
		// The creates that failed or were never made will never be observed.
		for range len(needPods) - created {
			c.expectations.CreationObserved(key)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}

	delErrs := make([]error, len(toDelete))
	var wg sync.WaitGroup
	for i, name := range toDelete {
		wg.Go(func() {
			err := c.podControl.DeletePod(ctx, ds.Namespace, name, ds)
			if err == nil {
				return
			}
			c.expectations.DeletionObserved(key, podKeys[i]) // this deletion will never be observed
			if !client.IsNotFound(err) {
				delErrs[i] = fmt.Errorf("delete pod %s: %w", name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(append(errs, delErrs...)...)
}

// podTemplate is kube's CreatePodTemplate: ds's template with the default
// daemon tolerations and the labels pod-template-generation and
// controller-revision-hash.
func podTemplate(ds *appsv1.DaemonSet, hash string) *corev1.PodTemplateSpec {
	tmpl := ds.Spec.Template.DeepCopy()
	addDefaultTolerations(&tmpl.Spec)
	tmpl.Labels = maps.Clone(tmpl.Labels)
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	if gen := api.TemplateGeneration(ds); gen > 0 {
		tmpl.Labels[TemplateGenerationLabel] = strconv.FormatInt(gen, 10)
	}
	if hash != "" {
		tmpl.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	}
	return tmpl
}

// isPodUpdated is kube's IsPodUpdated: the pod carries the current
// revision's hash, or the DaemonSet's template generation.
func isPodUpdated(pod *corev1.Pod, hash string, templateGeneration int64) bool {
	if hash != "" && pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash {
		return true
	}
	return templateGeneration > 0 && pod.Labels[TemplateGenerationLabel] == strconv.FormatInt(templateGeneration, 10)
}

// olderFirst orders pods as kube's podByCreationTimestampAndPhase: by
// creation, and a running pod before a pending one created at the same
// time.
func olderFirst(a, b *corev1.Pod) int {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		if a.CreationTimestamp.Before(&b.CreationTimestamp) {
			return -1
		}
		return 1
	}
	aRunning, bRunning := a.Status.Phase == corev1.PodRunning, b.Status.Phase == corev1.PodRunning
	switch {
	case aRunning && !bRunning:
		return -1
	case bRunning && !aRunning:
		return 1
	}
	return 0
}

// Event handlers: they only find the DaemonSets a change concerns and
// enqueue them, and tell the expectations what was observed.

func dsKey(ds *appsv1.DaemonSet) string { return ds.Namespace + "/" + ds.Name }

func (c *Controller) enqueue(ds *appsv1.DaemonSet) { c.queue.Add(dsKey(ds)) }

func (c *Controller) enqueueAll() {
	for _, ds := range c.dsLister.List(nil) {
		c.enqueue(ds)
	}
}

func (c *Controller) addDaemonSet(obj any) {
	if ds, ok := obj.(*appsv1.DaemonSet); ok {
		c.enqueue(ds)
	}
}

func (c *Controller) updateDaemonSet(oldObj, newObj any) {
	old, ok1 := oldObj.(*appsv1.DaemonSet)
	cur, ok2 := newObj.(*appsv1.DaemonSet)
	if !ok1 || !ok2 {
		return
	}
	if old.UID != cur.UID {
		// Deleted and created again under the same name while the watch
		// was down: the old one's expectations must go.
		c.deleteDaemonSet(informer.DeletedFinalStateUnknown{Key: dsKey(old), Obj: old})
	}
	c.enqueue(cur)
}

func (c *Controller) deleteDaemonSet(obj any) {
	ds, ok := controller.ObjectFromDelete[*appsv1.DaemonSet](obj)
	if !ok {
		return
	}
	c.expectations.Delete(dsKey(ds))
	c.queue.Add(dsKey(ds))
}

// revisionChanged enqueues the DaemonSet controlling a revision, or, for
// an orphan, those that may adopt it.
func (c *Controller) revisionChanged(obj any) {
	cr, ok := controller.ObjectFromDelete[*appsv1.ControllerRevision](obj)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOfNoCopy(cr); ref != nil {
		if ds, ok := c.resolveControllerRef(cr.Namespace, ref); ok {
			c.enqueue(ds)
		}
		return
	}
	for _, ds := range c.daemonSetsSelecting(cr.Namespace, cr.Labels) {
		c.enqueue(ds)
	}
}

func (c *Controller) updateRevision(oldObj, newObj any) {
	old, ok1 := oldObj.(*appsv1.ControllerRevision)
	cur, ok2 := newObj.(*appsv1.ControllerRevision)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return
	}
	c.revisionChanged(old)
	c.revisionChanged(cur)
}

func (c *Controller) addPod(obj any) {
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
		if ds, ok := c.resolveControllerRef(pod.Namespace, ref); ok {
			c.expectations.CreationObserved(dsKey(ds))
			c.enqueue(ds)
		}
		return
	}
	for _, ds := range c.daemonSetsSelecting(pod.Namespace, pod.Labels) {
		c.enqueue(ds) // it may adopt this orphan
	}
}

func (c *Controller) updatePod(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return // a resync: nothing changed
	}
	if cur.DeletionTimestamp != nil {
		// A graceful deletion began: the node's replacement (or the next
		// step of a rolling update) need not wait for the kubelet.
		c.deletePod(cur)
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	if oldRef != nil && (curRef == nil || curRef.UID != oldRef.UID) {
		if ds, ok := c.resolveControllerRef(old.Namespace, oldRef); ok {
			c.enqueue(ds) // it lost a pod
		}
	}
	if curRef != nil {
		ds, ok := c.resolveControllerRef(cur.Namespace, curRef)
		if !ok {
			return
		}
		c.enqueue(ds)
		if minReady := ds.Spec.MinReadySeconds; !api.PodIsReady(old) && api.PodIsReady(cur) && minReady > 0 {
			// Look again once the pod has been ready long enough to be
			// available.
			c.queue.AddAfter(dsKey(ds), time.Duration(minReady)*time.Second+time.Second)
		}
		return
	}
	if !maps.Equal(old.Labels, cur.Labels) || oldRef != nil {
		for _, ds := range c.daemonSetsSelecting(cur.Namespace, cur.Labels) {
			c.enqueue(ds)
		}
	}
}

func (c *Controller) deletePod(obj any) {
	pod, ok := controller.ObjectFromDelete[*corev1.Pod](obj)
	if !ok {
		return
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return // an orphan's deletion changes no daemon set
	}
	ds, ok := c.resolveControllerRef(pod.Namespace, ref)
	if !ok {
		return
	}
	c.expectations.DeletionObserved(dsKey(ds), controller.PodKey(pod))
	c.enqueue(ds)
}

// A node's arrival, departure or change concerns the DaemonSets whose
// placement on it it changes.

func (c *Controller) addNode(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	for _, ds := range c.dsLister.List(nil) {
		if shouldRun, _ := nodeShouldRunDaemonPod(node, ds); shouldRun {
			c.enqueue(ds)
		}
	}
}

func (c *Controller) updateNode(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Node)
	cur, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return
	}
	for _, ds := range c.dsLister.List(nil) {
		oldRun, oldContinue := nodeShouldRunDaemonPod(old, ds)
		curRun, curContinue := nodeShouldRunDaemonPod(cur, ds)
		if oldRun != curRun || oldContinue != curContinue {
			c.enqueue(ds)
		}
	}
}

func (c *Controller) deleteNode(obj any) {
	if _, ok := controller.ObjectFromDelete[*corev1.Node](obj); ok {
		c.enqueueAll() // any of them may have had a pod pinned there
	}
}

// resolveControllerRef returns the DaemonSet ref names, if the cache has
// it with the same uid.
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) (*appsv1.DaemonSet, bool) {
	if ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return nil, false
	}
	ds, err := c.dsLister.Get(namespace, ref.Name)
	if err != nil || ds.UID != ref.UID {
		return nil, false
	}
	return ds, true
}

// daemonSetsSelecting returns the DaemonSets in namespace whose selector
// matches set: those that may adopt its owner.
func (c *Controller) daemonSetsSelecting(namespace string, set map[string]string) []*appsv1.DaemonSet {
	var out []*appsv1.DaemonSet
	for _, ds := range c.dsLister.ByNamespace(namespace).List(nil) {
		selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err != nil || selector.Empty() {
			continue
		}
		if selector.Matches(labels.Set(set)) {
			out = append(out, ds)
		}
	}
	return out
}
