package job

import (
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// isPodFailed reports whether pod counts as a failure of job: it failed,
// or, unless job replaces only failed pods, it is being deleted before it
// succeeded (an orphaned or evicted pod may never reach Failed). A pod the
// controller deleted because job is suspended is no failure: suspension
// stops work, it does not fail it.
func isPodFailed(pod *corev1.Pod, job *batchv1.Job) bool {
	if pod.Status.Phase == corev1.PodFailed {
		return true
	}
	if onlyReplaceFailedPods(job) || isSuspended(job) {
		return false
	}
	return pod.DeletionTimestamp != nil && pod.Status.Phase != corev1.PodSucceeded
}

// onlyReplaceFailedPods: a pod being deleted is replaced only once it has
// failed, with podReplacementPolicy Failed, which a pod failure policy
// implies.
func onlyReplaceFailedPods(job *batchv1.Job) bool {
	return (job.Spec.PodReplacementPolicy != nil && *job.Spec.PodReplacementPolicy == batchv1.Failed) ||
		job.Spec.PodFailurePolicy != nil
}

func isSuspended(job *batchv1.Job) bool { return job.Spec.Suspend != nil && *job.Spec.Suspend }

func isIndexed(job *batchv1.Job) bool {
	return job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion
}

func hasBackoffLimitPerIndex(job *batchv1.Job) bool {
	return isIndexed(job) && job.Spec.BackoffLimitPerIndex != nil
}

func isTerminating(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

func hasTrackingFinalizer(pod *corev1.Pod) bool {
	return slices.Contains(pod.Finalizers, batchv1.JobTrackingFinalizer)
}

// policyMatch is what the pod failure policy says of a failed pod: the
// action of the first rule that matches (nil: none does), whether the
// failure counts towards the backoff limits, and, for FailJob, the
// message of the Job's failure.
type policyMatch struct {
	action  *batchv1.PodFailurePolicyAction
	counts  bool
	message string
}

// matchPodFailurePolicy walks the rules in order, as kube does: the first
// whose exit codes (of a container that exited non-zero) or pod
// conditions match decides. No rule matching counts the failure.
func matchPodFailurePolicy(policy *batchv1.PodFailurePolicy, pod *corev1.Pod) policyMatch {
	if policy == nil {
		return policyMatch{counts: true}
	}
	for i := range policy.Rules {
		rule := &policy.Rules[i]
		var what string
		switch {
		case rule.OnExitCodes != nil:
			cs := matchOnExitCodes(&pod.Status, rule.OnExitCodes)
			if cs == nil {
				continue
			}
			what = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %d matching %s rule at index %d",
				cs.Name, pod.Namespace, pod.Name, cs.State.Terminated.ExitCode, rule.Action, i)
		case rule.OnPodConditions != nil:
			cond := matchOnPodConditions(&pod.Status, rule.OnPodConditions)
			if cond == nil {
				continue
			}
			what = fmt.Sprintf("Pod %s/%s has condition %s matching %s rule at index %d", pod.Namespace, pod.Name, cond.Type, rule.Action, i)
		default:
			continue
		}
		action := rule.Action
		switch action {
		case batchv1.PodFailurePolicyActionIgnore:
			return policyMatch{action: &action}
		case batchv1.PodFailurePolicyActionCount, batchv1.PodFailurePolicyActionFailIndex:
			return policyMatch{action: &action, counts: true}
		case batchv1.PodFailurePolicyActionFailJob:
			return policyMatch{action: &action, counts: true, message: what}
		}
		// An action this controller does not know: skip the rule, as
		// clients are told to.
	}
	return policyMatch{counts: true}
}

func matchOnExitCodes(status *corev1.PodStatus, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{status.InitContainerStatuses, status.ContainerStatuses} {
		for i := range list {
			cs := &list[i]
			t := cs.State.Terminated
			if t == nil || t.ExitCode == 0 || (req.ContainerName != nil && *req.ContainerName != cs.Name) {
				continue
			}
			in := slices.Contains(req.Values, t.ExitCode)
			if (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && in) ||
				(req.Operator == batchv1.PodFailurePolicyOnExitCodesOpNotIn && !in) {
				return cs
			}
		}
	}
	return nil
}

func matchOnPodConditions(status *corev1.PodStatus, patterns []batchv1.PodFailurePolicyOnPodConditionsPattern) *corev1.PodCondition {
	for i := range status.Conditions {
		c := &status.Conditions[i]
		for _, p := range patterns {
			if c.Type == p.Type && c.Status == p.Status {
				return c
			}
		}
	}
	return nil
}

// failJobMessage is the message of the first failed pod that a FailJob
// rule matches, or "".
func failJobMessage(job *batchv1.Job, pods []*corev1.Pod) string {
	if job.Spec.PodFailurePolicy == nil {
		return ""
	}
	for _, p := range pods {
		if isPodFailed(p, job) {
			if m := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); m.message != "" {
				return m.message
			}
		}
	}
	return ""
}

// matchSuccessPolicy reports whether the succeeded indexes meet a rule of
// the success policy, and the message of the first that is met.
func matchSuccessPolicy(policy *batchv1.SuccessPolicy, completions int32, succeeded indexSet) (string, bool) {
	if policy == nil || len(succeeded) == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		if ruleMet(rule, completions, succeeded) {
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}

func ruleMet(rule batchv1.SuccessPolicyRule, completions int32, succeeded indexSet) bool {
	if rule.SucceededIndexes == nil {
		return rule.SucceededCount != nil && succeeded.total() >= int(*rule.SucceededCount)
	}
	want := parseIndexSet(*rule.SucceededIndexes, completions)
	have := 0
	for _, iv := range want {
		for i := iv.first; i <= iv.last; i++ {
			if succeeded.has(i) {
				have++
			}
		}
	}
	if rule.SucceededCount != nil {
		return have >= int(*rule.SucceededCount)
	}
	return have == want.total()
}

// backoff is how long to wait before creating a pod after failures
// consecutive failures: base, doubled with each further failure, at most
// maxDelay; none before the first.
func backoff(failures int32, base, maxDelay time.Duration) time.Duration {
	if failures <= 0 {
		return 0
	}
	d := base
	for range failures - 1 {
		d *= 2
		if d >= maxDelay {
			return maxDelay
		}
	}
	return min(d, maxDelay)
}

// finishTime is when pod finished: the latest time a container
// terminated, else the last transition of its Ready condition, else
// fallback.
func finishTime(pod *corev1.Pod, fallback time.Time) time.Time {
	var t time.Time
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if term := cs.State.Terminated; term != nil && term.FinishedAt.After(t) {
				t = term.FinishedAt.Time
			}
		}
	}
	if !t.IsZero() {
		return t
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if pod.DeletionTimestamp != nil {
		return pod.DeletionTimestamp.Time
	}
	return fallback
}
