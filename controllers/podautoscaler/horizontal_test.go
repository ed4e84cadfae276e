package podautoscaler_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/controllers/podautoscaler"
	"github.com/minictl/minictl/controllers/replicaset"
	"github.com/minictl/minictl/kubelet"
)

// cluster is an API server that scrapes a real simulated kubelet, the
// ReplicaSet controller, and an autoscaler on a fake clock whose passes
// the test makes.
type cluster struct {
	env      *controllertest.Env
	hpa      *podautoscaler.Controller
	clock    *clock.Fake
	recorder *record.FakeRecorder
	rs       *client.Client[*appsv1.ReplicaSet]
	pods     *client.Client[*corev1.Pod]
	hpas     *client.Client[*autoscalingv2.HorizontalPodAutoscaler]
}

func start(t *testing.T, opts podautoscaler.Options) *cluster {
	env := controllertest.StartWith(t, controllertest.Options{ClientTimeout: 20 * time.Second, MetricResolution: 100 * time.Millisecond})
	k, err := kubelet.New(kubelet.Options{Client: env.Client, NodeName: "node-1", HeartbeatInterval: time.Second, StatusUpdateInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	c := &cluster{env: env, clock: clock.NewFake(time.Now()), recorder: &record.FakeRecorder{}}
	opts.Common.Client, opts.Common.Informers, opts.Common.Clock, opts.Common.Recorder = env.Client, env.Informers, c.clock, c.recorder
	if c.hpa, err = podautoscaler.New(opts); err != nil {
		t.Fatal(err)
	}
	rsc, err := replicaset.New(replicaset.Options{Common: opts.Common.WithDefaults(replicaset.Name)})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 2, rsc)
	c.rs = client.For[*appsv1.ReplicaSet](env.Client)
	c.pods = client.For[*corev1.Pod](env.Client)
	c.hpas = client.For[*autoscalingv2.HorizontalPodAutoscaler](env.Client)
	return c
}

func (c *cluster) replicaSet(t *testing.T, name string, replicas int32, cpuRequest, cpuUsage string) {
	labels := map[string]string{"app": name}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{kubelet.AnnotationCPUUsage: cpuUsage}},
				Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "nginx",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuRequest)}}}}},
			}},
	}
	if _, err := c.rs.Create(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) autoscaler(t *testing.T, name, kind string, target, maxReplicas int32) {
	h := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: kind, Name: name},
			MaxReplicas:    maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target}}}},
		},
	}
	if _, err := c.hpas.Create(context.Background(), h); err != nil {
		t.Fatal(err)
	}
}

// passUntil makes passes until cond holds of the autoscaler.
func (c *cluster) passUntil(t *testing.T, name, what string, cond func(*autoscalingv2.HorizontalPodAutoscaler) bool) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	var got *autoscalingv2.HorizontalPodAutoscaler
	controllertest.Eventually(t, what, func() (bool, string) {
		c.hpa.Pass(context.Background())
		h, err := c.hpas.Get(context.Background(), "default", name)
		if err != nil {
			return false, err.Error()
		}
		got = h
		return cond(h), fmt.Sprintf("status %+v", h.Status)
	})
	return got
}

func condition(h *autoscalingv2.HorizontalPodAutoscaler, typ autoscalingv2.HorizontalPodAutoscalerConditionType) autoscalingv2.HorizontalPodAutoscalerCondition {
	for _, c := range h.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return autoscalingv2.HorizontalPodAutoscalerCondition{}
}

