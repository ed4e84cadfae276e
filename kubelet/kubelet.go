package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
	"github.com/minictl/minictl/kubelet/containerlog"
	"github.com/minictl/minictl/scheduler/nodeports"
)

// The annotations that break a simulated node or pod on purpose, set and
// removed through the API like any other annotation.
const (
	// AnnotationHeartbeat "stop" on the Node stops Lease renewals and node
	// status updates while present, as if the kubelet had lost the API
	// server; they resume when it is removed.
	AnnotationHeartbeat = "sim.minictl.io/heartbeat"
	// AnnotationReady "false" on a Pod makes its containers, and so the
	// pod, not ready; removing it (or "true") makes them ready again.
	AnnotationReady = "sim.minictl.io/ready"
	// AnnotationExitCode "N" on a Pod makes its running containers exit
	// with code N, once per value; the restartPolicy decides what follows.
	AnnotationExitCode = "sim.minictl.io/exit-code"
)

// Defaults of Options, as a kubelet has them.
const (
	DefaultHeartbeatInterval    = 10 * time.Second // nodeLeaseRenewInterval
	DefaultStatusUpdateInterval = 10 * time.Second // nodeStatusUpdateFrequency
	// DefaultNodeStatusReportFrequency is how long an unchanged node
	// status goes unwritten (nodeStatusReportFrequency): the Lease, not
	// the status, tells the control plane the node is alive.
	DefaultNodeStatusReportFrequency = 5 * time.Minute
	// LeaseDurationSeconds is the node Lease's duration: the node
	// lifecycle controller reads a Lease not renewed for this long as a
	// node gone silent.
	LeaseDurationSeconds int32 = 40
	// Version is the kubelet version a simulated node reports.
	Version = "v1.36.0-minictl"
)

// podWorkers is how many pods one kubelet moves at a time.
const podWorkers = 4

// statusTries bounds the attempts to write one status against conflicts.
const statusTries = 5

// DefaultCapacity is what a simulated node offers when Options.Capacity
// does not say: 4 cpus, 8Gi of memory, 100Gi of ephemeral storage and room
// for 110 pods.
func DefaultCapacity() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("4"),
		corev1.ResourceMemory:           resource.MustParse("8Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
	}
}

// TaintExternalCloudProvider marks a Node that its cloud controller
// manager has yet to initialize (kube's
// node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule).
const TaintExternalCloudProvider = "node.cloudprovider.kubernetes.io/uninitialized"

