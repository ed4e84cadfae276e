package quota

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/minictl/minictl/api"
)

// countPods is the object count of pods: every pod in storage, whatever
// its phase. "pods", by contrast, counts only the pods still charged.
const countPods corev1.ResourceName = "count/pods"

// podResources are the names a pod can be charged under, besides the
// hugepages and extended-resource names matched by prefix.
var podResources = []corev1.ResourceName{
	countPods, corev1.ResourcePods,
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
}

// constrainedResources are the names that, when a quota limits them, every
// container must state: a historical rule of Kubernetes, kept for cpu and
// memory only.
var constrainedResources = sets.New(
	corev1.ResourceCPU, corev1.ResourceMemory,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory,
)

// PodUsageAt returns what pod is charged for at time now:
//
//   - count/pods=1, always: it counts the pods in storage.
//   - While the pod is charged (see PodCharged): pods=1; requests.cpu,
//     requests.memory and requests.ephemeral-storage, with cpu, memory and
//     ephemeral-storage as their aliases; limits.cpu, limits.memory and
//     limits.ephemeral-storage; hugepages-<size> and
//     requests.hugepages-<size>; requests.<name> for extended resources.
//
// A name appears only when some container sets it. Requests and limits are
// the pod's effective ones, as the scheduler sees them: the sum over app
// containers and sidecars (restartable init containers), or, if larger,
// what the largest init container needs while it runs next to the sidecars
// started before it; then pod-level resources (spec.resources) override
// cpu, memory and hugepages, and spec.overhead is added.
func PodUsageAt(pod *corev1.Pod, now time.Time) corev1.ResourceList {
	usage := corev1.ResourceList{countPods: *resource.NewQuantity(1, resource.DecimalSI)}
	if !PodCharged(pod, now) {
		return usage
	}
	return Add(usage, computeUsage(podRequests(pod), podLimits(pod)))
}

// PodCharged reports whether pod is charged for compute resources (and
// "pods") at time now. A pod stops being charged once it is terminal
// (Succeeded or Failed), or once it has been being deleted for longer than
// its grace period past its deletionTimestamp: a pod stuck terminating on a
// lost node must not keep its owner from starting a replacement.
func PodCharged(pod *corev1.Pod, now time.Time) bool {
	if api.IsPodTerminal(pod) {
		return false
	}
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		grace := time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		if now.After(pod.DeletionTimestamp.Add(grace)) {
			return false
		}
	}
	return true
}

// computeUsage names a pod's (or a container's) requests and limits as
// quota resources, with pods=1.
func computeUsage(requests, limits corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if q, ok := requests[name]; ok {
			out[name] = q.DeepCopy()
			out[corev1.DefaultResourceRequestsPrefix+name] = q.DeepCopy()
		}
		if q, ok := limits[name]; ok {
			out[corev1.ResourceName("limits.")+name] = q.DeepCopy()
		}
	}
	for name, q := range requests {
		switch {
		case strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
			out[name] = q.DeepCopy()
			out[corev1.DefaultResourceRequestsPrefix+name] = q.DeepCopy()
		case isExtendedResource(name):
			// Extended resources cannot be overcommitted, so only
			// requests.<name> is quota'd.
			out[corev1.DefaultResourceRequestsPrefix+name] = q.DeepCopy()
		}
	}
	return out
}

// isNativeResource reports whether name is Kubernetes' own: unprefixed, or
// prefixed with a kubernetes.io domain.
func isNativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

// isExtendedResource reports whether name, as a container states it, is an
// extended resource ("example.com/gpu").
func isExtendedResource(name corev1.ResourceName) bool {
	if isNativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// isExtendedQuotaName reports whether name, as a quota states it, is the
// requests.<name> of an extended resource.
func isExtendedQuotaName(name corev1.ResourceName) bool {
	return !isNativeResource(name) && strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix)
}

// podRequests returns the pod's effective requests.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	reqs := aggregateContainers(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Requests })
	if pod.Spec.Resources != nil && hasPodLevel(pod.Spec.Resources.Requests) {
		applyPodLevel(reqs, pod.Spec.Resources.Requests)
	}
	addInto(reqs, pod.Spec.Overhead)
	return reqs
}

// podLimits returns the pod's effective limits. Overhead is added only to
// the limits that are set and non-zero: an unset limit stays unlimited.
func podLimits(pod *corev1.Pod) corev1.ResourceList {
	lims := aggregateContainers(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Limits })
	if r := pod.Spec.Resources; r != nil && (hasPodLevel(r.Requests) || hasPodLevel(r.Limits)) {
		applyPodLevel(lims, r.Limits)
	}
	for name, extra := range pod.Spec.Overhead {
		if q, ok := lims[name]; ok && !q.IsZero() {
			q.Add(extra)
			lims[name] = q
		}
	}
	return lims
}

// aggregateContainers sums get over the pod's containers the way the
// scheduler does (KEP 753, sidecar containers):
//
//	app + sidecars                                  while the pod runs
//	init[i] + sidecars started before init[i]       while init[i] runs
//
// and returns, per resource, the larger of the two.
func aggregateContainers(pod *corev1.Pod, get func(*corev1.Container) corev1.ResourceList) corev1.ResourceList {
	running := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		addInto(running, get(&pod.Spec.Containers[i]))
	}
	sidecars := corev1.ResourceList{} // sidecars started so far
	initPeak := corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		var whileInit corev1.ResourceList
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addInto(running, get(c))
			addInto(sidecars, get(c))
			whileInit = sidecars
		} else {
			whileInit = Add(get(c), sidecars)
		}
		maxInto(initPeak, whileInit)
	}
	maxInto(running, initPeak)
	return running
}