func (c *cluster) setUsage(t *testing.T, selector, usage string) {
	t.Helper()
	list, err := c.pods.List(context.Background(), "default", metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		body := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, kubelet.AnnotationCPUUsage, usage)
		if err := c.env.Client.Do(context.Background(), http.MethodPatch, "/api/v1/namespaces/default/pods/"+p.Name, nil,
			"application/merge-patch+json", body, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// waitForMetrics waits until metrics.k8s.io reports n pods of selector
// at usage, so that a pass sees them all.
func (c *cluster) waitForMetrics(t *testing.T, selector string, n int, usage string) {
	t.Helper()
	controllertest.Eventually(t, fmt.Sprintf("%d pods of %s at %s in metrics.k8s.io", n, selector, usage), func() (bool, string) {
		var l metricsv1beta1.PodMetricsList
		q := url.Values{"labelSelector": {selector}}
		if err := c.env.Client.Do(context.Background(), http.MethodGet, "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", q, "", nil, &l); err != nil {
			return false, err.Error()
		}
		at := 0
		for _, m := range l.Items {
			if len(m.Containers) == 1 && m.Containers[0].Usage.Cpu().Cmp(resource.MustParse(usage)) == 0 {
				at++
			}
		}
		return at == n, fmt.Sprintf("%d of %d", at, len(l.Items))
	})
}

func (c *cluster) replicas(t *testing.T, name string) int32 {
	rs, err := c.rs.Get(context.Background(), "default", name)
	if err != nil {
		t.Fatal(err)
	}
	return *rs.Spec.Replicas
}

// An autoscaler at 50% CPU whose pods use all they request doubles them,
// with kube's event; when the load drops it waits out the downscale
// stabilization window before it scales down.
func TestScalesUpThenDownAfterStabilization(t *testing.T) {
	c := start(t, podautoscaler.Options{DownscaleStabilization: time.Minute})
	c.replicaSet(t, "web", 2, "100m", "100m")
	c.waitForMetrics(t, "app=web", 2, "100m")
	c.autoscaler(t, "web", "ReplicaSet", 50, 10)

	h := c.passUntil(t, "web", "the autoscaler doubles web to 4", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return h.Status.DesiredReplicas == 4
	})
	if n := c.replicas(t, "web"); n != 4 {
		t.Fatalf("web has %d replicas, want 4", n)
	}
	if h.Status.LastScaleTime == nil || len(h.Status.CurrentMetrics) != 1 || *h.Status.CurrentMetrics[0].Resource.Current.AverageUtilization != 100 {
		t.Errorf("status after the rescale: %+v", h.Status)
	}
	if cond := condition(h, autoscalingv2.AbleToScale); cond.Status != corev1.ConditionTrue || cond.Reason != "SucceededRescale" {
		t.Errorf("AbleToScale %+v", cond)
	}
	if cond := condition(h, autoscalingv2.ScalingActive); cond.Status != corev1.ConditionTrue || cond.Reason != "ValidMetricFound" {
		t.Errorf("ScalingActive %+v", cond)
	}
	wantEvent(t, c.recorder, "Normal SuccessfulRescale New size: 4; reason: cpu resource utilization (percentage of request) above target")

	// Four pods at 100%: the window's proposals are 4 and 8; make the
	// controller see all four new pods at low load.
	controllertest.Eventually(t, "four pods", func() (bool, string) {
		l, _ := c.pods.List(context.Background(), "default", metav1.ListOptions{LabelSelector: "app=web"})
		return len(l.Items) == 4, fmt.Sprint(len(l.Items))
	})
	c.setUsage(t, "app=web", "10m")
	c.waitForMetrics(t, "app=web", 4, "10m")
	c.passUntil(t, "web", "the autoscaler reads the low load", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		m := h.Status.CurrentMetrics
		return len(m) == 1 && *m[0].Resource.Current.AverageUtilization == 10
	})
	c.hpa.Pass(context.Background())
	if n := c.replicas(t, "web"); n != 4 {
		t.Fatalf("web scaled to %d inside the stabilization window", n)
	}
	h, err := c.hpas.Get(context.Background(), "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if cond := condition(h, autoscalingv2.AbleToScale); cond.Reason != "ScaleDownStabilized" ||
		cond.Message != "recent recommendations were higher than current one, applying the highest recent recommendation" {
		t.Errorf("inside the window, AbleToScale %+v", cond)
	}
	if h.Status.DesiredReplicas != 4 {
		t.Errorf("inside the window, desiredReplicas %d", h.Status.DesiredReplicas)
	}
	c.clock.Step(61 * time.Second)
	c.passUntil(t, "web", "after the window the autoscaler scales web down to 1", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return h.Status.DesiredReplicas == 1
	})
	if n := c.replicas(t, "web"); n != 1 {
		t.Errorf("web has %d replicas, want 1", n)
	}
}