// Options is what a Kubelet needs.
type Options struct {
	// Client is how the kubelet reaches the API server.
	Client *client.RESTClient
	// NodeName names the Node the kubelet registers and runs pods for.
	NodeName string
	// Capacity is what the node offers (and, with no reservations, its
	// allocatable); resources it leaves out come from DefaultCapacity.
	Capacity corev1.ResourceList
	// Labels are added to the Node's default labels at registration
	// (kubelet's --node-labels).
	Labels map[string]string
	// Taints are the Node's taints at registration (kubelet's
	// --register-with-taints).
	Taints []corev1.Taint
	// ExternalCloudProvider says a cloud controller manager initializes
	// the Node (kubelet's --cloud-provider=external): the kubelet
	// registers it with the TaintExternalCloudProvider taint, which keeps
	// pods off until the cloud-node controller has written what the cloud
	// knows of the machine and removed the taint.
	ExternalCloudProvider bool
	// Informers, if set, is a shared factory the kubelet takes its
	// informers from (a pod informer filtered to this node and a node
	// informer filtered to its Node); the caller starts it after New.
	// Nil: the kubelet has a factory of its own, which Run starts.
	Informers *informer.SharedInformerFactory
	// Recorder records events about the node and its pods; nil records
	// none.
	Recorder record.EventRecorder
	// Logger tells what the kubelet does; nil discards.
	Logger *slog.Logger
	// HeartbeatInterval is how often the node Lease is renewed;
	// 0 is DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// StatusUpdateInterval is how often the node status is computed
	// (kubelet's nodeStatusUpdateFrequency); it is written when it
	// changed, or when NodeStatusReportFrequency has passed since the last
	// write (its conditions' lastHeartbeatTime moves then). 0 is
	// DefaultStatusUpdateInterval.
	StatusUpdateInterval time.Duration
	// NodeStatusReportFrequency is how often an unchanged node status is
	// written all the same (kubelet's nodeStatusReportFrequency). 0 is,
	// as kube's kubelet defaults it, StatusUpdateInterval if that was
	// given, else DefaultNodeStatusReportFrequency.
	NodeStatusReportFrequency time.Duration
	// PodCIDR is where pod IPs come from until the Node's spec.podCIDR is
	// set (by the node IPAM controller); "" is 10.88.<n>.0/24, n being
	// the number the node name ends with (or a hash of the name).
	PodCIDR string
	// Address is the node's simulated InternalIP, also the hostIP of its
	// pods, and where the kubelet serves its API (/containerLogs,
	// /healthz); "" is 127.0.1.<n>, on Linux a loopback address of its
	// own.
	Address string
	// Port is the port the kubelet serves its API on, reported in the
	// Node's status.daemonEndpoints (kubelet's --port, DefaultPort); 0 is
	// any free port.
	Port int
	// TerminationDelay is how long a deleted pod stays Terminating, its
	// containers stopped, before the kubelet removes it; 0 removes it at
	// once.
	TerminationDelay time.Duration
	// Clock is the kubelet's time source: the times it writes (heartbeats,
	// Lease renewals, pod conditions), its waits and its workqueue; nil is
	// the real clock.
	Clock clock.Clock
	// BackOffBase is the first delay before a container that keeps
	// exiting is restarted again (CrashLoopBackOff); it doubles with each
	// restart up to MaxBackOff. 0 is DefaultBackOffBase, and
	// DefaultMaxBackOff.
	BackOffBase, MaxBackOff time.Duration
	// VolumeMountTimeout is how long a pod waits for its claims to be
	// bound to volumes this node can reach before a FailedMount event says
	// so; 0 is DefaultVolumeMountTimeout.
	VolumeMountTimeout time.Duration
}

// Kubelet is one simulated node agent. See the package doc.
type Kubelet struct {
	name       string
	opts       Options
	nodes      *client.Client[*corev1.Node]
	pods       *client.Client[*corev1.Pod]
	leases     *client.Client[*coordinationv1.Lease]
	informers  *informer.SharedInformerFactory
	ownFactory bool
	podLister  informer.Lister[*corev1.Pod]
	nodeLister informer.Lister[*corev1.Node]
	synced     []func() bool
	queue      *workqueue.Queue[string]
	recorder   record.EventRecorder
	log        *slog.Logger
	clock      clock.Clock
	bootID     string
	// kick (buffered 1) tells the heartbeat loop that the heartbeat
	// annotation changed.
	kick chan struct{}

	// logs is what the node's simulated containers printed.
	logs *containerlog.Logs
	// port is the port the kubelet's API listens on, set by Run before
	// anything reads it.
	port int32
	// usage meters what the node and its containers use, for
	// /metrics/resource.
	usage *usageMeter

	// lease is the Lease as last written, and lastStatusReport when the
	// node status was last written; the heartbeat goroutine's own.
	lease            *coordinationv1.Lease
	lastStatusReport time.Time

	// mu guards memos, logged and ips.
	mu sync.Mutex
	// memos holds what the kubelet remembers of each pod it runs, by key,
	// from its first sync until the pod is gone or finished.
	memos map[string]*podMemo
	// logged is the uid of each pod, by key, whose containers have logs,
	// until the pod is gone.
	logged map[string]types.UID
	ips    ipAllocator
}

