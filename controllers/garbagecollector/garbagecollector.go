// Package garbagecollector deletes objects whose owners are gone, following
// metadata.ownerReferences across every kind the API server's discovery
// lists as deletable (list, watch and delete served) but Events, as
// kube-controller-manager's garbage collector does. It watches each kind
// through an informer by descriptor (a monitor, monitors.go), so a kind is
// collected as soon as it is served, Go type or not. It reads discovery
// again every 30 s and whenever an owner reference names a kind it does not
// know, starting monitors for kinds that appear and stopping those of kinds
// that go.
//
// A graph builder turns every informer event into an owner→dependents graph
// keyed by uid (graph.go); workers take uids from a queue and act on what
// the graph, the caches and a live look at the owners say:
//
//   - Background: a dependent whose every owner is gone is deleted; one
//     with an owner left only loses the references to the owners that are
//     gone. An owner is gone when a live GET by its apiVersion, kind and
//     name finds nothing, or finds an object with another uid.
//   - Foreground: an owner being deleted with the "foregroundDeletion"
//     finalizer has its dependents deleted (in the foreground too, when
//     they have dependents of their own), and loses the finalizer (and so
//     goes) once no dependent whose reference sets blockOwnerDeletion is
//     left.
//   - Cycles: owners whose foreground deletions wait on each other round a
//     cycle (a owns b, b owns c, c owns a, each reference blocking) would
//     wait forever; an owner that finds itself on such a cycle makes the
//     reference of its dependent on it stop blocking, so it goes first,
//     and the others follow. kube-controller-manager's collector breaks
//     such cycles too, from the dependent's side.
//   - Orphan: an owner being deleted with the "orphan" finalizer has its
//     reference removed from every dependent, then loses the finalizer.
//
// Properties:
//
//   - Nothing is deleted on the word of the caches alone: an owner is
//     declared gone only after a live GET, and every delete and patch
//     carries the object's uid and resourceVersion as preconditions, so a
//     stale cache or a recreated object makes the write fail (and retry)
//     instead of doing harm.
//   - Workers start only once the graph holds everything the informers
//     listed at start-up, so no dependent is judged on a half-built graph.
//   - A dependent of a kind not served, or an owner reference to such a
//     kind, is never collected on that reference's account: the collector
//     cannot tell whether such an owner exists.
//   - A monitor is a subscription to the process's one informer of its
//     kind (informer.SharedInformerFactory.Subscribe), so a custom kind is
//     watched once, whoever else counts it. The monitor of a kind no longer
//     served is closed before the next discovery is read: its handler is
//     removed, and the informer, if nothing else uses it, has stopped.
//   - Pods are deleted with their default grace period: the kubelet
//     finishes them.
package garbagecollector

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

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
const Name = "garbagecollector"

// Options is what the garbage collector needs: the options every controller
// takes (Client and Informers required), and its own. It takes one
// informer per served resource with a Go type from Informers, runs its own
// for the others, records an Event per action, and registers two queues'
// metrics (garbagecollector, garbagecollector_graph_changes).
type Options struct {
	controller.Common
	// Discovery is where it learns the served resources. Nil: Client.
	Discovery Discovery
	// ResyncPeriod is how often it reads discovery again. 0:
	// DefaultResyncPeriod.
	ResyncPeriod time.Duration
}

// Controller is the garbage collector.
type Controller struct {
	objects      objects
	discovery    Discovery
	informers    *informer.SharedInformerFactory
	resyncPeriod time.Duration
	clock        clock.Clock
	// missed has a value when a worker met a kind it does not know.
	missed chan struct{}
	// resyncs counts the discovery reads that gave something.
	resyncs atomic.Int64

	// mu guards monitors: one per watched resource, whose cache is read
	// to find the current state of a node's object.
	mu       sync.Mutex
	monitors map[schema.GroupVersionResource]*monitor

	graph *graph
	// changes feeds the graph builder, the graph's only writer, in the
	// order the informers reported (and workers found virtual owners gone).
	changes *workqueue.Queue[*graphChange]
	// queue holds the uids of nodes a worker must look at.
	queue *workqueue.Queue[types.UID]

	recorder record.EventRecorder
	log      *slog.Logger
}

