package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// Defaults of Options, as kube-scheduler has them.
const (
	DefaultSchedulerName     = corev1.DefaultSchedulerName // "default-scheduler"
	DefaultPodInitialBackoff = 1 * time.Second             // podInitialBackoffSeconds
	DefaultPodMaxBackoff     = 10 * time.Second            // podMaxBackoffSeconds
	// DefaultPodMaxUnschedulable is the longest an unschedulable pod waits
	// for a change that may make room before it is tried again anyway
	// (kube-scheduler's podMaxInUnschedulablePodsDuration).
	DefaultPodMaxUnschedulable = 5 * time.Minute
	// DefaultWorkers is how many pods Run works on at once. Decisions are
	// still made one at a time (under mu); the workers overlap the API
	// calls that follow them (the binding, a status patch), as
	// kube-scheduler's binding cycles run beside its scheduling cycle.
	DefaultWorkers = 16
)

// Options is what a Scheduler needs.
type Options struct {
	// Client binds pods and writes their status.
	Client *client.RESTClient
	// Informers is the shared factory the pod and node informers come
	// from. The caller starts it after New.
	Informers *informer.SharedInformerFactory
	// Recorder records Scheduled and FailedScheduling events; nil records
	// none.
	Recorder record.EventRecorder
	// Logger tells the story of each decision; nil discards.
	Logger *slog.Logger
	// SchedulerName is the spec.schedulerName of the pods this scheduler
	// places; "" is DefaultSchedulerName.
	SchedulerName string
	// Metrics, if set, receives the scheduler's and its queue's metrics.
	Metrics prometheus.Registerer
	// PodInitialBackoff and PodMaxBackoff bound the wait before a pod that
	// did not fit (or whose binding failed) may be tried again, doubling
	// from the first to the second. 0 means the defaults.
	PodInitialBackoff, PodMaxBackoff time.Duration
	// PodMaxUnschedulable is how long a pod that did not fit waits for a
	// change to nodes, or a bound pod going away, before it is tried again
	// anyway; 0 means DefaultPodMaxUnschedulable.
	PodMaxUnschedulable time.Duration
	// Clock is the scheduler's time source: the times it writes and its
	// workqueue's delays; nil is the real clock.
	Clock clock.Clock
	// BindTimeout bounds how long a pod waits, before it is bound, for
	// the claims it needs bound or provisioned on its node; 0 means
	// DefaultBindTimeout.
	BindTimeout time.Duration
}

// Scheduler binds pending pods to nodes. See the package doc.
type Scheduler struct {
	name       string
	rc         *client.RESTClient
	pods       *client.Client[*corev1.Pod]
	podLister  informer.Lister[*corev1.Pod]
	nodeLister informer.Lister[*corev1.Node]
	// The volume listers serve the VolumeBinding plugin; a pod without
	// claims never reads them.
	pvcLister   informer.Lister[*corev1.PersistentVolumeClaim]
	pvLister    informer.Lister[*corev1.PersistentVolume]
	classLister informer.Lister[*storagev1.StorageClass]
	bindTimeout time.Duration
	synced      []func() bool
	queue       *workqueue.Queue[string]
	recorder    record.EventRecorder
	log         *slog.Logger
	clock       clock.Clock
	metrics     prometheus.Registerer // nil: no metrics
	attempts    *prometheus.CounterVec

	// backoff is the queue's rate limiter: the per-pod backoff that
	// processNextWorkItem and requeueUnschedulable both honour.
	backoff *workqueue.ItemExponentialFailureRateLimiter
	// maxUnschedulable is the longest a pod no node fits waits.
	maxUnschedulable time.Duration

	// mu guards assumed, bound, usage and unschedulable. It is held for a
	// whole decision (filter, score, assume), so that decisions are made
	// one at a time, each seeing the pods placed by those before it.
	// Nothing under mu calls the API.
	mu sync.Mutex
	// assumed holds, by key, the pods this scheduler chose a node for and
	// the pod handlers have not yet seen bound. They count on their node
	// as if bound. An entry goes when the handlers see the pod bound (it
	// counts in bound from then on), gone, replaced or finished, or when
	// its binding fails.
	assumed map[string]assumedPod
	// bound holds, by key, every pod the handlers last saw holding
	// resources on a node (bound and not finished), with what it takes
	// there; usage is the sum of bound by node. Together they are what
	// the pod informer shows, kept up to date by the handlers so that a
	// decision costs the number of nodes, not of pods.
	// Invariant: usage[n] is the sum of the bound entries on n; a key is
	// never in both assumed and bound.
	bound map[string]boundPod
	usage map[string]*nodeUsage
	// unschedulable holds the keys of the pods whose last attempt found no
	// node, each with the end of its backoff (zero while the attempt is
	// being made). A change that may make room queues them all again, each
	// once its backoff is over; meanwhile each waits in the queue for
	// maxUnschedulable.
	unschedulable map[string]time.Time
	// assumedPVs holds, by name, the volumes decided on for a pod's
	// claims (the pod's key) that the informer does not yet show claimed.
	// No other claim is offered them meanwhile.
	assumedPVs map[string]string
	// binding counts the binding cycles under way beside the workers:
	// those of pods that wait for their volumes before they are bound.
	binding sync.WaitGroup
}