// podMemo is what the kubelet remembers of one pod.
type podMemo struct {
	uid types.UID
	// ip is the pod's IP from the moment it is chosen, before the status
	// carrying it is written: it counts as in use.
	ip netip.Addr
	// exitKnown says whether exitHandled is known: after a restart of the
	// kubelet it is not, until the pod is seen.
	exitKnown bool
	// exitHandled is the exit-code annotation value last applied, "" when
	// the annotation is absent.
	exitHandled string
	// stoppedAt is when the pod's containers were stopped for deletion.
	stoppedAt time.Time
	// admitted says the node admitted the pod: its host ports are taken,
	// before the status saying it started is written.
	admitted bool
	// backOff is the restart back-off of the pod's containers.
	backOff backOff
	// runs is the current run of each container that has run: a list, as
	// a pod has one container or a few (a map per pod held ten times the
	// bytes).
	runs []containerRun
	// volumesWaitSince is when the pod began to wait for its volumes, or
	// was last told it waits (FailedMount); zero while it does not wait.
	volumesWaitSince time.Time
	// status is the status the kubelet last wrote, as the API server
	// answered the write, until its informer has heard it back: the
	// kubelet's own word on its containers. nil once a sync finds the
	// informer's pod already carrying what the kubelet would write, which
	// is then the kubelet's word (one copy of each settled pod's status,
	// not two).
	status *corev1.PodStatus
}

