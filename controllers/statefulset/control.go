package statefulset

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
)

// plan is one sync's view of a set's pods.
type plan struct {
	set         *appsv1.StatefulSet
	currentSet  *appsv1.StatefulSet // set with the current revision's template
	hist        *history
	replicas    []*corev1.Pod // by ordinal - start; nil where missing
	condemned   []*corev1.Pod // beyond the replicas, highest ordinal first
	monotonic   bool          // OrderedReady
	start, end  int           // the replicas' ordinals are [start, end)
	minReady    int32
	now         time.Time
	partition   int
	rollingPods bool // RollingUpdate
}

// syncPods is the middle of the sync story: replicas, then the condemned,
// then the rollout. It returns the status the pods then have.
func (c *Controller) syncPods(ctx context.Context, set *appsv1.StatefulSet, hist *history, pods []*corev1.Pod) (appsv1.StatefulSetStatus, error) {
	currentSet, err := applyRevision(set, hist.current)
	if err != nil {
		return set.Status, err
	}
	p := &plan{
		set: set, currentSet: currentSet, hist: hist,
		monotonic: set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement,
		start:     startOrdinal(set), minReady: set.Spec.MinReadySeconds, now: c.clock.Now(),
		rollingPods: set.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType,
	}
	p.end = p.start + replicas(set)
	p.replicas = make([]*corev1.Pod, p.end-p.start)
	if ru := set.Spec.UpdateStrategy.RollingUpdate; p.rollingPods && ru != nil && ru.Partition != nil {
		p.partition = int(*ru.Partition)
	}
	for _, pod := range pods {
		ord, ok := ordinalOf(set, pod)
		switch {
		case !ok:
			// not one of the set's names: kube leaves it be
		case ord >= p.start && ord < p.end:
			p.replicas[ord-p.start] = pod
		default:
			p.condemned = append(p.condemned, pod)
		}
	}
	slices.SortFunc(p.condemned, func(a, b *corev1.Pod) int {
		oa, _ := ordinalOf(set, a)
		ob, _ := ordinalOf(set, b)
		return cmp.Compare(ob, oa)
	})

	err = c.runPlan(ctx, p)
	return p.status(), err
}

// runPlan acts on p, stopping where the policy says to wait. With
// OrderedReady it goes one ordinal at a time; with Parallel it works on
// every ordinal at once, in slow-start batches (1, 2, 4, ... pods at a
// time), as kube's runForAll does, so that a burst of creates overlaps
// its round trips and a create that always fails is tried a few times,
// not once per pod.
func (c *Controller) runPlan(ctx context.Context, p *plan) error {
	if stop, err := c.forAll(len(p.replicas), p.monotonic, func(i int) (bool, error) { return c.processReplica(ctx, p, i) }); stop || err != nil {
		return err
	}
	if err := c.applyRetention(ctx, p); err != nil {
		return err
	}
	if stop, err := c.forAll(len(p.condemned), p.monotonic, func(i int) (bool, error) { return c.processCondemned(ctx, p, i) }); stop || err != nil {
		return err
	}
	if !p.rollingPods {
		return nil // OnDelete: the user deletes old pods; their replacements are new
	}
	return c.rollOut(ctx, p)
}

// forAll calls fn for 0..n-1: in order, and only until one says stop or
// fails, when monotonic; otherwise in slow-start batches, stopping after
// a batch in which one failed. It reports whether the sync must stop
// here, and the first error.
func (c *Controller) forAll(n int, monotonic bool, fn func(i int) (stop bool, err error)) (bool, error) {
	if monotonic {
		for i := range n {
			if stop, err := fn(i); stop || err != nil {
				return true, err
			}
		}
		return false, nil
	}
	var next atomic.Int64
	var stopped atomic.Bool
	_, err := controller.SlowStartBatch(n, 1, func() error {
		stop, err := fn(int(next.Add(1) - 1))
		if stop {
			stopped.Store(true)
		}
		return err
	})
	return stopped.Load() || err != nil, err
}

