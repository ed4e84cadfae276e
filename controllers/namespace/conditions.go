package namespace

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
)

// The five conditions a terminating namespace carries, in the order
// upstream writes them. Each is False (all is well) with its ok reason and
// message, or True with what went wrong or what is left.
var conditionTypes = []corev1.NamespaceConditionType{
	corev1.NamespaceDeletionDiscoveryFailure,
	corev1.NamespaceDeletionGVParsingFailure,
	corev1.NamespaceDeletionContentFailure,
	corev1.NamespaceContentRemaining,
	corev1.NamespaceFinalizersRemaining,
}

// okConditions are the False variants, with upstream's reasons and
// messages, so that `kubectl describe ns` reads the same as on a real
// cluster.
var okConditions = map[corev1.NamespaceConditionType]struct{ reason, message string }{
	corev1.NamespaceDeletionDiscoveryFailure: {"ResourcesDiscovered", "All resources successfully discovered"},
	corev1.NamespaceDeletionGVParsingFailure: {"ParsedGroupVersions", "All legacy kube types successfully parsed"},
	corev1.NamespaceDeletionContentFailure:   {"ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	corev1.NamespaceContentRemaining:         {"ContentRemoved", "All content successfully removed"},
	corev1.NamespaceFinalizersRemaining:      {"ContentHasNoFinalizers", "All content-preserving finalizers finished"},
}

// contentConditions turns one pass's report into the five conditions.
func contentConditions(r *contentReport) []corev1.NamespaceCondition {
	failed := map[corev1.NamespaceConditionType]corev1.NamespaceCondition{}
	set := func(t corev1.NamespaceConditionType, reason, message string) {
		failed[t] = corev1.NamespaceCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message}
	}
	if r.discoveryErr != nil {
		msg := r.discoveryErr.Error()
		if gerr, ok := client.IsGroupDiscoveryFailed(r.discoveryErr); ok {
			msg = fmt.Sprintf("Discovery failed for some groups, %d failing: %v", len(gerr.Groups), gerr)
		}
		set(corev1.NamespaceDeletionDiscoveryFailure, "DiscoveryFailed", msg)
	}
	if r.parseErr != nil {
		set(corev1.NamespaceDeletionGVParsingFailure, "GroupVersionParsingFailed", r.parseErr.Error())
	}
	if len(r.deleteErrs) > 0 {
		msgs := make([]string, len(r.deleteErrs))
		for i, err := range r.deleteErrs {
			msgs[i] = err.Error()
		}
		sort.Strings(msgs)
		set(corev1.NamespaceDeletionContentFailure, "ContentDeletionFailed",
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %s", len(msgs), strings.Join(msgs, ", ")))
	}
	if s := r.remainingSummary(); s != "" {
		set(corev1.NamespaceContentRemaining, "SomeResourcesRemain", "Some resources are remaining: "+s)
	}
	if s := r.finalizerSummary(); s != "" {
		set(corev1.NamespaceFinalizersRemaining, "SomeFinalizersRemain",
			"Some content in the namespace has finalizers remaining: "+s)
	}

	out := make([]corev1.NamespaceCondition, 0, len(conditionTypes))
	for _, t := range conditionTypes {
		c, ok := failed[t]
		if !ok {
			ok := okConditions[t]
			c = corev1.NamespaceCondition{Type: t, Status: corev1.ConditionFalse, Reason: ok.reason, Message: ok.message}
		}
		out = append(out, c)
	}
	return out
}

// mergeConditions writes want into status: a condition whose status,
// reason or message changed is replaced, and its lastTransitionTime moves
// to now only when its status flipped. It reports whether anything
// changed, so that an unchanged pass writes nothing.
func mergeConditions(status *corev1.NamespaceStatus, want []corev1.NamespaceCondition, now metav1.Time) bool {
	changed := false
	for _, w := range want {
		i := indexOf(status.Conditions, w.Type)
		if i < 0 {
			w.LastTransitionTime = now
			status.Conditions = append(status.Conditions, w)
			changed = true
			continue
		}
		cur := &status.Conditions[i]
		if cur.Status == w.Status && cur.Reason == w.Reason && cur.Message == w.Message {
			continue
		}
		if cur.Status != w.Status || cur.LastTransitionTime.IsZero() {
			cur.LastTransitionTime = now
		}
		cur.Status, cur.Reason, cur.Message = w.Status, w.Reason, w.Message
		changed = true
	}
	return changed
}

func indexOf(conds []corev1.NamespaceCondition, t corev1.NamespaceConditionType) int {
	for i := range conds {
		if conds[i].Type == t {
			return i
		}
	}
	return -1
}