// New returns a kubelet for opts.NodeName. Nothing happens until Run.
func New(opts Options) (*Kubelet, error) {
	if opts.Client == nil || opts.NodeName == "" {
		return nil, errors.New("kubelet: Client and NodeName are required")
	}
	capacity := DefaultCapacity()
	for name, q := range opts.Capacity {
		capacity[name] = q.DeepCopy()
	}
	opts.Capacity = capacity
	n := nodeNumber(opts.NodeName)
	if opts.PodCIDR == "" {
		opts.PodCIDR = fmt.Sprintf("10.88.%d.0/24", n)
	}
	if _, err := netip.ParsePrefix(opts.PodCIDR); err != nil {
		return nil, fmt.Errorf("kubelet: pod CIDR: %w", err)
	}
	if opts.Address == "" {
		opts.Address = fmt.Sprintf("127.0.1.%d", n)
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.NodeStatusReportFrequency <= 0 {
		// For backward compatibility kube's kubelet reports as often as
		// it updates when only the update frequency is set.
		opts.NodeStatusReportFrequency = DefaultNodeStatusReportFrequency
		if opts.StatusUpdateInterval > 0 {
			opts.NodeStatusReportFrequency = opts.StatusUpdateInterval
		}
	}
	if opts.StatusUpdateInterval <= 0 {
		opts.StatusUpdateInterval = DefaultStatusUpdateInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.BackOffBase <= 0 {
		opts.BackOffBase = DefaultBackOffBase
	}
	if opts.MaxBackOff <= 0 {
		opts.MaxBackOff = max(DefaultMaxBackOff, opts.BackOffBase)
	}
	if opts.Recorder == nil {
		opts.Recorder = record.Discard
	}
	if opts.VolumeMountTimeout <= 0 {
		opts.VolumeMountTimeout = DefaultVolumeMountTimeout
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.ExternalCloudProvider && !slices.ContainsFunc(opts.Taints, func(t corev1.Taint) bool { return t.Key == TaintExternalCloudProvider }) {
		opts.Taints = append(slices.Clip(opts.Taints), corev1.Taint{Key: TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	}
	k := &Kubelet{
		name:      opts.NodeName,
		opts:      opts,
		nodes:     client.For[*corev1.Node](opts.Client),
		pods:      client.For[*corev1.Pod](opts.Client),
		leases:    client.For[*coordinationv1.Lease](opts.Client),
		informers: opts.Informers,
		recorder:  opts.Recorder,
		log:       opts.Logger.With("node", opts.NodeName),
		clock:     opts.Clock,
		bootID:    uuid.NewString(),
		kick:      make(chan struct{}, 1),
		memos:     map[string]*podMemo{},
		logged:    map[string]types.UID{},
		logs:      containerlog.New(),
		usage:     newUsageMeter(opts.Clock.Now()),
		// The queue exists before any handler can fire.
		queue: workqueue.New[string]("kubelet-"+opts.NodeName, workqueue.Options{Clock: opts.Clock}),
	}
	if k.informers == nil {
		k.informers = informer.NewSharedInformerFactory(opts.Client, informer.FactoryOptions{Logger: opts.Logger, Transform: informer.Lean})
		k.ownFactory = true
	}
	onNode := fields.OneTermEqualSelector("spec.nodeName", k.name).String()
	podInformer := informer.ForWith[*corev1.Pod](k.informers, onNode, func(o *metav1.ListOptions) { o.FieldSelector = onNode })
	named := fields.OneTermEqualSelector("metadata.name", k.name).String()
	nodeInformer := informer.ForWith[*corev1.Node](k.informers, named, func(o *metav1.ListOptions) { o.FieldSelector = named })
	k.podLister, k.nodeLister = podInformer.Lister(), nodeInformer.Lister()

	podReg, err := podInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { k.enqueue(obj) },
		UpdateFunc: func(_, obj any) { k.enqueue(obj) },
		DeleteFunc: k.enqueue,
	})
	if err != nil {
		k.queue.ShutDown()
		return nil, fmt.Errorf("kubelet: pod handler: %w", err)
	}
	nodeReg, err := nodeInformer.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc: func(any, bool) { k.kickHeartbeat() },
		UpdateFunc: func(oldObj, newObj any) {
			if oldObj.(*corev1.Node).Annotations[AnnotationHeartbeat] != newObj.(*corev1.Node).Annotations[AnnotationHeartbeat] {
				k.kickHeartbeat()
			}
		},
	})
	if err != nil {
		k.queue.ShutDown()
		return nil, fmt.Errorf("kubelet: node handler: %w", err)
	}
	k.synced = []func() bool{podReg.HasSynced, nodeReg.HasSynced}
	return k, nil
}

func (k *Kubelet) enqueue(obj any) {
	key, err := informer.MetaNamespaceKeyFunc(obj)
	if err != nil {
		k.log.Error("pod key", "err", err)
		return
	}
	k.queue.Add(key)
}

func (k *Kubelet) kickHeartbeat() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// Run serves the kubelet's API, registers the Node, then heartbeats and
// runs the pods bound to it until ctx is done:
//
//  1. listen on the node address and serve /containerLogs and /healthz;
//  2. register the Node, with the port in its daemonEndpoints (retrying
//     until the API server answers);
//  3. start its own informers, if it has them, and wait for the caches;
//  4. start the heartbeat loop (Lease and node status) and the pod
//     workers;
//  5. when ctx is done, stop the workers and the heartbeat loop, its own
//     informers and its server, and return.
//
// It returns an error only if it cannot listen, or ctx ended before the
// node registered or the caches synced.
func (k *Kubelet) Run(ctx context.Context) error {
	defer k.queue.ShutDown()
	k.log.Info("starting", slog.String("object", k.name), slog.String("podCIDR", k.opts.PodCIDR), slog.String("address", k.opts.Address))
	ln, err := k.listen()
	if err != nil {
		return err
	}
	serveCtx, stopServing := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() {
		defer close(served)
		k.serve(serveCtx, ln)
	}()
	defer func() {
		stopServing()
		<-served
	}()
	node, err := k.registerNode(ctx)
	if err != nil {
		return err
	}
	k.recorder.Eventf(node, corev1.EventTypeNormal, "Starting", "Starting kubelet.")
	if k.ownFactory {
		k.informers.Start(ctx)
		defer k.informers.Shutdown()
	}
	if !informer.WaitForCacheSync(ctx, k.synced...) {
		return fmt.Errorf("kubelet %s: wait for caches: %w", k.name, ctx.Err())
	}
	var wg sync.WaitGroup
	wg.Go(func() { k.heartbeat(ctx) })
	for range podWorkers {
		wg.Go(func() {
			for k.processNextWorkItem(ctx) {
			}
		})
	}
	<-ctx.Done()
	k.queue.ShutDown()
	wg.Wait()
	k.log.Info("stopped", slog.String("object", k.name))
	return nil
}

// processNextWorkItem is the only place that decides retry or forget.
func (k *Kubelet) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := k.queue.Get()
	if shutdown {
		return false
	}
	defer k.queue.Done(key)
	err := k.syncPod(ctx, key)
	var requeue *workqueue.RequeueAfterError
	switch {
	case err == nil:
		k.queue.Forget(key)
	case errors.As(err, &requeue):
		k.queue.Forget(key)
		k.queue.AddAfter(key, requeue.After)
	default:
		k.log.Error("sync pod failed; will retry", slog.String("object", key), slog.Any("err", err))
		k.queue.AddRateLimited(key)
	}
	return true
}