// An autoscaler with a behavior: its maxReplicas bounds the scale-up
// (ScalingLimited True, TooManyReplicas); its own scale-down window holds
// the replicas, and after it they fall to minReplicas, with the reason
// and the limit kube gives.
func TestBehaviorWindowAndLimits(t *testing.T) {
	c := start(t, podautoscaler.Options{}) // the flag's 5 minutes do not apply: the behavior says 30s
	c.replicaSet(t, "api", 2, "100m", "100m")
	c.waitForMetrics(t, "app=api", 2, "100m")
	c.autoscaler(t, "api", "ReplicaSet", 50, 3)
	h, err := c.hpas.Get(context.Background(), "default", "api")
	if err != nil {
		t.Fatal(err)
	}
	h.Spec.MinReplicas = ptrTo(int32(2))
	h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptrTo(int32(30))}}
	if _, err := c.hpas.Update(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	h = c.passUntil(t, "api", "the autoscaler scales api to its maximum, 3", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return h.Status.DesiredReplicas == 3
	})
	if cond := condition(h, autoscalingv2.ScalingLimited); cond.Status != corev1.ConditionTrue || cond.Reason != "TooManyReplicas" {
		t.Errorf("ScalingLimited %+v", cond)
	}
	wantEvent(t, c.recorder, "Normal SuccessfulRescale New size: 3; reason: cpu resource utilization (percentage of request) above target")

	controllertest.Eventually(t, "three pods", func() (bool, string) {
		l, _ := c.pods.List(context.Background(), "default", metav1.ListOptions{LabelSelector: "app=api"})
		return len(l.Items) == 3, fmt.Sprint(len(l.Items))
	})
	c.setUsage(t, "app=api", "10m")
	c.waitForMetrics(t, "app=api", 3, "10m")
	h = c.passUntil(t, "api", "the window holds api at 3", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return condition(h, autoscalingv2.AbleToScale).Reason == "ScaleDownStabilized"
	})
	if n := c.replicas(t, "api"); n != 3 || h.Status.DesiredReplicas != 3 {
		t.Fatalf("inside the window: %d replicas, desired %d", n, h.Status.DesiredReplicas)
	}
	c.clock.Step(31 * time.Second)
	h = c.passUntil(t, "api", "after the window the autoscaler scales api down to 2", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return h.Status.DesiredReplicas == 2
	})
	if cond := condition(h, autoscalingv2.ScalingLimited); cond.Status != corev1.ConditionTrue || cond.Reason != "TooFewReplicas" {
		t.Errorf("ScalingLimited %+v", cond)
	}
	wantEvent(t, c.recorder, "Normal SuccessfulRescale New size: 2; reason: All metrics below target")
}

func ptrTo[T any](v T) *T { return &v }

// Usage within 10% of the target changes nothing.
func TestTolerance(t *testing.T) {
	c := start(t, podautoscaler.Options{})
	c.replicaSet(t, "calm", 2, "100m", "54m") // 54% of a 50% target: ratio 1.08
	c.waitForMetrics(t, "app=calm", 2, "54m")
	c.autoscaler(t, "calm", "ReplicaSet", 50, 10)
	h := c.passUntil(t, "calm", "the autoscaler reads 54%", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		m := h.Status.CurrentMetrics
		return len(m) == 1 && *m[0].Resource.Current.AverageUtilization == 54
	})
	if h.Status.DesiredReplicas != 2 || c.replicas(t, "calm") != 2 {
		t.Errorf("within the tolerance: desired %d, replicas %d", h.Status.DesiredReplicas, c.replicas(t, "calm"))
	}
}

// A target without a scale subresource cannot be scaled: AbleToScale
// False, FailedGetScale.
func TestTargetWithoutScale(t *testing.T) {
	c := start(t, podautoscaler.Options{})
	c.autoscaler(t, "ds", "DaemonSet", 50, 10)
	h := c.passUntil(t, "ds", "AbleToScale False", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return condition(h, autoscalingv2.AbleToScale).Status == corev1.ConditionFalse
	})
	if cond := condition(h, autoscalingv2.AbleToScale); cond.Reason != "FailedGetScale" {
		t.Errorf("AbleToScale %+v", cond)
	}
}

func wantEvent(t *testing.T, r *record.FakeRecorder, want string) {
	t.Helper()
	if !slices.Contains(r.Events(), want) {
		t.Errorf("no event %q in %q", want, r.Events())
	}
}
