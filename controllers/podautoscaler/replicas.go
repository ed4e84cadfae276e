package podautoscaler

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

// computeReplicasForMetrics is kube's: a proposal per metric, the largest
// wins; ScalingActive says whether any could be computed.
func (c *Controller) computeReplicasForMetrics(hpa *autoscalingv2.HorizontalPodAutoscaler, scale *autoscalingv1.Scale, ms *podMetricsSet, now time.Time) (int32, string, []autoscalingv2.MetricStatus, error) {
	selector, err := labels.Parse(scale.Status.Selector)
	if err != nil || scale.Status.Selector == "" {
		msg := "selector is required"
		if err != nil {
			msg = fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		}
		c.recorder.Event(hpa, corev1.EventTypeWarning, "SelectorRequired", msg)
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector")
		return 0, "", nil, errors.New(msg)
	}
	pods := c.podLister.ByNamespace(hpa.Namespace).List(selector)
	var (
		best        int32 = -1
		bestName    string
		statuses    = make([]autoscalingv2.MetricStatus, len(hpa.Spec.Metrics))
		invalid     int
		firstErr    error
		firstReason string
	)
	for i, m := range hpa.Spec.Metrics {
		if m.Type != autoscalingv2.ResourceMetricSourceType || m.Resource == nil {
			invalid++
			if firstErr == nil {
				firstErr, firstReason = fmt.Errorf("unable to get metric of type %s: not served by minictl", m.Type), "FailedGetExternalMetric"
			}
			continue
		}
		replicas, status, err := c.resourceReplicas(m.Resource, pods, ms, scale.Status.Replicas, now)
		if err != nil {
			invalid++
			if firstErr == nil {
				firstErr, firstReason = err, "FailedGetResourceMetric"
			}
			c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedGetResourceMetric", err.Error())
			continue
		}
		statuses[i] = status
		if replicas > best {
			best, bestName = replicas, metricName(m.Resource)
		}
	}
	if invalid == len(hpa.Spec.Metrics) || best < 0 {
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, firstReason, "the HPA was unable to compute the replica count: %v", firstErr)
		c.recorder.Eventf(hpa, corev1.EventTypeWarning, "FailedComputeMetricsReplicas", "invalid metrics (%d invalid out of %d), first error is: %v", invalid, len(hpa.Spec.Metrics), firstErr)
		return 0, "", nil, firstErr
	}
	setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from %s", bestName)
	var kept []autoscalingv2.MetricStatus
	for _, s := range statuses {
		if s.Type != "" {
			kept = append(kept, s)
		}
	}
	return best, bestName, kept, nil
}

func metricName(r *autoscalingv2.ResourceMetricSource) string {
	if r.Target.AverageUtilization != nil {
		return fmt.Sprintf("%s resource utilization (percentage of request)", r.Name)
	}
	return fmt.Sprintf("%s resource", r.Name)
}

