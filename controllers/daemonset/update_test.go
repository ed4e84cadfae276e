package daemonset

import (
	"fmt"
	"log/slog"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestUpdateBoundsArePercentagesRoundedUp(t *testing.T) {
	c := &Controller{log: slog.New(slog.DiscardHandler)}
	nodes := []*corev1.Node{newNode("a", nil), newNode("b", nil), newNode("c", nil),
		newNode("tainted", nil, corev1.Taint{Key: "x", Effect: corev1.TaintEffectNoSchedule})}
	rolling := func(unavailable, surge intstr.IntOrString) appsv1.DaemonSetUpdateStrategy {
		return appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &unavailable, MaxSurge: &surge}}
	}
	tests := []struct {
		strategy                  appsv1.DaemonSetUpdateStrategy
		surge, unavailable, nodes int
	}{
		{rolling(intstr.FromInt32(1), intstr.FromInt32(0)), 0, 1, 3},
		{rolling(intstr.FromString("34%"), intstr.FromInt32(0)), 0, 2, 3},
		{rolling(intstr.FromString("100%"), intstr.FromInt32(0)), 0, 3, 3},
		{rolling(intstr.FromInt32(0), intstr.FromString("50%")), 2, 0, 3},
		{rolling(intstr.FromInt32(0), intstr.FromInt32(0)), 0, 1, 3}, // refused by the API server; one at a time
		{appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}, 0, 1, 3},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v", tt.strategy.Type, tt.strategy.RollingUpdate), func(t *testing.T) {
			ds := newDS("agent")
			ds.Spec.UpdateStrategy = tt.strategy
			surge, unavailable, desired := c.updateBounds(ds, nodes)
			if surge != tt.surge || unavailable != tt.unavailable || desired != tt.nodes {
				t.Errorf("maxSurge %d, maxUnavailable %d, desired %d; want %d, %d, %d", surge, unavailable, desired, tt.surge, tt.unavailable, tt.nodes)
			}
		})
	}
}

func TestSplitPodsOnNode(t *testing.T) {
	pod := func(name, hash, gen string, deleting bool) *corev1.Pod {
		p := &corev1.Pod{}
		p.Name = name
		p.Labels = map[string]string{appsv1.DefaultDaemonSetUniqueLabelKey: hash, TemplateGenerationLabel: gen}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	newByHash, newByGen, old := pod("h", "new", "1", false), pod("g", "other", "2", false), pod("o", "old", "1", false)
	tests := []struct {
		name         string
		pods         []*corev1.Pod
		newPod, oldP *corev1.Pod
		ok           bool
	}{
		{"empty", nil, nil, nil, true},
		{"new by hash", []*corev1.Pod{newByHash}, newByHash, nil, true},
		{"new by template generation", []*corev1.Pod{newByGen}, newByGen, nil, true},
		{"old and new", []*corev1.Pod{old, newByHash}, newByHash, old, true},
		{"two new", []*corev1.Pod{newByHash, newByGen}, nil, nil, false},
		{"deleting ones do not count", []*corev1.Pod{old, pod("d", "old", "1", true)}, nil, old, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, o, ok := splitPodsOnNode(tt.pods, "new", 2)
			if n != tt.newPod || o != tt.oldP || ok != tt.ok {
				t.Errorf("got %v, %v, %v", n, o, ok)
			}
		})
	}
}
