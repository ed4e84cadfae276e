package triggertime

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTriggerTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svc := newService("web", map[string]string{"app": "web"})
	svc.CreationTimestamp = metav1.NewTime(t0)
	readyAt := func(name string, at time.Time) *corev1.Pod {
		p := pod(name, "10.0.0.1", true)
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at)
		return p
	}
	tt := New()
	key := "default/web"
	// sync computes and, as a sync whose write succeeded, remembers.
	sync := func(pods ...*corev1.Pod) time.Time {
		got, seen := tt.Compute(key, svc, pods)
		tt.Remember(key, seen)
		return got
	}

	if got := sync(readyAt("a", t0.Add(time.Second))); !got.Equal(t0) {
		t.Errorf("first sync: %v, want the service's creation %v", got, t0)
	}
	if got := sync(readyAt("a", t0.Add(time.Second))); !got.IsZero() {
		t.Errorf("nothing moved: %v, want zero", got)
	}
	// A sync whose write failed is not remembered: its retry measures the
	// same change.
	moved := []*corev1.Pod{readyAt("a", t0.Add(5*time.Second)), readyAt("b", t0.Add(3*time.Second)), pod("c", "10.0.0.3", true)}
	if got, _ := tt.Compute(key, svc, moved); !got.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("two pods moved: %v, want the earlier, %v", got, t0.Add(3*time.Second))
	}
	if got := sync(moved...); !got.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("retry of a failed write: %v, want the same change, %v", got, t0.Add(3*time.Second))
	}
	if got := sync(moved...); !got.IsZero() {
		t.Errorf("after the retry took effect: %v, want zero", got)
	}
	tt.Drop(key)
	if got := sync(); !got.Equal(t0) {
		t.Errorf("after forget: %v, want the service's creation", got)
	}
}

func newService(name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       corev1.ServiceSpec{Selector: selector},
	}
}

// pod is a pod at ip whose Ready condition is its first.
func pod(name, ip string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Status: corev1.PodStatus{
			PodIP:      ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
		},
	}
}
