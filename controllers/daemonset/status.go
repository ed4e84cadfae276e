package daemonset

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/controllers/internal/controller"
)

// calculateStatus counts, over the nodes, those that should run a pod
// (desired), those of them that have one (current), and those that have
// one but should not (misscheduled); of each desired node's oldest pod,
// whether it is ready, available and of the current template.
func calculateStatus(ds *appsv1.DaemonSet, nodes []*corev1.Node, nodeToPods map[string][]*corev1.Pod, hash string, now time.Time) appsv1.DaemonSetStatus {
	status := *ds.Status.DeepCopy()
	var desired, current, misscheduled, ready, updated, available int32
	gen := api.TemplateGeneration(ds)
	for _, node := range nodes {
		shouldRun, _ := nodeShouldRunDaemonPod(node, ds)
		pods := nodeToPods[node.Name]
		if !shouldRun {
			if len(pods) > 0 {
				misscheduled++
			}
			continue
		}
		desired++
		if len(pods) == 0 {
			continue
		}
		current++
		pod := slices.MinFunc(pods, olderFirst)
		if api.PodIsReady(pod) {
			ready++
			if controller.IsPodAvailable(pod, ds.Spec.MinReadySeconds, now) {
				available++
			}
		}
		if isPodUpdated(pod, hash, gen) {
			updated++
		}
	}
	status.DesiredNumberScheduled = desired
	status.CurrentNumberScheduled = current
	status.NumberMisscheduled = misscheduled
	status.NumberReady = ready
	status.UpdatedNumberScheduled = updated
	status.NumberAvailable = available
	status.NumberUnavailable = desired - available
	return status
}

// updateStatus writes ds's status unless it already has it; with
// observed, status.observedGeneration becomes ds's generation, which a
// sync that waited on its expectations has not acted on. A conflict is
// returned: the newer DaemonSet is on its way to the informer.
func (c *Controller) updateStatus(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, nodeToPods map[string][]*corev1.Pod, hash string, observed bool) error {
	status := calculateStatus(ds, nodes, nodeToPods, hash, c.clock.Now())
	if observed {
		status.ObservedGeneration = ds.Generation
	}
	if statusCountsEqual(status, ds.Status) && status.ObservedGeneration == ds.Status.ObservedGeneration {
		c.requeueForAvailability(ds, status)
		return nil
	}
	cp := ds.DeepCopy()
	cp.Status = status
	if _, err := c.dsClient.UpdateStatus(ctx, cp); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	c.log.Debug(fmt.Sprintf("status desired=%d current=%d ready=%d updated=%d available=%d misscheduled=%d",
		status.DesiredNumberScheduled, status.CurrentNumberScheduled, status.NumberReady,
		status.UpdatedNumberScheduled, status.NumberAvailable, status.NumberMisscheduled),
		slog.String("object", dsKey(ds)))
	c.requeueForAvailability(ds, status)
	return nil
}

// requeueForAvailability looks at ds again after minReadySeconds while
// some ready pods are not yet available.
func (c *Controller) requeueForAvailability(ds *appsv1.DaemonSet, status appsv1.DaemonSetStatus) {
	if ds.Spec.MinReadySeconds > 0 && status.NumberReady != status.NumberAvailable {
		c.queue.AddAfter(dsKey(ds), time.Duration(ds.Spec.MinReadySeconds)*time.Second)
	}
}

func statusCountsEqual(a, b appsv1.DaemonSetStatus) bool {
	return a.DesiredNumberScheduled == b.DesiredNumberScheduled &&
		a.CurrentNumberScheduled == b.CurrentNumberScheduled &&
		a.NumberMisscheduled == b.NumberMisscheduled &&
		a.NumberReady == b.NumberReady &&
		a.UpdatedNumberScheduled == b.UpdatedNumberScheduled &&
		a.NumberAvailable == b.NumberAvailable &&
		a.NumberUnavailable == b.NumberUnavailable
}