// assumedPod is a pod as it was decided for, the node chosen, and what it
// takes there.
type assumedPod struct {
	pod  *corev1.Pod
	node string
	take podUsage
}

// boundPod is a pod the handlers saw bound: its node and what it takes
// there.
type boundPod struct {
	node string
	take podUsage
}

// unschedulableError is sync's answer for a pod that no node fits: not a
// failure, but a reason to try again later.
type unschedulableError struct{ message string }

func (e *unschedulableError) Error() string { return e.message }

// New returns a scheduler reading pods and nodes from opts.Informers.
func New(opts Options) (*Scheduler, error) {
	if opts.Client == nil || opts.Informers == nil {
		return nil, errors.New("scheduler: Client and Informers are required")
	}
	if opts.SchedulerName == "" {
		opts.SchedulerName = DefaultSchedulerName
	}
	if opts.PodInitialBackoff <= 0 {
		opts.PodInitialBackoff = DefaultPodInitialBackoff
	}
	if opts.PodMaxBackoff <= 0 {
		opts.PodMaxBackoff = DefaultPodMaxBackoff
	}
	if opts.PodMaxUnschedulable <= 0 {
		opts.PodMaxUnschedulable = DefaultPodMaxUnschedulable
	}
	if opts.BindTimeout <= 0 {
		opts.BindTimeout = DefaultBindTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Recorder == nil {
		opts.Recorder = record.Discard
	}
	s := &Scheduler{
		name:          opts.SchedulerName,
		rc:            opts.Client,
		pods:          client.For[*corev1.Pod](opts.Client),
		recorder:      opts.Recorder,
		log:           opts.Logger,
		clock:         clock.Or(opts.Clock),
		assumed:       map[string]assumedPod{},
		bound:         map[string]boundPod{},
		usage:         map[string]*nodeUsage{},
		unschedulable: map[string]time.Time{},
		assumedPVs:    map[string]string{},
		bindTimeout:   opts.BindTimeout,
		metrics:       opts.Metrics,
		attempts:      newAttemptsMetric(),

		backoff:          workqueue.NewItemExponentialFailureRateLimiter(opts.PodInitialBackoff, opts.PodMaxBackoff),
		maxUnschedulable: opts.PodMaxUnschedulable,
	}
	if s.metrics != nil {
		if err := s.metrics.Register(s.attempts); err != nil {
			return nil, fmt.Errorf("scheduler: register metrics: %w", err)
		}
	}
	// The queue exists before any handler can fire.
	s.queue = workqueue.New[string]("scheduler", workqueue.Options{
		Clock:             s.clock,
		RateLimiter:       s.backoff,
		MetricsRegisterer: opts.Metrics,
	})

	podInformer := informer.For[*corev1.Pod](opts.Informers)
	nodeInformer := informer.For[*corev1.Node](opts.Informers)
	s.podLister, s.nodeLister = podInformer.Lister(), nodeInformer.Lister()
	podReg, err := podInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { s.onPodAdd(obj) },
		UpdateFunc: s.onPodUpdate,
		DeleteFunc: s.onPodDelete,
	})
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("scheduler: pod handler: %w", err)
	}
	nodeReg, err := nodeInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(any, bool) { s.requeueUnschedulable() },
		UpdateFunc: s.onNodeUpdate,
	})
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("scheduler: node handler: %w", err)
	}
	s.synced = []func() bool{podReg.HasSynced, nodeReg.HasSynced}
	if err := s.watchVolumes(opts.Informers); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// newAttemptsMetric counts scheduling attempts by result, as
