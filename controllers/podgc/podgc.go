// Package podgc deletes pods nobody else will clean up, as
// kube-controller-manager's pod garbage collector does. Every Period it
// makes one pass over the pod cache:
//
//   - Terminated pods (Succeeded or Failed) above TerminatedPodThreshold are
//     deleted, oldest first by creationTimestamp, until exactly the
//     threshold remain.
//   - Pods bound to a node that no longer exists are force-deleted
//     (gracePeriodSeconds=0): no kubelet is left to finish them. A node
//     counts as gone only once it has been missing from the cache for
//     QuarantineTime and a live GET confirms it is absent.
//   - Pods being deleted that were never scheduled are force-deleted: no
//     kubelet will ever finish them either.
//
// Properties:
//
//   - Every delete carries the pod's uid as a precondition, so a pod
//     recreated under the same name is never deleted by mistake.
//   - A pass reads only the caches, apart from the live GET of a node about
//     to be declared gone.
//   - One pass runs at a time; a failed delete is logged and tried again
//     on the next pass if it still applies.
package podgc

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
)

// Kubernetes' defaults.
const (
	// DefaultTerminatedPodThreshold is kube-controller-manager's
	// --terminated-pod-gc-threshold.
	DefaultTerminatedPodThreshold = 12500
	// DefaultPeriod is how often upstream's pod GC runs.
	DefaultPeriod = 20 * time.Second
	// DefaultQuarantineTime is how long upstream waits before it believes
	// a node missing from its cache is really gone.
	DefaultQuarantineTime = 40 * time.Second
)

// Name is the controller's kube-controller-manager name: its --controllers
// name and its logger's controller attribute.
const Name = "podgc"

// Options is what the controller needs: the options every controller takes
// (Client and Informers required), and its own, where zero means
// Kubernetes' default. It reads pods and nodes from Informers and deletes
// through Client; its Recorder gets an Event per pod deleted; its Clock
// times periods and quarantine.
type Options struct {
	controller.Common

	// TerminatedPodThreshold is how many terminated pods may stay. 0 means
	// DefaultTerminatedPodThreshold; a negative value turns this part off.
	TerminatedPodThreshold int
	// Period is the time between passes. 0 means DefaultPeriod.
	Period time.Duration
	// QuarantineTime is how long a node must be missing from the cache
	// before its pods are deleted. 0 means DefaultQuarantineTime; a
	// negative value means no wait (tests).
	QuarantineTime time.Duration
}

// Controller is the pod garbage collector.
type Controller struct {
	pods    *client.Client[*corev1.Pod]
	nodes   *client.Client[*corev1.Node]
	podList informer.Lister[*corev1.Pod]
	nodeLst informer.Lister[*corev1.Node]
	synced  []func() bool

	threshold  int
	period     time.Duration
	quarantine time.Duration
	clock      clock.Clock
	recorder   record.EventRecorder
	log        *slog.Logger

	// missingSince holds, for each node that pods are bound to and that is
	// not in the node cache, when a pass first found it missing. Only the
	// pass in progress touches it (passes never overlap).
	missingSince map[string]time.Time

	// onPass, if set, is called after each pass (tests).
	onPass func()
}

// New returns a pod GC reading from opts.Informers. Call Run to start it.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	c := &Controller{
		pods:         client.For[*corev1.Pod](opts.Client),
		nodes:        client.For[*corev1.Node](opts.Client),
		threshold:    opts.TerminatedPodThreshold,
		period:       opts.Period,
		quarantine:   opts.QuarantineTime,
		clock:        opts.Clock,
		recorder:     opts.Recorder,
		log:          opts.Logger,
		missingSince: map[string]time.Time{},
	}
	if c.threshold == 0 {
		c.threshold = DefaultTerminatedPodThreshold
	}
	if c.period <= 0 {
		c.period = DefaultPeriod
	}
	switch {
	case c.quarantine == 0:
		c.quarantine = DefaultQuarantineTime
	case c.quarantine < 0:
		c.quarantine = 0
	}

	podInformer := informer.For[*corev1.Pod](opts.Informers)
	nodeInformer := informer.For[*corev1.Node](opts.Informers)
	c.podList = podInformer.Lister()
	c.nodeLst = nodeInformer.Lister()
	c.synced = []func() bool{podInformer.HasSynced, nodeInformer.HasSynced}
	return c, nil
}

// Run waits for the caches, then makes a pass every Period until ctx is
// done. workers bounds how many deletes a pass sends at once.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.log.Info("starting",
		slog.Int("threshold", c.threshold), slog.Duration("period", c.period),
		slog.Duration("quarantine", c.quarantine))
	if !informer.WaitForCacheSync(ctx, c.synced...) {
		return
	}
	for {
		c.gc(ctx, controller.Workers(workers))
		timer := c.clock.NewTimer(c.period)
		select {
		case <-ctx.Done():
			timer.Stop()
			c.log.Info("stopped")
			return
		case <-timer.C():
		}
	}
}

// gc is one pass. Each part reads the same snapshot of the pod cache.
func (c *Controller) gc(ctx context.Context, parallel int) {
	pods := c.podList.List(nil)
	var doomed []doomedPod
	if c.threshold > 0 {
		doomed = append(doomed, c.terminatedOverThreshold(pods)...)
	}
	doomed = append(doomed, c.orphaned(ctx, pods)...)
	doomed = append(doomed, unscheduledTerminating(pods)...)
	// A pod may qualify twice (terminated, on a node that is gone): the
	// first reason found is the one told.
	seen := map[types.UID]bool{}
	doomed = slices.DeleteFunc(doomed, func(d doomedPod) bool {
		dup := seen[d.pod.UID]
		seen[d.pod.UID] = true
		return dup
	})
	c.deleteAll(ctx, doomed, parallel)
	if c.onPass != nil {
		c.onPass()
	}
}