// graphChange is one item for the graph builder.
type graphChange struct {
	kind      changeKind
	res       *api.Resource // changeObserved, changeDeleted
	obj       api.Object    // changeObserved, changeDeleted
	uid       types.UID     // changeVirtualGone
	done      chan struct{} // changeMarker: closed when reached
	resources api.Catalogue // changeResources
}

type changeKind int

const (
	changeObserved    changeKind = iota // an object was added or updated
	changeDeleted                       // an object was deleted
	changeVirtualGone                   // a worker found a virtual owner absent
	changeMarker                        // everything queued before it is in the graph
	changeResources                     // discovery was read: the kinds owner references resolve to
)

// notObservedPoll is how soon an owner known only from references, which
// exists but the informers have not shown yet, is looked at again.
const notObservedPoll = time.Second

// New returns a garbage collector. Call Run to start it: it reads
// discovery then.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	if opts.Discovery == nil {
		opts.Discovery = opts.Client
	}
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = DefaultResyncPeriod
	}
	return &Controller{
		objects:      objects{rc: opts.Client},
		discovery:    opts.Discovery,
		informers:    opts.Informers,
		resyncPeriod: opts.ResyncPeriod,
		clock:        opts.Clock,
		missed:       make(chan struct{}, 1),
		monitors:     map[schema.GroupVersionResource]*monitor{},
		graph:        newGraph(nil),
		changes:      controller.NewQueue[*graphChange](Name+"_graph_changes", opts.Common),
		queue:        controller.NewQueue[types.UID](Name, opts.Common),
		recorder:     opts.Recorder,
		log:          opts.Logger,
	}, nil
}

func (gc *Controller) enqueueChange(m *monitor, kind changeKind, obj any) {
	switch tomb := obj.(type) {
	case informer.DeletedFinalStateUnknown:
		obj = tomb.Obj
	case *informer.DeletedFinalStateUnknown:
		obj = tomb.Obj
	}
	o, ok := obj.(api.Object)
	if !ok || o == nil {
		return
	}
	gc.changes.Add(&graphChange{kind: kind, res: m.res, obj: o})
}

// Run builds the graph, waits until it holds everything the informers
// listed, runs workers until ctx is done, then shuts both queues down and
// waits for the graph builder and the workers.
func (gc *Controller) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	wg.Go(gc.runGraphBuilder)
	for !gc.resync(ctx) && clock.Sleep(ctx, gc.clock, time.Second) {
	}
	gc.log.Info("starting", slog.Int("resources", len(gc.syncedFuncs())), slog.Int("workers", workers))
	wg.Go(func() { gc.runResync(ctx) })
	if gc.waitForGraph(ctx) {
		gc.log.Info("graph built from the initial lists → start collecting",
			slog.Int("nodes", gc.graph.len()))
		for range controller.Workers(workers) {
			wg.Go(func() {
				for gc.processNextWorkItem(ctx) {
				}
			})
		}
	}
	<-ctx.Done()
	gc.changes.ShutDown()
	gc.queue.ShutDown()
	wg.Wait()
	gc.log.Info("stopped")
}

// waitForGraph waits until every handler of the first discovery's monitors
// has had the initial list, then until the graph builder has applied all
// of it.
func (gc *Controller) waitForGraph(ctx context.Context) bool {
	if !informer.WaitForCacheSync(ctx, gc.syncedFuncs()...) {
		return false
	}
	marker := &graphChange{kind: changeMarker, done: make(chan struct{})}
	gc.changes.Add(marker)
	select {
	case <-marker.done:
		return true
	case <-ctx.Done():
		return false
	}
}