// kube-scheduler's metric of that name does.
func newAttemptsMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "scheduler_schedule_attempts_total",
		Help: "Number of attempts to schedule pods, by result: scheduled, unschedulable (no node fits) or error.",
	}, []string{"result"})
}

// waitsForUs reports whether pod is one this scheduler should place: not
// bound, ours, not being deleted, not finished, not held by scheduling
// gates.
func (s *Scheduler) waitsForUs(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.Spec.SchedulerName == s.name && pod.DeletionTimestamp == nil &&
		!api.IsPodTerminal(pod) && len(pod.Spec.SchedulingGates) == 0
}

// holdsResources reports whether pod counts against its node.
func holdsResources(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && !api.IsPodTerminal(pod)
}

func (s *Scheduler) enqueue(pod *corev1.Pod) {
	key, err := informer.MetaNamespaceKeyFunc(pod)
	if err != nil {
		s.log.Error("pod key", "err", err)
		return
	}
	s.queue.Add(key)
}

func (s *Scheduler) onPodAdd(obj any) {
	pod := obj.(*corev1.Pod)
	s.observe(pod)
	if s.waitsForUs(pod) {
		s.enqueue(pod)
	}
}

func (s *Scheduler) onPodUpdate(oldObj, newObj any) {
	old, pod := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
	s.observe(pod)
	switch {
	case s.waitsForUs(pod) && (!s.waitsForUs(old) || !sameSchedulingInputs(old, pod)):
		s.enqueue(pod)
	case s.waitsForUs(old) && !s.waitsForUs(pod):
		s.enqueue(pod) // bound or going: sync forgets it
	}
	if holdsResources(old) && !holdsResources(pod) {
		s.requeueUnschedulable() // it finished: its node has room again
	}
}

func (s *Scheduler) onPodDelete(obj any) {
	if tomb, ok := obj.(informer.DeletedFinalStateUnknown); ok {
		// Its last state is unknown: it may have been waiting, or holding
		// room on a node.
		s.gone(tomb.Key)
		s.queue.Add(tomb.Key)
		s.requeueUnschedulable()
		return
	}
	pod := obj.(*corev1.Pod)
	if key, err := informer.MetaNamespaceKeyFunc(pod); err == nil {
		s.gone(key)
	}
	if holdsResources(pod) {
		s.requeueUnschedulable()
		return
	}
	s.enqueue(pod) // sync forgets it
}

// observe records what the pod informer now shows of pod: whether it holds
// room on a node, and so whether an assumption about it is over.
func (s *Scheduler) observe(pod *corev1.Pod) {
	key, err := informer.MetaNamespaceKeyFunc(pod)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unbindLocked(key)
	if a, ok := s.assumed[key]; ok && (a.pod.UID != pod.UID || pod.Spec.NodeName != "" || api.IsPodTerminal(pod)) {
		delete(s.assumed, key) // bound (counted below), replaced or finished
	}
	if holdsResources(pod) {
		b := boundPod{node: pod.Spec.NodeName, take: usageOf(pod)}
		s.bound[key] = b
		s.usageAtLocked(b.node).add(b.take)
	}
}

// gone forgets a pod the informer no longer has.
func (s *Scheduler) gone(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unbindLocked(key)
	delete(s.assumed, key)
}

func (s *Scheduler) unbindLocked(key string) {
	b, ok := s.bound[key]
	if !ok {
		return
	}
	delete(s.bound, key)
	u := s.usage[b.node]
	u.sub(b.take)
	if u.pods == 0 {
		delete(s.usage, b.node)
	}
}

func (s *Scheduler) usageAtLocked(node string) *nodeUsage {
	u, ok := s.usage[node]
	if !ok {
		u = newNodeUsage()
		s.usage[node] = u
	}
	return u
}