// hasPodLevel reports whether list sets a resource that pod-level
// resources may set: cpu, memory or hugepages.
func hasPodLevel(list corev1.ResourceList) bool {
	for name := range list {
		if isPodLevelResource(name) {
			return true
		}
	}
	return false
}

func isPodLevelResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// applyPodLevel overrides the container sums in list with the pod-level
// values of podLevel.
func applyPodLevel(list, podLevel corev1.ResourceList) {
	for name, q := range podLevel {
		if isPodLevelResource(name) {
			list[name] = q.DeepCopy()
		}
	}
}

// addInto adds from into list.
func addInto(list, from corev1.ResourceList) {
	for name, q := range from {
		sum, ok := list[name]
		if !ok {
			list[name] = q.DeepCopy()
			continue
		}
		sum.Add(q)
		list[name] = sum
	}
}

// maxInto raises each entry of list to from's, where from's is larger or
// list has none.
func maxInto(list, from corev1.ResourceList) {
	for name, q := range from {
		if cur, ok := list[name]; !ok || q.Cmp(cur) > 0 {
			list[name] = q.DeepCopy()
		}
	}
}

// podMatchesScope reports whether pod is in the scope sel names.
func podMatchesScope(pod *corev1.Pod, sel corev1.ScopedResourceSelectorRequirement) (bool, error) {
	switch sel.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return isTerminating(pod), nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return !isTerminating(pod), nil
	case corev1.ResourceQuotaScopeBestEffort:
		return api.PodQOSClass(pod) == corev1.PodQOSBestEffort, nil
	case corev1.ResourceQuotaScopeNotBestEffort:
		return api.PodQOSClass(pod) != corev1.PodQOSBestEffort, nil
	case corev1.ResourceQuotaScopePriorityClass:
		if sel.Operator == corev1.ScopeSelectorOpExists {
			return pod.Spec.PriorityClassName != "", nil
		}
		return priorityClassMatches(pod, sel)
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return usesCrossNamespaceAffinity(pod), nil
	}
	return false, nil
}

// isTerminating: the pod has an active deadline, so it will end by itself
// (a Job's pod, typically).
func isTerminating(pod *corev1.Pod) bool {
	return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
}

// priorityClassMatches matches the pod's priority class against sel, read
// as a label requirement on the key "PriorityClass".
func priorityClassMatches(pod *corev1.Pod, sel corev1.ScopedResourceSelectorRequirement) (bool, error) {
	var op selection.Operator
	switch sel.Operator {
	case corev1.ScopeSelectorOpIn:
		op = selection.In
	case corev1.ScopeSelectorOpNotIn:
		op = selection.NotIn
	case corev1.ScopeSelectorOpExists:
		op = selection.Exists
	case corev1.ScopeSelectorOpDoesNotExist:
		op = selection.DoesNotExist
	default:
		return false, fmt.Errorf("scope selector %s: operator %q is not supported", sel.ScopeName, sel.Operator)
	}
	req, err := labels.NewRequirement(string(sel.ScopeName), op, sel.Values)
	if err != nil {
		return false, fmt.Errorf("scope selector %s: %w", sel.ScopeName, err)
	}
	set := labels.Set{}
	if pod.Spec.PriorityClassName != "" {
		set[string(corev1.ResourceQuotaScopePriorityClass)] = pod.Spec.PriorityClassName
	}
	return labels.NewSelector().Add(*req).Matches(set), nil
}

// usesCrossNamespaceAffinity: some pod (anti-)affinity term of the pod
// names other namespaces or a namespace selector.
func usesCrossNamespaceAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return false
	}
	crosses := func(t *corev1.PodAffinityTerm) bool { return len(t.Namespaces) > 0 || t.NamespaceSelector != nil }
	var terms []*corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		for i := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, &a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i])
		}
		for i := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, &a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm)
		}
	}
	if a.PodAntiAffinity != nil {
		for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, &a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i])
		}
		for i := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, &a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm)
		}
	}
	return slices.ContainsFunc(terms, crosses)
}

// podConstraints checks that every container, init containers included,
// states each cpu or memory request and limit that required names: when a
// quota limits requests.cpu, a container without a cpu request could not
// be charged. The error reads as kube-apiserver's: "must specify
// limits.cpu for: app,sidecar; requests.memory for: app".
func podConstraints(pod *corev1.Pod, required []corev1.ResourceName) error {
	want := sets.New(required...).Intersection(constrainedResources)
	if want.Len() == 0 {
		return nil
	}
	missing := map[corev1.ResourceName]sets.Set[string]{}
	check := func(c *corev1.Container) {
		has := computeUsage(c.Resources.Requests, c.Resources.Limits)
		for name := range want {
			if _, ok := has[name]; !ok {
				if missing[name] == nil {
					missing[name] = sets.New[string]()
				}
				missing[name].Insert(c.Name)
			}
		}
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		check(&pod.Spec.InitContainers[i])
	}
	if len(missing) == 0 {
		return nil
	}
	var parts []string
	for _, name := range sets.List(sets.KeySet(missing)) {
		parts = append(parts, string(name)+" for: "+strings.Join(sets.List(missing[name]), ","))
	}
	return fmt.Errorf("must specify %s", strings.Join(parts, "; "))
}
