package nodelifecycle

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
)

func TestComputeZoneState(t *testing.T) {
	const (
		T = corev1.ConditionTrue
		F = corev1.ConditionFalse
		U = corev1.ConditionUnknown
	)
	tests := []struct {
		name         string
		ready        []corev1.ConditionStatus
		wantNotReady int
		want         zoneState
	}{
		{"all ready", []corev1.ConditionStatus{T, T, T}, 0, stateNormal},
		{"one of one down", []corev1.ConditionStatus{U}, 1, stateFullDisruption},
		{"all down, any way", []corev1.ConditionStatus{U, F, ""}, 3, stateFullDisruption},
		{"two of three down: too few to be a disruption", []corev1.ConditionStatus{U, U, T}, 2, stateNormal},
		{"three of five down: 60% ≥ 55%", []corev1.ConditionStatus{U, F, U, T, T}, 3, statePartialDisruption},
		{"three of six down: 50% < 55%", []corev1.ConditionStatus{U, U, U, T, T, T}, 3, stateNormal},
		{"no Ready condition counts as not ready", []corev1.ConditionStatus{"", "", "", T}, 3, statePartialDisruption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, state := computeZoneState(tt.ready, 0.55)
			if n != tt.wantNotReady || state != tt.want {
				t.Errorf("= %d, %s; want %d, %s", n, state, tt.wantNotReady, tt.want)
			}
		})
	}
}

func TestRateFor(t *testing.T) {
	c := &Controller{evictionRate: 0.1, secondaryRate: 0.01, largeClusterNodes: 50}
	tests := []struct {
		state zoneState
		size  int
		want  float64
	}{
		{stateInitial, 3, 0.1},
		{stateNormal, 3, 0.1},
		{statePartialDisruption, 50, 0},
		{statePartialDisruption, 51, 0.01},
		{stateFullDisruption, 3, 0.1}, // one broken zone among healthy ones
	}
	for _, tt := range tests {
		if got := c.rateFor(tt.state, tt.size); got != tt.want {
			t.Errorf("rateFor(%s, %d) = %g, want %g", tt.state, tt.size, got, tt.want)
		}
	}
}

func TestTokenBucket(t *testing.T) {
	b := newTokenBucket(0.1, t0)
	if !b.next(t0).Equal(t0) || !b.take(t0) {
		t.Fatal("a new bucket does not allow one at once")
	}
	if got := b.next(t0.Add(4 * time.Second)); !got.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("next = t0+%v, want t0+10s", got.Sub(t0))
	}
	if b.take(t0.Add(9 * time.Second)) {
		t.Error("a second token after 9s at 0.1/s")
	}
	if got := b.next(t0.Add(9 * time.Second)); !got.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("next = t0+%v, want t0+10s", got.Sub(t0))
	}
	if !b.take(t0.Add(10 * time.Second)) {
		t.Error("no token after 10s at 0.1/s")
	}
	// Tokens do not pile up beyond the burst of one.
	if !b.take(t0.Add(time.Hour)) || b.take(t0.Add(time.Hour)) {
		t.Error("the burst is not one")
	}

	never := newTokenBucket(0, t0)
	if never.take(t0) || !never.next(t0).IsZero() {
		t.Error("a bucket of rate 0 allowed something")
	}
}

// The manager builds its controllers again on the same registry at each
// leadership term.
func TestNewAgainOnTheSameRegistry(t *testing.T) {
	rc, err := client.New(&client.Config{Server: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	wrapped := prometheus.WrapRegistererWith(prometheus.Labels{"controller": "nodelifecycle"}, reg)
	for term := range 2 {
		c, err := New(Options{Common: controller.Common{Client: rc, Informers: informer.NewSharedInformerFactory(rc, informer.FactoryOptions{}), Metrics: wrapped}})
		if err != nil {
			t.Fatalf("term %d: %v", term, err)
		}
		c.metrics.podDeletions.Inc()
		c.nodeQueue.ShutDown() // as Run does when its term ends
		c.podQueue.ShutDown()
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "taint_eviction_controller_pod_deletions_total" {
			if v := f.GetMetric()[0].GetCounter().GetValue(); v != 2 {
				t.Errorf("pod deletions = %v, want 2 (one counter across terms)", v)
			}
			return
		}
	}
	t.Error("pod deletions metric not gathered")
}