// sameSchedulingInputs reports whether an update left alone what a
// decision depends on. Status changes, such as the PodScheduled condition
// the scheduler writes itself, do not call for another attempt.
func sameSchedulingInputs(old, pod *corev1.Pod) bool {
	return apiequality.Semantic.DeepEqual(old.Spec, pod.Spec) && apiequality.Semantic.DeepEqual(old.Labels, pod.Labels)
}

func (s *Scheduler) onNodeUpdate(oldObj, newObj any) {
	old, node := oldObj.(*corev1.Node), newObj.(*corev1.Node)
	if !sameSchedulingProperties(old, node) {
		s.requeueUnschedulable()
	}
}

// sameSchedulingProperties reports whether a node update left alone all
// that filters and scores read, so that the kubelet's heartbeats do not
// retry every unschedulable pod.
func sameSchedulingProperties(old, node *corev1.Node) bool {
	ready := func(n *corev1.Node) corev1.ConditionStatus {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status
			}
		}
		return corev1.ConditionUnknown
	}
	return old.Spec.Unschedulable == node.Spec.Unschedulable &&
		apiequality.Semantic.DeepEqual(old.Spec.Taints, node.Spec.Taints) &&
		apiequality.Semantic.DeepEqual(old.Labels, node.Labels) &&
		apiequality.Semantic.DeepEqual(old.Status.Allocatable, node.Status.Allocatable) &&
		ready(old) == ready(node)
}

// requeueUnschedulable queues every pod the last attempt found no node
// for, each as soon as its backoff is over: something changed that may
// make room.
func (s *Scheduler) requeueUnschedulable() {
	now := s.clock.Now()
	s.mu.Lock()
	waits := make(map[string]time.Duration, len(s.unschedulable))
	for key, until := range s.unschedulable {
		waits[key] = until.Sub(now)
	}
	s.mu.Unlock()
	for key, wait := range waits {
		s.queue.AddAfter(key, wait) // at once when wait <= 0
	}
}

// parkUnschedulable starts the backoff of a pod no node fits, and leaves it
// to wait for requeueUnschedulable, or maxUnschedulable at most: a pending
// pod costs an attempt per change that may make room, not one per backoff.
func (s *Scheduler) parkUnschedulable(key string) {
	until := s.clock.Now().Add(s.backoff.When(key))
	s.mu.Lock()
	_, still := s.unschedulable[key]
	if still {
		s.unschedulable[key] = until
	}
	s.mu.Unlock()
	if still {
		s.queue.AddAfter(key, s.maxUnschedulable)
	}
}

// Run waits for the informers' caches, then places pods with workers
// goroutines until ctx is done. It returns once they have stopped, with its
// metrics unregistered; an error only if ctx ended before the caches
// synced. Run is called once.
func (s *Scheduler) Run(ctx context.Context, workers int) error {
	defer s.stop()
	s.log.Info("starting", "schedulerName", s.name, "workers", workers)
	if !informer.WaitForCacheSync(ctx, s.synced...) {
		return fmt.Errorf("scheduler: wait for caches: %w", ctx.Err())
	}
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for s.processNextWorkItem(ctx) {
			}
		})
	}
	<-ctx.Done()
	s.queue.ShutDown()
	wg.Wait()
	s.binding.Wait() // the workers that start them have stopped
	s.log.Info("stopped")
	return nil
}

// stop shuts the queue down and unregisters the metrics.
func (s *Scheduler) stop() {
	s.queue.ShutDown()
	if s.metrics != nil {
		s.metrics.Unregister(s.attempts)
	}
}

// processNextWorkItem is the only place that decides retry or forget.
func (s *Scheduler) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(key)
	if ctx.Err() != nil {
		return false // stopping: the pods still queued would only fail, one log line each
	}
	s.finish(key, s.sync(ctx, key))
	return true
}

// errBinding is sync's answer for a pod whose binding cycle goes on beside
// the workers: that cycle tells finish how it ended.
var errBinding = errors.New("binding cycle under way")

