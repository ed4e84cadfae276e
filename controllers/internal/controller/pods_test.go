package controller

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type podSpec struct {
	name     string
	node     string
	phase    corev1.PodPhase
	ready    time.Duration // ready since this long ago; 0: not ready
	restarts int32
	age      time.Duration
	cost     string
}

var now = time.Unix(1_000_000, 0)

func makePod(s podSpec) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: s.name, Namespace: "default", CreationTimestamp: metav1.NewTime(now.Add(-s.age)),
	}}
	if s.cost != "" {
		p.Annotations = map[string]string{PodDeletionCostAnnotation: s.cost}
	}
	p.Spec.NodeName = s.node
	p.Status.Phase = s.phase
	if s.ready > 0 {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now.Add(-s.ready))}}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: s.restarts}}
	return p
}

func TestPodsToDeleteOrder(t *testing.T) {
	tests := []struct {
		name  string
		pods  []podSpec
		first string // the pod deleted first
	}{
		{"unscheduled before scheduled", []podSpec{
			{name: "scheduled", node: "n1", phase: corev1.PodPending},
			{name: "unscheduled", phase: corev1.PodPending},
		}, "unscheduled"},
		{"pending before unknown before running", []podSpec{
			{name: "running", node: "n1", phase: corev1.PodRunning},
			{name: "unknown", node: "n1", phase: corev1.PodUnknown},
		}, "unknown"},
		{"pending first", []podSpec{
			{name: "unknown", node: "n1", phase: corev1.PodUnknown},
			{name: "pending", node: "n1", phase: corev1.PodPending},
		}, "pending"},
		{"not ready before ready", []podSpec{
			{name: "ready", node: "n1", phase: corev1.PodRunning, ready: time.Hour},
			{name: "not-ready", node: "n1", phase: corev1.PodRunning},
		}, "not-ready"},
		{"lower deletion cost first", []podSpec{
			{name: "cheap", node: "n1", phase: corev1.PodRunning, ready: time.Minute, cost: "-5"},
			{name: "dear", node: "n2", phase: corev1.PodRunning, ready: time.Minute, cost: "100"},
		}, "cheap"},
		{"doubled up on a node first", []podSpec{
			{name: "alone", node: "n1", phase: corev1.PodRunning, ready: time.Minute},
			{name: "crowded", node: "n2", phase: corev1.PodRunning, ready: time.Hour},
			{name: "crowded-too", node: "n2", phase: corev1.PodRunning, ready: 2 * time.Hour},
		}, "crowded"},
		{"ready more recently first", []podSpec{
			{name: "long", node: "n1", phase: corev1.PodRunning, ready: time.Hour},
			{name: "brief", node: "n2", phase: corev1.PodRunning, ready: time.Minute},
		}, "brief"},
		{"more restarts first", []podSpec{
			{name: "steady", node: "n1", phase: corev1.PodRunning, ready: time.Minute},
			{name: "flaky", node: "n2", phase: corev1.PodRunning, ready: time.Minute, restarts: 7},
		}, "flaky"},
		{"newer first", []podSpec{
			{name: "old", node: "n1", phase: corev1.PodRunning, age: time.Hour},
			{name: "new", node: "n2", phase: corev1.PodRunning, age: time.Minute},
		}, "new"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pods []*corev1.Pod
			for _, s := range tt.pods {
				pods = append(pods, makePod(s))
			}
			before := slices.Clone(pods)
			got := PodsToDelete(pods, 1)
			if len(got) != 1 || got[0].Name != tt.first {
				t.Fatalf("deleted first %s, want %s", got[0].Name, tt.first)
			}
			if !slices.Equal(pods, before) {
				t.Error("PodsToDelete reordered its argument")
			}
		})
	}
	if got := PodsToDelete([]*corev1.Pod{makePod(podSpec{name: "a"})}, 5); len(got) != 1 {
		t.Errorf("asked for more than there are: got %d", len(got))
	}
}

func TestIsPodActiveAndAvailable(t *testing.T) {
	running := makePod(podSpec{name: "r", phase: corev1.PodRunning, ready: 30 * time.Second})
	if !IsPodActive(running) {
		t.Error("a running pod is not active")
	}
	for _, phase := range []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed} {
		if IsPodActive(makePod(podSpec{name: "t", phase: phase})) {
			t.Errorf("a %s pod is active", phase)
		}
	}
	deleting := running.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	if IsPodActive(deleting) {
		t.Error("a pod being deleted is active")
	}
	if got := FilterActivePods([]*corev1.Pod{running, deleting}); len(got) != 1 || got[0] != running {
		t.Errorf("FilterActivePods kept %d pods", len(got))
	}

	if !IsPodAvailable(running, 0, now) || !IsPodAvailable(running, 30, now) || IsPodAvailable(running, 31, now) {
		t.Error("a pod ready for 30s: available for minReadySeconds 0 and 30, not 31")
	}
	if IsPodAvailable(makePod(podSpec{name: "n", phase: corev1.PodRunning}), 0, now) {
		t.Error("a pod that is not ready is available")
	}
}