// syncPod moves one pod bound to this node one step along its life: start
// it, apply what its annotations ask, stop and remove it once deleted.
func (k *Kubelet) syncPod(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // a malformed key never becomes valid
	}
	pod, err := k.podLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		k.forgetLogs(key)
		return nil // pod is gone; its IP is free, its logs too
	}
	if err != nil {
		return err
	}
	switch {
	case pod.DeletionTimestamp != nil:
		return k.stopPod(ctx, key, pod)
	case api.IsPodTerminal(pod):
		k.forget(key)
		return nil // finished: nothing runs, its IP is free
	}
	if !started(pod) {
		unmounted, err := k.unmountedVolumes(ctx, pod)
		if err != nil {
			return err
		}
		if len(unmounted) > 0 {
			return k.awaitVolumes(ctx, key, pod, unmounted)
		}
	}
	return k.writeStatus(ctx, key, pod, false)
}

// awaitVolumes keeps a pod whose volumes are not ready from starting: it
// is Pending, its containers waiting ContainerCreating, and looked at
// again shortly; past the mount timeout a FailedMount event says which
// volumes it waits for.
func (k *Kubelet) awaitVolumes(ctx context.Context, key string, pod *corev1.Pod, unmounted []string) error {
	status := waitingForVolumes(pod, metav1.NewTime(k.clock.Now()))
	if !apiequality.Semantic.DeepEqual(status, pod.Status) {
		cp := pod.DeepCopy()
		cp.Status = status
		_, err := k.pods.UpdateStatus(ctx, cp)
		switch {
		case client.IsNotFound(err):
			return nil
		case client.IsConflict(err):
			return workqueue.RequeueAfter(0, "the pod changed meanwhile")
		case err != nil:
			return fmt.Errorf("update status of pod %s: %w", key, err)
		}
		k.log.Info(fmt.Sprintf("waiting for volumes %v", unmounted), slog.String("object", key))
	}
	if k.mountTimedOut(key, pod) {
		k.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedMount", "%s", failedMountMessage(unmounted))
	}
	return workqueue.RequeueAfter(volumePollInterval, "its volumes are not ready")
}