// finish decides, from how an attempt for key ended, whether the pod is
// tried again and when.
func (s *Scheduler) finish(key string, err error) {
	var unschedulable *unschedulableError
	switch {
	case errors.Is(err, errBinding):
		// Not over yet: its binding cycle calls finish.
	case err == nil:
		s.queue.Forget(key)
	case errors.As(err, &unschedulable):
		// No node fits yet: try again when a node changes or a bound
		// pod goes (after a backoff), or after maxUnschedulable.
		s.attempts.WithLabelValues("unschedulable").Inc()
		s.parkUnschedulable(key)
	default:
		s.attempts.WithLabelValues("error").Inc()
		s.log.Error("sync failed; will retry", slog.String("object", key), slog.Any("err", err))
		s.queue.AddRateLimited(key)
	}
}

// sync tries to place one pod: decide on a node, then bind the pod to it
// through the API; or, when no node fits, say why in an event and in the
// pod's PodScheduled condition.
func (s *Scheduler) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // a malformed key never becomes valid
	}
	pod, err := s.podLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		s.forget(key)
		return nil // pod is gone; nothing to do
	}
	if err != nil {
		return err
	}
	if !s.waitsForUs(pod) {
		s.forget(key)
		return nil // bound, going, finished, gated or another scheduler's
	}

	d := s.decide(key, pod)
	switch {
	case d.alreadyAssumed:
		return nil // bound by us already; the informer has not caught up
	case d.node == "":
		s.log.Info(fmt.Sprintf("%d nodes, 0 fit → unschedulable: %s", d.nodes, d.message),
			slog.String("object", key), slog.Int("nodes", d.nodes), slog.Int("fit", 0), slog.Any("reasons", d.reasons))
		s.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "%s", d.message)
		if err := s.setCondition(ctx, pod, corev1.PodReasonUnschedulable, d.message); err != nil {
			return err
		}
		return &unschedulableError{message: d.message}
	}

	if !d.volumes.empty() {
		// The wait for the volumes may be long (the bind timeout): it
		// runs beside the workers, as kube-scheduler's binding cycles
		// do, so that the pods behind this one are placed meanwhile.
		s.log.Info(fmt.Sprintf("%d nodes, %d fit → %s chosen; waiting for %d volume(s) to bind", d.nodes, d.fit, d.node,
			len(d.volumes.bindings)+len(d.volumes.provisions)), slog.String("object", key))
		s.binding.Go(func() {
			if err := s.bindAfterVolumes(ctx, key, pod, d); ctx.Err() == nil {
				s.finish(key, err)
			}
		})
		return errBinding
	}
	return s.bind(ctx, key, pod, d)
}

// bindAfterVolumes is the binding cycle of a pod whose claims need binding
// or provisioning on the chosen node: the VolumeBinding PreBind, then the
// binding.
func (s *Scheduler) bindAfterVolumes(ctx context.Context, key string, pod *corev1.Pod, d decision) error {
	if err := s.bindVolumes(ctx, pod, d.volumes); err != nil {
		return s.preBindFailed(ctx, key, pod, d.volumes, err)
	}
	s.releaseVolumes(key)
	return s.bind(ctx, key, pod, d)
}

// bind binds pod to the node decided on, and records it.
func (s *Scheduler) bind(ctx context.Context, key string, pod *corev1.Pod, d decision) error {
	s.log.Info(fmt.Sprintf("%d nodes, %d fit → bind to %s", d.nodes, d.fit, d.node),
		slog.String("object", key), slog.Int("nodes", d.nodes), slog.Int("fit", d.fit), slog.String("to", d.node),
		slog.Any("scores", d.scores))
	err := s.rc.Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: d.node},
	})
	if err != nil {
		s.forgetAssumed(key)
		if client.IsConflict(err) || client.IsNotFound(err) {
			s.log.Info(fmt.Sprintf("not bound: %v", err), slog.String("object", key))
			return nil // bound by someone else, going, or gone: nothing to do
		}
		return fmt.Errorf("bind pod %s to %s: %w", key, d.node, err)
	}
	s.attempts.WithLabelValues("scheduled").Inc()
	s.recorder.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s to %s", key, d.node)
	return nil
}

// decision is the outcome of one scheduling attempt.
type decision struct {
	alreadyAssumed bool // the pod is already assumed: no decision was made
	nodes, fit     int  // nodes considered, and how many fit
	node           string
	volumes        *volumePlan         // what the pod's claims need on node; nil for a pod without claims
	scores         map[string]int64    // of the nodes that fit
	reasons        map[string][]string // of the nodes that do not
	message        string              // why no node fits, when node is ""
}

