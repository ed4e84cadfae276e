package quota

import (
	corev1 "k8s.io/api/core/v1"
)

// Exceeded reports whether charging requested to quota q would take its
// usage past its limits. It checks against status (status.used and
// status.hard, what the controller has observed), only the names
// status.hard limits. When it would, ok is false and message is
// kube-apiserver's, naming only the exceeded resources:
//
//	exceeded quota: compute, requested: pods=1, used: pods=2, limited: pods=2
//
// Admission wraps it into a Forbidden error: `pods "web" is forbidden:
// exceeded quota: ...`.
func Exceeded(q *corev1.ResourceQuota, requested corev1.ResourceList) (ok bool, message string) {
	charged := Mask(requested, ResourceNames(q.Status.Hard))
	newUsed := Mask(Add(q.Status.Used, charged), ResourceNames(charged))
	fits, exceeded := LessThanOrEqual(newUsed, q.Status.Hard)
	if fits {
		return true, ""
	}
	return false, "exceeded quota: " + q.Name +
		", requested: " + Format(Mask(charged, exceeded)) +
		", used: " + Format(Mask(q.Status.Used, exceeded)) +
		", limited: " + Format(Mask(q.Status.Hard, exceeded))
}

// UsageKnown reports whether quota q's status.used has a value for each of
// names that its status.hard limits: whether the controller has measured
// what admission is about to check. When it has not, message is
// kube-apiserver's, listing names:
//
//	status unknown for quota: compute, resources: pods,requests.cpu
func UsageKnown(q *corev1.ResourceQuota, names []corev1.ResourceName) (ok bool, message string) {
	for _, name := range names {
		if _, limited := q.Status.Hard[name]; !limited {
			continue
		}
		if _, measured := q.Status.Used[name]; !measured {
			return false, "status unknown for quota: " + q.Name + ", resources: " + formatNames(names)
		}
	}
	return true, ""
}
