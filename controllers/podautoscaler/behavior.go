package podautoscaler

import (
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

type timestampedRecommendation struct {
	recommendation int32
	at             time.Time
}

type timestampedScaleEvent struct {
	change int32
	at     time.Time
}

// normalize is kube's normalizeDesiredReplicasWithBehaviors: the proposal
// stabilized over the windows (the smallest of the scale-up window, the
// largest of the scale-down window), then bound by the policies' rates
// and by min/maxReplicas, with ScalingLimited saying why.
func (c *Controller) normalize(key string, hpa *autoscalingv2.HorizontalPodAutoscaler, b *autoscalingv2.HorizontalPodAutoscalerBehavior, minReplicas, current, proposal int32, now time.Time) int32 {
	upWindow := time.Duration(deref(b.ScaleUp.StabilizationWindowSeconds, 0)) * time.Second
	downWindow := c.opts.DownscaleStabilization
	if b.ScaleDown.StabilizationWindowSeconds != nil {
		downWindow = time.Duration(*b.ScaleDown.StabilizationWindowSeconds) * time.Second
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	up, down := proposal, proposal
	var kept []timestampedRecommendation
	for _, r := range c.recommendations[key] {
		if r.at.After(now.Add(-upWindow)) {
			up = min(up, r.recommendation)
		}
		if r.at.After(now.Add(-downWindow)) {
			down = max(down, r.recommendation)
		}
		if r.at.After(now.Add(-max(upWindow, downWindow))) {
			kept = append(kept, r)
		}
	}
	c.recommendations[key] = append(kept, timestampedRecommendation{proposal, now})
	stabilized := max(current, up)
	stabilized = min(stabilized, down)

	desired := stabilized
	reason, msg := "DesiredWithinRange", "the desired count is within the acceptable range"
	if stabilized > current {
		limit := scaleUpLimit(current, c.scaleUpEvents[key], b.ScaleUp, now)
		limit = max(limit, current)
		allowed := min(hpa.Spec.MaxReplicas, limit)
		if stabilized > allowed {
			desired = allowed
			if allowed == limit {
				reason, msg = "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
			} else {
				reason, msg = "TooManyReplicas", "the desired replica count is more than the maximum replica count"
			}
		}
	} else if stabilized < current {
		limit := scaleDownLimit(current, c.scaleDownEvents[key], b.ScaleDown, now)
		limit = min(limit, current)
		allowed := max(minReplicas, limit)
		if stabilized < allowed {
			desired = allowed
			if allowed == limit {
				reason, msg = "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"
			} else {
				reason, msg = "TooFewReplicas", "the desired replica count is less than the minimum replica count"
			}
		}
	}
	if desired > hpa.Spec.MaxReplicas {
		desired, reason, msg = hpa.Spec.MaxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
	}
	if desired < minReplicas {
		desired, reason, msg = minReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
	}
	status := "False"
	if reason != "DesiredWithinRange" {
		status = "True"
	}
	setCondition(hpa, autoscalingv2.ScalingLimited, corev1.ConditionStatus(status), reason, "%s", msg)
	return desired
}

// storeScaleEvent remembers a rescale for the policies' periods.
func (c *Controller) storeScaleEvent(key string, from, to int32, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cutoff := now.Add(-30 * time.Minute) // the longest period a policy may have
	prune := func(evs []timestampedScaleEvent) []timestampedScaleEvent {
		var kept []timestampedScaleEvent
		for _, e := range evs {
			if e.at.After(cutoff) {
				kept = append(kept, e)
			}
		}
		return kept
	}
	if to > from {
		c.scaleUpEvents[key] = append(prune(c.scaleUpEvents[key]), timestampedScaleEvent{to - from, now})
	} else {
		c.scaleDownEvents[key] = append(prune(c.scaleDownEvents[key]), timestampedScaleEvent{from - to, now})
	}
}

func changeInPeriod(evs []timestampedScaleEvent, period time.Duration, now time.Time) int32 {
	var sum int32
	for _, e := range evs {
		if e.at.After(now.Add(-period)) {
			sum += e.change
		}
	}
	return sum
}

// scaleUpLimit is kube's calculateScaleUpLimitWithScalingRules.
func scaleUpLimit(current int32, evs []timestampedScaleEvent, r *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	if r.SelectPolicy != nil && *r.SelectPolicy == autoscalingv2.DisabledPolicySelect {
		return current
	}
	pickMin := r.SelectPolicy != nil && *r.SelectPolicy == autoscalingv2.MinChangePolicySelect
	result := int32(math.MinInt32)
	if pickMin {
		result = math.MaxInt32
	}
	for _, p := range r.Policies {
		start := current - changeInPeriod(evs, time.Duration(p.PeriodSeconds)*time.Second, now)
		var proposed int32
		if p.Type == autoscalingv2.PodsScalingPolicy {
			proposed = start + p.Value
		} else {
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		}
		if pickMin {
			result = min(result, proposed)
		} else {
			result = max(result, proposed)
		}
	}
	return result
}

// scaleDownLimit is kube's calculateScaleDownLimitWithBehaviors.
func scaleDownLimit(current int32, evs []timestampedScaleEvent, r *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	if r.SelectPolicy != nil && *r.SelectPolicy == autoscalingv2.DisabledPolicySelect {
		return current
	}
	pickMax := r.SelectPolicy != nil && *r.SelectPolicy == autoscalingv2.MinChangePolicySelect
	result := int32(math.MaxInt32)
	if pickMax {
		result = math.MinInt32
	}
	for _, p := range r.Policies {
		start := current + changeInPeriod(evs, time.Duration(p.PeriodSeconds)*time.Second, now)
		var proposed int32
		if p.Type == autoscalingv2.PodsScalingPolicy {
			proposed = start - p.Value
		} else {
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		if pickMax {
			result = max(result, proposed)
		} else {
			result = min(result, proposed)
		}
	}
	return result
}

func deref(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}