// stopPod ends a pod being deleted: its containers stop (the status says
// so), and after TerminationDelay the pod is removed for good, with a uid
// precondition so that a new pod of the same name is never removed.
func (k *Kubelet) stopPod(ctx context.Context, key string, pod *corev1.Pod) error {
	if started(pod) && !api.IsPodTerminal(pod) {
		if err := k.writeStatus(ctx, key, pod, true); err != nil {
			return err
		}
	}
	k.mu.Lock()
	m := k.memoLocked(key, pod.UID)
	now := k.clock.Now()
	if m.stoppedAt.IsZero() {
		m.stoppedAt = now
	}
	wait := k.opts.TerminationDelay - now.Sub(m.stoppedAt)
	k.mu.Unlock()
	if wait > 0 {
		return workqueue.RequeueAfter(wait, "stopped, it stays Terminating for TerminationDelay")
	}
	err := k.pods.Delete(ctx, pod.Namespace, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if client.IsNotFound(err) || client.IsConflict(err) {
		return nil // gone already, or replaced by a new pod of that name
	}
	if err != nil {
		return fmt.Errorf("delete pod %s: %w", key, err)
	}
	k.log.Info("deleted → containers stopped, pod removed", slog.String("object", key))
	return nil
}

// writeStatus writes the pod's next status (see nextStatus); stop asks for
// its containers to stop. On a conflict (the cache was behind) it reads the
// pod again and decides again.
func (k *Kubelet) writeStatus(ctx context.Context, key string, pod *corev1.Pod, stop bool) error {
	for attempt := 1; ; attempt++ {
		step, exitValue, err := k.plan(key, pod, stop)
		if err != nil {
			k.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			return err
		}
		out := nextStatus(pod, step)
		status := out.status
		var written *corev1.Pod
		if !apiequality.Semantic.DeepEqual(status, pod.Status) {
			cp := pod.DeepCopy()
			cp.Status = status
			written, err = k.pods.UpdateStatus(ctx, cp)
		}
		switch {
		case err == nil:
			k.exitApplied(key, pod.UID, exitValue)
			var said *corev1.PodStatus
			if written != nil {
				// The status alone: the rest of the answered pod is garbage.
				said = new(written.Status)
			}
			k.ran(key, pod, out, said, step.now.Time)
			if out.story != "" {
				attrs := []any{slog.String("object", key)}
				if status.Phase != pod.Status.Phase {
					attrs = append(attrs, slog.String("from", string(pod.Status.Phase)), slog.String("to", string(status.Phase)))
				}
				k.log.Info(out.story, attrs...)
			}
			for _, e := range out.events {
				k.recorder.Eventf(pod, e.eventType, e.reason, "%s", e.message)
			}
			if !out.wake.IsZero() {
				return workqueue.RequeueAfter(out.wake.Sub(step.now.Time), "its containers have more to do")
			}
			return nil
		case client.IsNotFound(err):
			return nil // pod is gone; nothing to do
		case !client.IsConflict(err) || attempt == statusTries:
			return fmt.Errorf("update status of pod %s: %w", key, err)
		}
		if pod, err = k.pods.Get(ctx, pod.Namespace, pod.Name); err != nil {
			if client.IsNotFound(err) {
				return nil // pod is gone; nothing to do
			}
			return fmt.Errorf("get pod %s: %w", key, err)
		}
		if pod.Spec.NodeName != k.name || api.IsPodTerminal(pod) || (pod.DeletionTimestamp != nil) != stop {
			return nil // it changed meanwhile; its own event brings it back
		}
	}
}

// plan decides the pod's next step: admission (its host ports free on the
// node) and an IP if it starts now, an exit if its exit-code annotation
// has a value not applied yet (returned, to be marked applied once the
// status is written), readiness from its ready annotation, and the
// containers' restart back-off.
func (k *Kubelet) plan(key string, pod *corev1.Pod, stop bool) (simulation, *string, error) {
	step := simulation{now: metav1.NewTime(k.clock.Now()), stop: stop}
	if stop {
		return step, nil, nil
	}
	step.unready = pod.Annotations[AnnotationReady] == "false"

	k.mu.Lock()
	defer k.mu.Unlock()
	m := k.memoLocked(key, pod.UID)
	step.backOff = m.backOff
	step.runs = slices.Clone(m.runs)
	if !started(pod) {
		if !m.admitted && !k.hostPortsFreeLocked(pod) {
			step.refusal = &refusal{reason: nodeports.Name, message: fmt.Sprintf("Predicate %s failed: %s", nodeports.Name, nodeports.ErrReason)}
			return step, nil, nil
		}
		m.admitted = true
		step.hostIP, step.podIP = k.opts.Address, k.opts.Address
		if !pod.Spec.HostNetwork {
			ip, err := k.podIPLocked(m)
			if err != nil {
				return step, nil, err
			}
			step.podIP = ip.String()
		}
	}

	value, ok := pod.Annotations[AnnotationExitCode]
	switch {
	case !ok:
		m.exitKnown, m.exitHandled = true, ""
		return step, nil, nil
	case m.exitKnown && m.exitHandled == value:
		return step, nil, nil // applied already
	}
	code, err := strconv.ParseInt(value, 10, 32)
	switch {
	case err != nil:
		k.log.Warn(fmt.Sprintf("ignoring %s=%q: not an exit code", AnnotationExitCode, value), slog.String("object", key))
		m.exitKnown, m.exitHandled = true, value
	case !m.exitKnown && exitShown(pod, int32(code)):
		m.exitKnown, m.exitHandled = true, value // applied before this kubelet (re)started
	default:
		step.exit = new(int32(code))
		return step, &value, nil
	}
	return step, nil, nil
}

// exitShown reports whether a container of pod shows an exit with code,
// as the status does once an exit was applied.
func exitShown(pod *corev1.Pod, code int32) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t != nil && t.ExitCode == code {
				return true
			}
		}
	}
	return false
}