// runGraphBuilder applies graph changes one at a time, in order, and
// queues the nodes each change gives work to.
func (gc *Controller) runGraphBuilder() {
	for {
		ch, shutdown := gc.changes.Get()
		if shutdown {
			return
		}
		var work []types.UID
		switch ch.kind {
		case changeObserved:
			work = gc.graph.observe(ch.res, ch.obj)
		case changeDeleted:
			work = gc.graph.forget(ch.obj)
		case changeVirtualGone:
			work = gc.graph.forgetVirtual(ch.uid)
		case changeMarker:
			close(ch.done)
		case changeResources:
			work = gc.graph.setResources(ch.resources)
		}
		for _, uid := range work {
			gc.queue.Add(uid)
		}
		gc.changes.Done(ch)
	}
}

// processNextWorkItem looks at one node, and leaves it to
// controller.HandleErr to decide whether to retry it, forget it or look
// again later. It returns false once the queue is shut down.
func (gc *Controller) processNextWorkItem(ctx context.Context) bool {
	uid, shutdown := gc.queue.Get()
	if shutdown {
		return false
	}
	defer gc.queue.Done(uid)
	controller.HandleErr(ctx, gc.log, gc.queue, uid, gc.sync(ctx, uid))
	return true
}

// sync looks at the node with uid in the role its state gives it: an owner
// nobody has seen, an owner whose deletion waits on its dependents, or a
// dependent whose owners may be gone.
func (gc *Controller) sync(ctx context.Context, uid types.UID) error {
	n, ok := gc.graph.info(uid)
	if !ok {
		return nil // no longer in the graph; nothing to do
	}
	if n.virtual {
		return gc.checkVirtualOwner(ctx, n)
	}
	obj, ok := gc.cached(n.ref)
	if !ok {
		return nil // deleted: its delete event takes it from here
	}
	switch {
	case obj.GetDeletionTimestamp() == nil:
		return gc.collectIfOwnersGone(ctx, n, obj)
	case hasFinalizer(obj, metav1.FinalizerOrphanDependents):
		return gc.orphanDependents(ctx, n, obj)
	case hasFinalizer(obj, metav1.FinalizerDeleteDependents):
		return gc.deleteDependentsFirst(ctx, n, obj)
	}
	return nil // being deleted: its dependents are looked at once it is gone
}

// checkVirtualOwner looks up an owner that only references name. If it does
// not exist, the graph builder drops it and its dependents are looked at.
func (gc *Controller) checkVirtualOwner(ctx context.Context, n nodeInfo) error {
	if n.ref.res == nil {
		gc.nudge()
		return nil // a kind not served, as far as we know: we cannot tell; discovery is read again
	}
	gone := !validName(n.ref.name)
	if !gone {
		owner, err := gc.objects.get(ctx, n.ref.res, n.ref.namespace, n.ref.name)
		switch {
		case client.IsNotFound(err):
			gone = true
		case err != nil:
			return fmt.Errorf("get %s: %w", n.ref, err)
		default:
			gone = owner.GetUID() != n.ref.uid
		}
	}
	if !gone {
		return workqueue.RequeueAfter(notObservedPoll, "owner "+n.ref.String()+" exists but is not observed yet")
	}
	gc.decided(ctx, n.ref, "owner "+n.ref.String()+" does not exist → look at its "+
		count(len(n.dependents), "dependent"), slog.Int("dependents", len(n.dependents)))
	gc.changes.Add(&graphChange{kind: changeVirtualGone, uid: n.ref.uid})
	return nil
}

// ownerState is what a live look at an owner reference finds.
type ownerState int

const (
	ownerSolid   ownerState = iota // exists, or cannot be checked
	ownerGone                      // absent, or another object has its name
	ownerWaiting                   // being deleted in the foreground: waits for its dependents
)

