package nodelifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/scheduler/placement"
)

// scheduledEviction is a pod's eviction waiting for its tolerations to run
// out.
type scheduledEviction struct {
	uid types.UID // the pod it is for: a pod recreated under the name starts afresh
	at  time.Time
	// start is when the wait began for taints without a timeAdded.
	start time.Time
}

// evictionPlan is when a pod must leave a node, given the node's NoExecute
// taints and the pod's tolerations.
type evictionPlan struct {
	// untolerated: taint is not tolerated; evict now.
	untolerated bool
	// forever: every taint is tolerated without a time limit.
	forever bool
	// at is when the first toleration runs out: that of taint, after
	// seconds.
	at      time.Time
	taint   corev1.Taint
	seconds int64
}

// planEviction decides when a pod with tolerations must leave a node with
// the NoExecute taints taints. A taint no toleration matches means now.
// Otherwise each taint is tolerated for the longest of the tolerations
// that match it (forever if one has no tolerationSeconds), counted from
// the taint's timeAdded, or from start for a taint that has none; the pod
// must leave when the first of those runs out.
func planEviction(taints []corev1.Taint, tolerations []corev1.Toleration, start time.Time) evictionPlan {
	plan := evictionPlan{forever: true}
	for _, taint := range taints {
		matched, forever := false, false
		var longest int64
		for _, tol := range tolerations {
			if !placement.ToleratesTaint(tol, taint) {
				continue
			}
			if tol.TolerationSeconds == nil {
				forever = true
				break
			}
			s := max(*tol.TolerationSeconds, 0)
			if !matched || s > longest {
				longest = s
			}
			matched = true
		}
		switch {
		case forever:
			continue
		case !matched:
			return evictionPlan{untolerated: true, taint: taint}
		}
		from := start
		if taint.TimeAdded != nil {
			from = taint.TimeAdded.Time
		}
		at := from.Add(time.Duration(longest) * time.Second)
		if plan.forever || at.Before(plan.at) {
			plan = evictionPlan{at: at, taint: taint, seconds: longest}
		}
	}
	return plan
}

// syncPodEviction decides one pod's eviction from the NoExecute taints of
// its node: now, later (scheduled, and the pod's key queued for then), or
// never (any scheduled eviction cancelled).
func (c *Controller) syncPodEviction(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		c.log.Error("bad pod key", "key", key, "err", err)
		return nil // a malformed key never gets better
	}
	pod, err := c.podLister.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		c.cancelEviction(key, nil, "")
		return nil // the pod is gone; nothing to evict
	}
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
		c.cancelEviction(key, nil, "")
		return nil // not bound, or already on its way out
	}
	node, err := c.nodeLister.Get("", pod.Spec.NodeName)
	if apierrors.IsNotFound(err) {
		c.cancelEviction(key, nil, "")
		return nil // the node is gone: its pods are the pod GC's
	}
	if err != nil {
		return err
	}
	taints := noExecuteTaints(node)
	if len(taints) == 0 {
		c.cancelEviction(key, pod, "node has no NoExecute taint any more")
		return nil
	}

	now := c.clock.Now()
	prev, scheduled := c.scheduledEviction(key)
	start := now
	if scheduled && prev.uid == pod.UID {
		start = prev.start
	}
	plan := planEviction(taints, pod.Spec.Tolerations, start)
	switch {
	case plan.forever:
		c.cancelEviction(key, pod, "tolerates every NoExecute taint forever")
		return nil
	case plan.untolerated:
		c.log.Info(fmt.Sprintf("does not tolerate %s → evict now", taintName(plan.taint)),
			slog.String("object", key), slog.String("node", node.Name), slog.String("taint", taintName(plan.taint)))
		return c.evict(ctx, pod)
	case !plan.at.After(now):
		c.log.Info(fmt.Sprintf("tolerated %s for %ds, time is up → evict now", shortKey(plan.taint.Key), plan.seconds),
			slog.String("object", key), slog.String("node", node.Name), slog.String("taint", taintName(plan.taint)),
			slog.Int64("tolerationSeconds", plan.seconds))
		return c.evict(ctx, pod)
	}
	if !scheduled || prev.uid != pod.UID || !prev.at.Equal(plan.at) {
		c.log.Info(fmt.Sprintf("tolerates %s for %ds → evict at %s", shortKey(plan.taint.Key), plan.seconds,
			plan.at.Format(time.TimeOnly)),
			slog.String("object", key), slog.String("node", node.Name), slog.String("taint", taintName(plan.taint)),
			slog.Int64("tolerationSeconds", plan.seconds), slog.Time("evictAt", plan.at))
	}
	c.setScheduledEviction(key, scheduledEviction{uid: pod.UID, at: plan.at, start: start})
	c.podQueue.AddAfter(key, plan.at.Sub(now))
	return nil
}

// evict deletes pod, gracefully, as long as it is still the pod decided
// about (uid precondition).
func (c *Controller) evict(ctx context.Context, pod *corev1.Pod) error {
	key := podKey(pod)
	uid := pod.UID
	err := c.pods.Delete(ctx, pod.Namespace, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case err == nil:
		c.recorder.Eventf(pod, corev1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod %s", key)
		c.metrics.podDeletions.Inc()
	case client.IsNotFound(err), client.IsConflict(err):
		// Gone already, or replaced by a new pod of the same name.
	default:
		return fmt.Errorf("evict pod %s: %w", key, err)
	}
	c.deleteScheduledEviction(key)
	return nil
}

// cancelEviction forgets key's scheduled eviction, if any, logging why and
// recording an Event on pod when they are given (why only with pod).
func (c *Controller) cancelEviction(key string, pod *corev1.Pod, why string) {
	if _, ok := c.scheduledEviction(key); !ok {
		return
	}
	if why != "" {
		c.log.Info(why+" → cancel its eviction", slog.String("object", key), slog.String("node", pod.Spec.NodeName))
	}
	if pod != nil {
		c.recorder.Eventf(pod, corev1.EventTypeNormal, "TaintManagerEviction", "Cancelling deletion of Pod %s", key)
	}
	c.deleteScheduledEviction(key)
}

func (c *Controller) scheduledEviction(key string) (scheduledEviction, bool) {
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	e, ok := c.evictions[key]
	return e, ok
}

func (c *Controller) setScheduledEviction(key string, e scheduledEviction) {
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	c.evictions[key] = e
}

func (c *Controller) deleteScheduledEviction(key string) {
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	delete(c.evictions, key)
}
