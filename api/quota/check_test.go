package quota

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func observed(name string, hard, used corev1.ResourceList) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
		Status:     corev1.ResourceQuotaStatus{Hard: hard, Used: used},
	}
}

func TestExceeded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		q         *corev1.ResourceQuota
		requested corev1.ResourceList
		ok        bool
		message   string
	}{
		{
			name:      "one pod too many",
			q:         observed("compute", list("pods", "2"), list("pods", "2")),
			requested: list("pods", "1", "count/pods", "1"),
			message:   "exceeded quota: compute, requested: pods=1, used: pods=2, limited: pods=2",
		},
		{
			name:      "fits exactly",
			q:         observed("compute", list("pods", "2", "requests.cpu", "1"), list("pods", "1", "requests.cpu", "700m")),
			requested: list("pods", "1", "requests.cpu", "0.3", "requests.memory", "1Gi"),
			ok:        true,
		},
		{
			name: "only the exceeded resources are named, sorted, printed exactly",
			q: observed("compute",
				list("pods", "10", "requests.cpu", "1", "requests.memory", "1Gi", "limits.cpu", "2"),
				list("pods", "3", "requests.cpu", "900m", "requests.memory", "768Mi", "limits.cpu", "1")),
			requested: list("pods", "1", "requests.cpu", "0.2", "requests.memory", "512Mi", "limits.cpu", "500m"),
			message: "exceeded quota: compute, requested: requests.cpu=200m,requests.memory=512Mi, " +
				"used: requests.cpu=900m,requests.memory=768Mi, limited: requests.cpu=1,requests.memory=1Gi",
		},
		{
			name:      "resources the quota does not limit are not checked",
			q:         observed("objects", list("configmaps", "1"), list("configmaps", "1")),
			requested: list("pods", "1", "requests.cpu", "100"),
			ok:        true,
		},
		{
			name:      "no usage recorded yet counts from zero",
			q:         observed("compute", list("pods", "0"), nil),
			requested: list("pods", "1"),
			message:   "exceeded quota: compute, requested: pods=1, used: , limited: pods=0",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, msg := Exceeded(tc.q, tc.requested)
			if ok != tc.ok || msg != tc.message {
				t.Errorf("Exceeded = %v, %q\nwant        %v, %q", ok, msg, tc.ok, tc.message)
			}
		})
	}
}

func TestUsageKnown(t *testing.T) {
	q := observed("compute", list("pods", "5", "requests.cpu", "2"), list("pods", "1"))
	if ok, msg := UsageKnown(q, []corev1.ResourceName{"pods"}); !ok || msg != "" {
		t.Errorf("UsageKnown(pods) = %v, %q; want true", ok, msg)
	}
	if ok, msg := UsageKnown(q, []corev1.ResourceName{"count/pods"}); !ok {
		t.Errorf("UsageKnown(count/pods), which the quota does not limit = %v, %q; want true", ok, msg)
	}
	ok, msg := UsageKnown(q, []corev1.ResourceName{"requests.cpu", "pods"})
	if want := "status unknown for quota: compute, resources: pods,requests.cpu"; ok || msg != want {
		t.Errorf("UsageKnown = %v, %q; want false, %q", ok, msg, want)
	}
}