// processReplica makes the replica at p.replicas[i] what the set wants:
// a failed pod is deleted, to be recreated; a missing one is created,
// claims first; an existing one gets any claim it lacks. It reports stop
// when the sync must go no further: OrderedReady waiting for this
// replica, or the cache behind a create. It may run beside the calls for
// other replicas and writes only p.replicas[i].
func (c *Controller) processReplica(ctx context.Context, p *plan, i int) (bool, error) {
	key := setKey(p.set)
	ord := p.start + i
	pod := p.replicas[i]
	if pod != nil && isFailed(pod) && !isTerminating(pod) {
		c.log.Info(fmt.Sprintf("pod %s is %s → delete it, to recreate it", pod.Name, pod.Status.Phase), slog.String("object", key))
		if err := c.deletePod(ctx, p.set, pod); err != nil {
			return true, err
		}
		return p.monotonic, nil // OrderedReady: the next sync recreates it, once it is gone
	}
	if pod == nil {
		created, err := c.createPod(ctx, p, ord)
		if err != nil || created == nil {
			return true, err // created nil: the cache is behind; a pod event brings the next sync
		}
		p.replicas[i] = created
		return p.monotonic, nil // OrderedReady: wait for it to be Running and Ready
	}
	if isTerminating(pod) {
		if p.monotonic {
			c.log.Debug(fmt.Sprintf("pod %s is terminating → wait", pod.Name), slog.String("object", key))
		}
		return p.monotonic, nil
	}
	if err := c.ensureClaims(ctx, p.set, pod, ord); err != nil {
		return true, err
	}
	if p.monotonic && !p.available(pod) {
		if isRunningAndReady(pod) && p.minReady > 0 {
			c.queue.AddAfter(key, time.Duration(p.minReady)*time.Second)
		}
		c.log.Debug(fmt.Sprintf("pod %s is not yet available → wait", pod.Name), slog.String("object", key))
		return true, nil
	}
	return false, nil
}

// processCondemned deletes p.condemned[i], a pod beyond the replicas;
// with OrderedReady only once it is the first unhealthy pod or none is,
// and one at a time.
func (c *Controller) processCondemned(ctx context.Context, p *plan, i int) (bool, error) {
	pod := p.condemned[i]
	if isTerminating(pod) {
		return p.monotonic, nil
	}
	if p.monotonic {
		if bad := p.firstUnhealthy(); bad != nil && bad != pod {
			c.log.Info(fmt.Sprintf("pod %s is unhealthy → wait before deleting %s", bad.Name, pod.Name), slog.String("object", setKey(p.set)))
			return true, nil
		}
	}
	c.log.Info(fmt.Sprintf("want %d, pod %s is beyond → delete it", p.end-p.start, pod.Name), slog.String("object", setKey(p.set)))
	if err := c.deletePod(ctx, p.set, pod); err != nil {
		return true, err
	}
	return p.monotonic, nil
}

// rollOut deletes the pods of old revisions from the highest ordinal down
// to the partition, leaving at most maxUnavailable replicas unavailable.
func (c *Controller) rollOut(ctx context.Context, p *plan) error {
	maxUnavailable := 1
	if ru := p.set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, len(p.replicas), false)
		if err != nil {
			return err
		}
		maxUnavailable = max(n, 1)
	}
	unavailable := 0
	for _, pod := range p.replicas {
		if pod == nil || isTerminating(pod) || !p.available(pod) {
			unavailable++
		}
	}
	for i := len(p.replicas) - 1; i >= p.partition && unavailable < maxUnavailable; i-- {
		pod := p.replicas[i]
		if pod == nil || isTerminating(pod) || revisionOf(pod) == p.hist.update.Name {
			continue
		}
		c.log.Info(fmt.Sprintf("pod %s runs revision %s, not %s → delete it", pod.Name, revisionOf(pod), p.hist.update.Name),
			slog.String("object", setKey(p.set)))
		if err := c.deletePod(ctx, p.set, pod); err != nil {
			return err
		}
		if p.available(pod) {
			unavailable++
		}
	}
	return nil
}