// doomedPod is a pod a pass decided to delete, and why.
type doomedPod struct {
	pod    *corev1.Pod
	reason string // Event reason
	why    string // the story: "bound to node n1, which is gone"
}

// terminatedOverThreshold returns the oldest terminated pods that bring
// their number down to the threshold.
func (c *Controller) terminatedOverThreshold(pods []*corev1.Pod) []doomedPod {
	var terminated []*corev1.Pod
	for _, p := range pods {
		if api.IsPodTerminal(p) {
			terminated = append(terminated, p)
		}
	}
	excess := len(terminated) - c.threshold
	if excess <= 0 {
		return nil
	}
	slices.SortFunc(terminated, oldestFirst)
	c.log.Info(strconv.Itoa(len(terminated))+" terminated pods, threshold "+
		strconv.Itoa(c.threshold)+" → delete the "+strconv.Itoa(excess)+" oldest",
		slog.Int("terminated", len(terminated)), slog.Int("threshold", c.threshold), slog.Int("delete", excess))
	out := make([]doomedPod, 0, excess)
	for _, p := range terminated[:excess] {
		out = append(out, doomedPod{pod: p, reason: "TerminatedPodGC",
			why: "terminated (" + string(p.Status.Phase) + ") and over the threshold of " + strconv.Itoa(c.threshold)})
	}
	return out
}

// oldestFirst orders pods by creationTimestamp, then by namespace and name
// so that the order is the same on every pass.
func oldestFirst(a, b *corev1.Pod) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// orphaned returns the pods bound to nodes that are gone: missing from the
// cache for the quarantine time, and confirmed absent by a live GET.
func (c *Controller) orphaned(ctx context.Context, pods []*corev1.Pod) []doomedPod {
	byMissingNode := map[string][]*corev1.Pod{}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		if _, err := c.nodeLst.Get("", p.Spec.NodeName); err == nil {
			continue
		}
		byMissingNode[p.Spec.NodeName] = append(byMissingNode[p.Spec.NodeName], p)
	}
	// Forget nodes that came back, or that no pod is bound to any more.
	for node := range c.missingSince {
		if _, ok := byMissingNode[node]; !ok {
			delete(c.missingSince, node)
		}
	}

	now := c.clock.Now()
	var out []doomedPod
	for node, bound := range byMissingNode {
		since, seen := c.missingSince[node]
		if !seen {
			since = now
			c.missingSince[node] = now
		}
		if now.Sub(since) < c.quarantine {
			if !seen {
				c.log.Info("node is missing; "+strconv.Itoa(len(bound))+
					" pods are bound to it → wait "+c.quarantine.String()+" before believing it is gone",
					slog.String("object", node), slog.Int("pods", len(bound)), slog.Duration("quarantine", c.quarantine))
			}
			continue
		}
		_, err := c.nodes.Get(ctx, "", node)
		switch {
		case err == nil:
			// Our cache is behind: the node exists.
			delete(c.missingSince, node)
			continue
		case !client.IsNotFound(err):
			c.log.Error("cannot check whether the node exists; will try on the next pass",
				slog.String("object", node), slog.Any("err", err))
			continue
		}
		delete(c.missingSince, node)
		for _, p := range bound {
			out = append(out, doomedPod{pod: p, reason: "NodeGone",
				why: "bound to node " + node + ", which is gone"})
		}
	}
	return out
}

// unscheduledTerminating returns the pods being deleted that were never
// bound to a node: no kubelet will finish them. A pod whose grace period is
// already 0 is waiting for its finalizers, which a force delete cannot
// hurry, so it is left alone.
func unscheduledTerminating(pods []*corev1.Pod) []doomedPod {
	var out []doomedPod
	for _, p := range pods {
		if p.DeletionTimestamp == nil || p.Spec.NodeName != "" {
			continue
		}
		if g := p.DeletionGracePeriodSeconds; g != nil && *g == 0 {
			continue
		}
		out = append(out, doomedPod{pod: p, reason: "UnscheduledPodGC",
			why: "being deleted and never scheduled"})
	}
	return out
}

// deleteAll force-deletes the doomed pods, at most parallel at a time.
func (c *Controller) deleteAll(ctx context.Context, doomed []doomedPod, parallel int) {
	var g errgroup.Group
	g.SetLimit(parallel)
	var mu sync.Mutex // orders log lines of concurrent deletes
	for _, d := range doomed {
		g.Go(func() error {
			err := c.forceDelete(ctx, d.pod)
			mu.Lock()
			defer mu.Unlock()
			key := d.pod.Namespace + "/" + d.pod.Name
			switch {
			case err == nil:
				c.log.Info("pod is "+d.why+" → force delete",
					slog.String("object", key), slog.String("reason", d.reason))
				c.recorder.Eventf(d.pod, corev1.EventTypeNormal, d.reason, "Deleted pod %s: %s", d.pod.Name, d.why)
			case client.IsNotFound(err), client.IsConflict(err):
				// Gone already, or replaced by a new pod of the same name.
			default:
				c.log.Error("cannot delete the pod; will try on the next pass",
					slog.String("object", key), slog.Any("err", err))
			}
			return nil
		})
	}
	_ = g.Wait()
}

func (c *Controller) forceDelete(ctx context.Context, pod *corev1.Pod) error {
	var zero int64
	uid := pod.UID
	return c.pods.Delete(ctx, pod.Namespace, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
}
