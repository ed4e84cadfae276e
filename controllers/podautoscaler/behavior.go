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

// normalize turns the metrics' proposal into the replica count to scale
// to, as kube does: stabilized over the recent recommendations
// (AbleToScale says ScaleUpStabilized or ScaleDownStabilized when that
// changed it), then bound by the scaling rate and min/maxReplicas
// (ScalingLimited says why when that changed it). An autoscaler with a
// behavior gets kube's normalizeDesiredReplicasWithBehaviors; one without
// gets the rules from before behaviors existed.
func (c *Controller) normalize(key string, hpa *autoscalingv2.HorizontalPodAutoscaler, minReplicas, current, proposal int32, now time.Time) int32 {
	var stabilized, desired int32
	var reason, msg string
	if b := hpa.Spec.Behavior; b != nil {
		stabilized, reason, msg = c.stabilizeWithBehavior(key, b, current, proposal, now)
		setAbleToScale(hpa, stabilized, proposal, reason, msg)
		desired, reason, msg = c.boundByPolicies(key, b, minReplicas, hpa.Spec.MaxReplicas, current, stabilized, now)
	} else {
		stabilized = c.stabilizeDownscale(key, proposal, now)
		setAbleToScale(hpa, stabilized, proposal, "ScaleDownStabilized", msgScaleDownStabilized)
		desired, reason, msg = boundByRules(minReplicas, hpa.Spec.MaxReplicas, current, stabilized)
	}
	limited := corev1.ConditionFalse
	if desired != stabilized {
		limited = corev1.ConditionTrue
	}
	setCondition(hpa, autoscalingv2.ScalingLimited, limited, reason, "%s", msg)
	return desired
}

const (
	msgScaleDownStabilized = "recent recommendations were higher than current one, applying the highest recent recommendation"
	msgScaleUpStabilized   = "recent recommendations were lower than current one, applying the lowest recent recommendation"
)

// setAbleToScale says whether the stabilization window held the
// proposal back.
func setAbleToScale(hpa *autoscalingv2.HorizontalPodAutoscaler, stabilized, proposal int32, reason, msg string) {
	if stabilized != proposal {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, reason, "%s", msg)
		return
	}
	setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size")
}

// stabilizeWithBehavior is kube's stabilizeRecommendationWithBehaviors: a
// proposal to grow is the smallest recommendation of the scale-up window,
// one to shrink the largest of the scale-down window (the behavior's, or
// --horizontal-pod-autoscaler-downscale-stabilization). It remembers the
// proposal.
func (c *Controller) stabilizeWithBehavior(key string, b *autoscalingv2.HorizontalPodAutoscalerBehavior, current, proposal int32, now time.Time) (int32, string, string) {
	upWindow := time.Duration(deref(b.ScaleUp.StabilizationWindowSeconds, 0)) * time.Second
	downWindow := c.opts.DownscaleStabilization
	if b.ScaleDown.StabilizationWindowSeconds != nil {
		downWindow = time.Duration(*b.ScaleDown.StabilizationWindowSeconds) * time.Second
	}
	window, pick, reason, msg := downWindow, larger, "ScaleDownStabilized", msgScaleDownStabilized
	if proposal >= current {
		window, pick, reason, msg = upWindow, smaller, "ScaleUpStabilized", msgScaleUpStabilized
	}
	return c.remember(key, proposal, now, window, max(upWindow, downWindow), pick), reason, msg
}

// stabilizeDownscale is kube's stabilizeRecommendation, for an autoscaler
// without a behavior: the largest recommendation of the downscale window.
func (c *Controller) stabilizeDownscale(key string, proposal int32, now time.Time) int32 {
	w := c.opts.DownscaleStabilization
	return c.remember(key, proposal, now, w, w, larger)
}

// remember folds pick over the proposal and the recommendations younger
// than window, forgets those older than keep, and adds the proposal.
func (c *Controller) remember(key string, proposal int32, now time.Time, window, keep time.Duration, pick func(a, b int32) int32) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := proposal
	var kept []timestampedRecommendation
	for _, r := range c.recommendations[key] {
		if r.at.After(now.Add(-window)) {
			out = pick(out, r.recommendation)
		}
		if !r.at.Before(now.Add(-keep)) {
			kept = append(kept, r)
		}
	}
	c.recommendations[key] = append(kept, timestampedRecommendation{proposal, now})
	return out
}

// boundByPolicies is kube's convertDesiredReplicasWithBehaviorRate: no
// faster than the behavior's policies allow over their periods, and
// within min/maxReplicas.
func (c *Controller) boundByPolicies(key string, b *autoscalingv2.HorizontalPodAutoscalerBehavior, minReplicas, maxReplicas, current, desired int32, now time.Time) (int32, string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case desired > current:
		limit := max(scaleUpLimit(current, c.scaleUpEvents[key], b.ScaleUp, now), current)
		allowed, reason, msg := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
		if allowed > limit {
			allowed, reason, msg = limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
		}
		if desired > allowed {
			return allowed, reason, msg
		}
	case desired < current:
		limit := min(scaleDownLimit(current, c.scaleDownEvents[key], b.ScaleDown, now), current)
		allowed, reason, msg := minReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
		if allowed < limit {
			allowed, reason, msg = limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"
		}
		if desired < allowed {
			return allowed, reason, msg
		}
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// boundByRules is kube's convertDesiredReplicasWithRules, for an
// autoscaler without a behavior: at most double the replicas (or 4) in
// one step, and within min/maxReplicas.
func boundByRules(minReplicas, maxReplicas, current, desired int32) (int32, string, string) {
	limit := max(2*current, 4)
	allowed, reason, msg := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
	if maxReplicas > limit {
		allowed, reason, msg = limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
	}
	switch {
	case desired < minReplicas:
		return minReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
	case desired > allowed:
		return allowed, reason, msg
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
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

func larger(a, b int32) int32  { return max(a, b) }
func smaller(a, b int32) int32 { return min(a, b) }

func deref(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}