// resourceReplicas is kube's GetResourceReplicas / GetRawResourceReplicas:
// the pods' usage against their requests (Utilization) or per pod
// (AverageValue), with unready and missing pods counted so that they
// never push the autoscaler the wrong way, and a change within the
// tolerance ignored.
func (c *Controller) resourceReplicas(src *autoscalingv2.ResourceMetricSource, pods []*corev1.Pod, ms *podMetricsSet, current int32, now time.Time) (int32, autoscalingv2.MetricStatus, error) {
	res := src.Name
	status := autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: res}}
	if ms.err != nil {
		return 0, status, fmt.Errorf("failed to get %s utilization: %v", res, ms.err)
	}
	if len(pods) == 0 {
		return 0, status, fmt.Errorf("failed to get %s utilization: no pods returned by selector while calculating replica count", res)
	}
	metrics := map[string]int64{} // milli-units
	for _, p := range pods {
		m, ok := ms.pods[p.Name]
		if !ok {
			continue
		}
		var sum int64
		found := false
		for _, ctr := range m.Containers {
			if q, ok := ctr.Usage[res]; ok {
				sum += q.MilliValue()
				found = true
			}
		}
		if found {
			metrics[p.Name] = sum
		}
	}
	if len(metrics) == 0 {
		return 0, status, fmt.Errorf("failed to get %s utilization: unable to get metrics for resource %s: no metrics returned from resource metrics API", res, res)
	}
	ready, unready, missing, ignored := c.groupPods(pods, metrics, res, now)
	for name := range unready {
		delete(metrics, name)
	}
	for name := range ignored {
		delete(metrics, name)
	}
	if len(metrics) == 0 {
		return 0, status, fmt.Errorf("failed to get %s utilization: did not receive metrics for targeted pods (pods might be unready)", res)
	}
	requests := map[string]int64{}
	if src.Target.AverageUtilization != nil {
		for _, p := range pods {
			var sum int64
			for _, ctr := range p.Spec.Containers {
				q, ok := ctr.Resources.Requests[res]
				if !ok {
					return 0, status, fmt.Errorf("failed to get %s utilization: missing request for %s in container %s of Pod %s", res, res, ctr.Name, p.Name)
				}
				sum += q.MilliValue()
			}
			requests[p.Name] = sum
		}
	}
	ratioOf := func(metrics map[string]int64) (float64, int32, int64, error) {
		var used, requested int64
		for name, v := range metrics {
			used += v
			if src.Target.AverageUtilization != nil {
				requested += requests[name]
			}
		}
		if src.Target.AverageUtilization != nil {
			if requested == 0 {
				return 0, 0, 0, errors.New("no metrics returned matched known pods")
			}
			util := int32(used * 100 / requested)
			return float64(util) / float64(*src.Target.AverageUtilization), util, used / int64(len(metrics)), nil
		}
		avg := used / int64(len(metrics))
		return float64(used) / (float64(src.Target.AverageValue.MilliValue()) * float64(len(metrics))), 0, avg, nil
	}
	ratio, util, avg, err := ratioOf(metrics)
	if err != nil {
		return 0, status, fmt.Errorf("failed to get %s utilization: %v", res, err)
	}
	if src.Target.AverageUtilization != nil {
		status.Resource.Current.AverageUtilization = &util
	}
	status.Resource.Current.AverageValue = resource.NewMilliQuantity(avg, resource.DecimalSI)
	tol := c.opts.Tolerance

	rebalanceIgnored := len(unready) > 0 && ratio > 1.0
	if !rebalanceIgnored && len(missing) == 0 {
		if math.Abs(1.0-ratio) <= tol {
			return current, status, nil
		}
		return int32(math.Ceil(ratio * float64(ready))), status, nil
	}
	// Missing pods count as using their whole request when scaling down
	// and nothing when scaling up; unready ones count as nothing.
	for name := range missing {
		if ratio < 1.0 {
			if src.Target.AverageUtilization != nil {
				metrics[name] = requests[name]
			} else {
				metrics[name] = src.Target.AverageValue.MilliValue()
			}
		} else {
			metrics[name] = 0
		}
	}
	if rebalanceIgnored {
		for name := range unready {
			metrics[name] = 0
		}
	}
	newRatio, _, _, err := ratioOf(metrics)
	if err != nil {
		return 0, status, fmt.Errorf("failed to get %s utilization: %v", res, err)
	}
	if math.Abs(1.0-newRatio) <= tol || (ratio < 1.0 && newRatio > 1.0) || (ratio > 1.0 && newRatio < 1.0) {
		return current, status, nil
	}
	n := int32(math.Ceil(newRatio * float64(len(metrics))))
	if (newRatio < 1.0 && n > current) || (newRatio > 1.0 && n < current) {
		return current, status, nil
	}
	return n, status, nil
}

// groupPods is kube's: deleted and failed pods are ignored, pending ones
// unready; a pod with no metrics is missing; for CPU, a pod is unready
// while it is not Ready and still within its initialization period or
// its initial readiness delay.
func (c *Controller) groupPods(pods []*corev1.Pod, metrics map[string]int64, res corev1.ResourceName, now time.Time) (ready int, unready, missing, ignored map[string]bool) {
	unready, missing, ignored = map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed {
			ignored[p.Name] = true
			continue
		}
		if p.Status.Phase == corev1.PodPending {
			unready[p.Name] = true
			continue
		}
		if _, ok := metrics[p.Name]; !ok {
			missing[p.Name] = true
			continue
		}
		if res == corev1.ResourceCPU {
			var cond *corev1.PodCondition
			for i := range p.Status.Conditions {
				if p.Status.Conditions[i].Type == corev1.PodReady {
					cond = &p.Status.Conditions[i]
				}
			}
			if cond == nil || p.Status.StartTime == nil {
				unready[p.Name] = true
				continue
			}
			start := p.Status.StartTime.Time
			if start.Add(c.opts.CPUInitializationPeriod).After(now) {
				if cond.Status == corev1.ConditionFalse {
					unready[p.Name] = true
					continue
				}
			} else if cond.Status == corev1.ConditionFalse && start.Add(c.opts.InitialReadinessDelay).After(cond.LastTransitionTime.Time) {
				unready[p.Name] = true
				continue
			}
		}
		ready++
	}
	return ready, unready, missing, ignored
}

func mustJSON(v any) []byte {
	data, _ := json.Marshal(v) // a Scale always encodes
	return data
}