// collectIfOwnersGone deletes the dependent obj if all its owners are gone
// (or wait for it to go), or drops its references to those owners if some
// other owner is still there.
func (gc *Controller) collectIfOwnersGone(ctx context.Context, n nodeInfo, obj api.Object) error {
	refs := obj.GetOwnerReferences()
	if len(refs) == 0 {
		return nil // owned by nobody
	}
	var solid, gone, waiting []metav1.OwnerReference
	for _, ref := range refs {
		state, err := gc.ownerState(ctx, n.ref, ref)
		if err != nil {
			return fmt.Errorf("%s: check owner %s: %w", n.ref, describeOwner(ref), err)
		}
		switch state {
		case ownerSolid:
			solid = append(solid, ref)
		case ownerGone:
			gone = append(gone, ref)
		case ownerWaiting:
			waiting = append(waiting, ref)
		}
	}
	if len(gone) == 0 && len(waiting) == 0 {
		return nil // every owner is there
	}
	what := describe(n.ref)
	story := ownersStory(gone, waiting)

	if len(solid) > 0 {
		drop := map[types.UID]bool{}
		for _, ref := range append(gone, waiting...) {
			drop[ref.UID] = true
		}
		err := gc.objects.patchMetadata(ctx, n.ref, obj.GetResourceVersion(),
			map[string]any{"ownerReferences": withoutOwners(obj, drop)})
		if client.IsNotFound(err) {
			return nil // gone meanwhile
		}
		if err != nil {
			return fmt.Errorf("%s: remove owner references: %w", n.ref, err)
		}
		gc.decided(ctx, n.ref, what+" "+story+" → remove the reference; "+describeOwner(solid[0])+" still owns it")
		gc.recorder.Eventf(obj, corev1.EventTypeNormal, "OwnerRefRemoved", "Removed the reference: %s", story)
		return nil
	}

	policy := metav1.DeletePropagationBackground
	switch {
	case len(waiting) > 0 && gc.graph.hasDependents(n.ref.uid):
		// Its owner waits for the whole tree below it.
		policy = metav1.DeletePropagationForeground
	case hasFinalizer(obj, metav1.FinalizerOrphanDependents):
		policy = metav1.DeletePropagationOrphan
	case hasFinalizer(obj, metav1.FinalizerDeleteDependents):
		policy = metav1.DeletePropagationForeground
	}
	err := gc.objects.delete(ctx, n.ref, obj.GetResourceVersion(), policy)
	if client.IsNotFound(err) {
		return nil // gone meanwhile
	}
	if err != nil {
		return fmt.Errorf("%s: delete: %w", n.ref, err)
	}
	gc.decided(ctx, n.ref, what+" "+story+" → delete", slog.String("propagationPolicy", string(policy)))
	gc.recorder.Eventf(obj, corev1.EventTypeNormal, "GarbageCollected", "Deleted %s: %s", n.ref.name, story)
	return nil
}

// ownerState looks ref up live. A reference that cannot be resolved (a
// kind not served, a namespaced owner of a cluster-scoped object) is
// solid: we cannot tell it is gone. A kind not known asks for discovery to
// be read again.
func (gc *Controller) ownerState(ctx context.Context, dependent objectRef, ref metav1.OwnerReference) (ownerState, error) {
	res := resourceFor(gc.graph.catalogue(), ref.APIVersion, ref.Kind)
	if res == nil {
		gc.nudge()
		return ownerSolid, nil
	}
	if res.Namespaced && dependent.namespace == "" {
		return ownerSolid, nil
	}
	if !validName(ref.Name) {
		return ownerGone, nil
	}
	namespace := ""
	if res.Namespaced {
		namespace = dependent.namespace
	}
	owner, err := gc.objects.get(ctx, res, namespace, ref.Name)
	switch {
	case client.IsNotFound(err):
		return ownerGone, nil
	case err != nil:
		return ownerSolid, err
	case owner.GetUID() != ref.UID:
		return ownerGone, nil
	case owner.GetDeletionTimestamp() != nil && hasFinalizer(owner, metav1.FinalizerDeleteDependents):
		return ownerWaiting, nil
	}
	return ownerSolid, nil
}