func (k *Kubelet) exitApplied(key string, uid types.UID, value *string) {
	if value == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	m := k.memoLocked(key, uid)
	m.exitKnown, m.exitHandled = true, *value
}

// containerRun is what the kubelet remembers of a container's current run.
type containerRun struct {
	container string
	// startedAt is when the run started, to the nanosecond: a status keeps
	// whole seconds. Zero when the kubelet did not see it start (it
	// restarted since).
	startedAt time.Time
	// printed is how many lines of its script the run printed.
	printed int
}

// run is the current run of container, added if it has none yet. The
// pointer is good until the next call.
func (m *podMemo) run(container string) *containerRun {
	for i := range m.runs {
		if m.runs[i].container == container {
			return &m.runs[i]
		}
	}
	m.runs = append(m.runs, containerRun{container: container})
	return &m.runs[len(m.runs)-1]
}

// memoLocked returns the memo of the pod key with uid, a new one if the
// kubelet has none or has one of an earlier pod of that name.
func (k *Kubelet) memoLocked(key string, uid types.UID) *podMemo {
	m, ok := k.memos[key]
	if !ok || m.uid != uid {
		m = &podMemo{
			uid:     uid,
			backOff: backOff{base: k.opts.BackOffBase, max: k.opts.MaxBackOff},
		}
		k.memos[key] = m
	}
	return m
}

// forget drops the memo of a pod gone or finished, and so frees its IP.
func (k *Kubelet) forget(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.memos, key)
}

// forgetLogs forgets a pod that is gone: its memo and its containers'
// logs.
func (k *Kubelet) forgetLogs(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.memos, key)
	if uid, ok := k.logged[key]; ok {
		k.logs.Forget(uid)
		delete(k.logged, key)
	}
}

// hostPortsFreeLocked reports whether the host ports pod asks for are
// free on the node: not taken by another pod admitted there and not
// finished, as the kubelet's admission checks them.
func (k *Kubelet) hostPortsFreeLocked(pod *corev1.Pod) bool {
	var others []*corev1.Pod
	for _, other := range k.podLister.List(nil) {
		if other.UID == pod.UID || api.IsPodTerminal(other) {
			continue
		}
		m := k.memos[other.Namespace+"/"+other.Name]
		if started(other) || (m != nil && m.uid == other.UID && m.admitted) {
			others = append(others, other)
		}
	}
	return nodeports.Fits(pod, others)
}

// podIPLocked returns the memo's IP, choosing one first if it has none:
// from the Node's spec.podCIDR, or Options.PodCIDR until that is set, and
// not one that a pod on the node still uses.
func (k *Kubelet) podIPLocked(m *podMemo) (netip.Addr, error) {
	if m.ip.IsValid() {
		return m.ip, nil
	}
	inUse := map[netip.Addr]bool{}
	for _, other := range k.memos {
		if other.ip.IsValid() {
			inUse[other.ip] = true
		}
	}
	for _, pod := range k.podLister.List(nil) {
		if ip, err := netip.ParseAddr(pod.Status.PodIP); err == nil && !api.IsPodTerminal(pod) {
			inUse[ip] = true
		}
	}
	cidr := k.opts.PodCIDR
	if node, err := k.nodeLister.Get("", k.name); err == nil && node.Spec.PodCIDR != "" {
		cidr = node.Spec.PodCIDR
	}
	ip, err := k.ips.allocate(cidr, func(ip netip.Addr) bool { return inUse[ip] })
	if err != nil {
		return netip.Addr{}, err
	}
	m.ip = ip
	return ip, nil
}