// createPod creates the claims and then the pod of ordinal: from the
// current revision below the partition, from the update revision at and
// above it. It returns nil and no error when the pod exists already.
func (c *Controller) createPod(ctx context.Context, p *plan, ord int) (*corev1.Pod, error) {
	from, rev := p.set, p.hist.update
	if p.rollingPods && ord < p.start+p.partition {
		from, rev = p.currentSet, p.hist.current
	}
	pod, err := newPod(p.set, from, ord, rev.Name)
	if err != nil {
		return nil, err
	}
	if err := c.ensureClaims(ctx, p.set, pod, ord); err != nil {
		return nil, err
	}
	c.log.Info(fmt.Sprintf("want %d, pod %s is missing → create it", p.end-p.start, pod.Name), slog.String("object", setKey(p.set)))
	created, err := c.podClient.Create(ctx, pod)
	if client.IsAlreadyExists(err) {
		return nil, nil
	}
	c.podEvent(p.set, "Create", pod.Name, err)
	return created, err
}

// deletePod deletes pod and records it on set.
func (c *Controller) deletePod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	err := c.podClient.Delete(ctx, pod.Namespace, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pod.UID},
	})
	if client.IsNotFound(err) {
		return nil // gone already
	}
	c.podEvent(set, "Delete", pod.Name, err)
	return err
}

// podEvent records kube's SuccessfulCreate "create Pod web-0 in
// StatefulSet web successful" and its kin.
func (c *Controller) podEvent(set *appsv1.StatefulSet, verb, pod string, err error) {
	if err == nil {
		c.recorder.Eventf(set, corev1.EventTypeNormal, "Successful"+verb, "%s Pod %s in StatefulSet %s successful", strings.ToLower(verb), pod, set.Name)
		return
	}
	c.recorder.Eventf(set, corev1.EventTypeWarning, "Failed"+verb, "%s Pod %s in StatefulSet %s failed error: %s", strings.ToLower(verb), pod, set.Name, err)
}

// available: Running, Ready, and Ready for minReadySeconds.
func (p *plan) available(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && controller.IsPodAvailable(pod, p.minReady, p.now)
}

// firstUnhealthy is the lowest-ordinal replica, then condemned, pod that
// is not Running and Ready or is terminating.
func (p *plan) firstUnhealthy() *corev1.Pod {
	for _, pod := range p.replicas {
		if pod != nil && (!isRunningAndReady(pod) || isTerminating(pod)) {
			return pod
		}
	}
	for i := len(p.condemned) - 1; i >= 0; i-- {
		if pod := p.condemned[i]; !isRunningAndReady(pod) || isTerminating(pod) {
			return pod
		}
	}
	return nil
}

// status counts p's pods as kube's computeReplicaStatus does, and moves
// the current revision to the update revision once a RollingUpdate has
// made every pod updated and ready.
func (p *plan) status() appsv1.StatefulSetStatus {
	st := appsv1.StatefulSetStatus{
		ObservedGeneration: p.set.Generation,
		CurrentRevision:    p.hist.current.Name,
		UpdateRevision:     p.hist.update.Name,
		CollisionCount:     p.set.Status.CollisionCount,
	}
	for _, pod := range slices.Concat(p.replicas, p.condemned) {
		if pod == nil {
			continue
		}
		if pod.Status.Phase != "" {
			st.Replicas++
		}
		if isRunningAndReady(pod) {
			st.ReadyReplicas++
			if p.available(pod) {
				st.AvailableReplicas++
			}
		}
		if pod.Status.Phase != "" && !isTerminating(pod) {
			if revisionOf(pod) == st.CurrentRevision {
				st.CurrentReplicas++
			}
			if revisionOf(pod) == st.UpdateRevision {
				st.UpdatedReplicas++
			}
		}
	}
	if p.rollingPods && st.UpdatedReplicas == st.Replicas && st.ReadyReplicas == st.Replicas {
		st.CurrentRevision = st.UpdateRevision
		st.CurrentReplicas = st.UpdatedReplicas
	}
	return st
}

func statusEqual(a, b appsv1.StatefulSetStatus) bool { return apiequality.Semantic.DeepEqual(a, b) }