// deleteDependentsFirst moves the foreground deletion of owner obj on: its
// dependents are (being) deleted; once none whose reference blocks owner
// deletion is left, the finalizer comes off and the owner goes.
func (gc *Controller) deleteDependentsFirst(ctx context.Context, n nodeInfo, obj api.Object) error {
	blocking := 0
	for _, d := range n.dependents {
		if d.blocking {
			blocking++
		}
		if !d.beingDeleted {
			gc.queue.Add(d.ref.uid) // it decides for itself: it may have another owner
		}
	}
	what := describe(n.ref)
	if cycle := gc.graph.waitCycle(n.ref.uid); len(cycle) > 0 {
		return gc.unblockCycle(ctx, n, cycle)
	}
	if blocking > 0 {
		verb := " still block"
		if blocking == 1 {
			verb = " still blocks"
		}
		gc.decided(ctx, n.ref, what+" is being deleted in the foreground → wait: "+
			count(blocking, "dependent")+verb+" its deletion", slog.Int("blocking", blocking))
		return nil
	}
	err := gc.objects.patchMetadata(ctx, n.ref, obj.GetResourceVersion(),
		map[string]any{"finalizers": withoutFinalizer(obj, metav1.FinalizerDeleteDependents)})
	if client.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: remove finalizer %s: %w", n.ref, metav1.FinalizerDeleteDependents, err)
	}
	gc.decided(ctx, n.ref, what+": no dependents left that block its deletion → remove finalizer "+
		metav1.FinalizerDeleteDependents)
	gc.recorder.Eventf(obj, corev1.EventTypeNormal, "DependentsDeleted", "All dependents that block deletion are gone")
	return nil
}

// unblockCycle ends a cycle of foreground deletions that wait on each
// other: the references of the dependents on the cycle to owner n stop
// blocking its deletion, so n goes first, and then each of the others once
// what it waits on is gone. Every object on the cycle is being deleted
// already; only the order changes. (kube-controller-manager's collector
// unblocks a dependent's references when it deletes it in the foreground
// while one of its own dependents already waits; seen from the owner, the
// cycle is also ended when every object on it was deleted by hand.)
func (gc *Controller) unblockCycle(ctx context.Context, n nodeInfo, cycle []objectRef) error {
	for _, ref := range cycle {
		dep, ok := gc.cached(ref)
		if !ok {
			continue // gone meanwhile: it blocks nothing
		}
		refs := slices.Clone(dep.GetOwnerReferences())
		for i := range refs {
			if refs[i].UID == n.ref.uid {
				no := false
				refs[i].BlockOwnerDeletion = &no
			}
		}
		err := gc.objects.patchMetadata(ctx, ref, dep.GetResourceVersion(), map[string]any{"ownerReferences": refs})
		if client.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: unblock the reference to %s: %w", ref, n.ref, err)
		}
		gc.decided(ctx, ref, describe(ref)+" waits on "+describe(n.ref)+", which waits on it in turn"+
			" (both are deleted in the foreground) → its reference no longer blocks the deletion of "+n.ref.name,
			slog.String("owner", n.ref.String()))
		gc.recorder.Eventf(dep, corev1.EventTypeNormal, "OwnerRefUnblocked",
			"The reference to %s no longer blocks its deletion: both are deleted in the foreground and wait on each other", n.ref)
	}
	return nil
}