// decide filters and scores every node for pod and, when one fits,
// assumes the pod onto the best one. Decisions are made one at a time.
func (s *Scheduler) decide(key string, pod *corev1.Pod) decision {
	nodes := s.nodeLister.List(nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	usage := s.usageByNodeLocked()
	if a, ok := s.assumed[key]; ok && a.pod.UID == pod.UID {
		return decision{alreadyAssumed: true}
	}
	d := decision{nodes: len(nodes), scores: map[string]int64{}, reasons: map[string][]string{}}
	var claims *podClaims
	if hasClaims(pod) {
		var msg string
		if claims, msg = s.volumePreFilter(pod); msg != "" {
			d.message = preFilterMessage(len(nodes), msg)
			s.unschedulable[key] = time.Time{}
			return d
		}
	}
	var fits []scoredNode
	plans := map[string]*volumePlan{}
	for _, node := range nodes {
		used := usage[node.Name]
		if used == nil {
			used = newNodeUsage()
		}
		if reasons := filter(pod, node, used); len(reasons) > 0 {
			d.reasons[node.Name] = reasons
			continue
		}
		if claims != nil {
			plan, reasons := s.volumeFilter(claims, node, s.assumedPVs)
			if len(reasons) > 0 {
				d.reasons[node.Name] = reasons
				continue
			}
			plans[node.Name] = plan
		}
		score := leastAllocatedScore(pod, node, used)
		fits = append(fits, scoredNode{name: node.Name, score: score})
		d.scores[node.Name] = score
	}
	d.fit = len(fits)
	if d.fit == 0 {
		d.message = fitErrorMessage(len(nodes), d.reasons)
		s.unschedulable[key] = time.Time{} // no backoff until parked
		return d
	}
	d.node = selectHost(fits)
	s.assumed[key] = assumedPod{pod: pod, node: d.node, take: usageOf(pod)}
	if plan := plans[d.node]; !plan.empty() {
		d.volumes = plan
		s.assumeVolumesLocked(key, plan)
	}
	delete(s.unschedulable, key)
	return d
}

// usageByNodeLocked is what the pods on each node take: those the
// handlers saw bound and not finished, and those assumed. A node without
// assumed pods shares its entry with s.usage: read it, never change it.
func (s *Scheduler) usageByNodeLocked() map[string]*nodeUsage {
	usage := make(map[string]*nodeUsage, len(s.usage))
	for node, u := range s.usage {
		usage[node] = u
	}
	copied := map[string]bool{}
	for _, a := range s.assumed {
		u := usage[a.node]
		if !copied[a.node] {
			u = u.clone()
			usage[a.node] = u
			copied[a.node] = true
		}
		u.add(a.take)
	}
	return usage
}

// forget drops what the scheduler remembers about a pod it no longer
// places.
func (s *Scheduler) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.assumed, key)
	delete(s.unschedulable, key)
}

func (s *Scheduler) forgetAssumed(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.assumed, key)
}

// setCondition sets the pod's PodScheduled condition to False with reason
// and message, unless it says so already. The transition time moves only
// when the status changes.
func (s *Scheduler) setCondition(ctx context.Context, pod *corev1.Pod, reason, message string) error {
	cond := corev1.PodCondition{
		Type:               corev1.PodScheduled,
		Status:             corev1.ConditionFalse,
		Reason:             reason,
		Message:            message,
		LastTransitionTime: metav1.NewTime(s.clock.Now()),
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse {
			continue
		}
		if c.Reason == cond.Reason && c.Message == cond.Message {
			return nil
		}
		cond.LastTransitionTime = c.LastTransitionTime
	}
	// A strategic merge patch merges conditions by type: the others stay.
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if err != nil {
		return err
	}
	_, err = s.pods.Patch(ctx, pod.Namespace, pod.Name, types.StrategicMergePatchType, patch, "status")
	if client.IsNotFound(err) {
		return nil // pod is gone; nothing to say
	}
	if err != nil {
		return fmt.Errorf("set PodScheduled=False on pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