// orphanDependents removes owner obj's reference from each of its
// dependents, then its "orphan" finalizer, so that it goes and they stay.
func (gc *Controller) orphanDependents(ctx context.Context, n nodeInfo, obj api.Object) error {
	orphaned := 0
	for _, d := range n.dependents {
		dep, ok := gc.cached(d.ref)
		if !ok || !refersTo(dep, n.ref.uid) {
			continue // gone, or let go already
		}
		err := gc.objects.patchMetadata(ctx, d.ref, dep.GetResourceVersion(),
			map[string]any{"ownerReferences": withoutOwners(dep, map[types.UID]bool{n.ref.uid: true})})
		if client.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: orphan %s: %w", n.ref, d.ref, err)
		}
		gc.decided(ctx, d.ref, describe(d.ref)+" owner "+n.ref.String()+
			" is being deleted with propagation Orphan → remove the reference")
		orphaned++
		gc.recorder.Eventf(dep, corev1.EventTypeNormal, "Orphaned", "Removed the reference to %s, deleted with propagation Orphan", n.ref)
	}
	err := gc.objects.patchMetadata(ctx, n.ref, obj.GetResourceVersion(),
		map[string]any{"finalizers": withoutFinalizer(obj, metav1.FinalizerOrphanDependents)})
	if client.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: remove finalizer %s: %w", n.ref, metav1.FinalizerOrphanDependents, err)
	}
	// An earlier pass may have let the dependents go and then lost the
	// race for the finalizer (a Conflict): say so rather than "orphaned 0".
	story, event := "orphaned "+count(orphaned, "dependent"), fmt.Sprintf("Orphaned %d dependents", orphaned)
	if orphaned == 0 {
		story, event = "no dependent refers to it any more", "No dependent refers to it any more"
	}
	gc.decided(ctx, n.ref, describe(n.ref)+": "+story+" → remove finalizer "+metav1.FinalizerOrphanDependents,
		slog.Int("orphaned", orphaned))
	gc.recorder.Eventf(obj, corev1.EventTypeNormal, "DependentsOrphaned", "%s", event)
	return nil
}

// cached returns the object ref names from its informer's cache, if it is
// there with ref's uid.
func (gc *Controller) cached(ref objectRef) (api.Object, bool) {
	m, ok := gc.monitorOf(ref.res)
	if !ok {
		return nil, false
	}
	item, exists, err := m.cache.GetByKey(ref.key())
	if err != nil || !exists {
		return nil, false
	}
	obj, ok := item.(api.Object)
	if !ok || obj.GetUID() != ref.uid {
		return nil, false
	}
	return obj, true
}

func refersTo(obj api.Object, uid types.UID) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

// decided logs one decision about the object r: msg is the human wording;
// r's key (as "object"), kind and uid, and more, are the data.
func (gc *Controller) decided(ctx context.Context, r objectRef, msg string, more ...slog.Attr) {
	attrs := []slog.Attr{slog.String("object", r.key()), slog.String("kind", r.kind), slog.String("uid", string(r.uid))}
	gc.log.LogAttrs(ctx, slog.LevelInfo, msg, append(attrs, more...)...)
}

// describe names an object in a log line: "pod default/web-abc".
func describe(ref objectRef) string {
	return kindOf(ref.res) + " " + ref.key()
}

// ownersStory says what happened to the owners in one phrase: "owner
// ReplicaSet web (uid ..) is gone".
func ownersStory(gone, waiting []metav1.OwnerReference) string {
	var parts []string
	if len(gone) > 0 {
		parts = append(parts, ownersPhrase(gone, "is gone", "are gone"))
	}
	if len(waiting) > 0 {
		parts = append(parts, ownersPhrase(waiting, "is being deleted in the foreground", "are being deleted in the foreground"))
	}
	return strings.Join(parts, "; ")
}

func ownersPhrase(refs []metav1.OwnerReference, one, many string) string {
	names := make([]string, len(refs))
	for i, ref := range refs {
		names[i] = describeOwner(ref)
	}
	if len(refs) == 1 {
		return "owner " + names[0] + " " + one
	}
	return "owners " + strings.Join(names, ", ") + " " + many
}

// count says "1 dependent", "2 dependents".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
