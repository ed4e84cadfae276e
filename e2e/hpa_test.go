package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
	"github.com/minictl/minictl/kubelet"
)

// TestHPAScalesUpThenDownAfterTheWindow runs the autoscaler's loop on the
// built binary with `up --fast`: a Deployment of 2 pods requesting 100m
// CPU and an autoscaling/v2 autoscaler at 50% (minReplicas 2,
// maxReplicas 4). When the pods use all they request, the autoscaler
// doubles the Deployment (desiredReplicas 4, the event SuccessfulRescale
// with kube's reason, TARGETS "cpu: 100%/50%" in the table kubectl get
// hpa prints), then holds it at its maximum (ScalingLimited
// TooManyReplicas). When the load drops, it reads the low usage but
// keeps 4 replicas (AbleToScale ScaleDownStabilized) until the downscale
// window --fast sets, 15s, has passed since its last high
// recommendation; then it scales back to 2.
func TestHPAScalesUpThenDownAfterTheWindow(t *testing.T) {
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast", "--nodes", "2")
	rc := c.client(t)
	ctx := context.Background()
	deployments := client.For[*appsv1.Deployment](rc)
	hpas := client.For[*autoscalingv2.HorizontalPodAutoscaler](rc)
	pods := client.For[*corev1.Pod](rc)

	d := deploymentObj("web", 2, "nginx:1.27")
	d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	if _, err := deployments.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	eventually(t, "2 web pods Running and Ready", func() (bool, string) {
		n := runningReady(livePods(t, pods, "web"))
		return n == 2, fmt.Sprint(n)
	})
	target := int32(50)
	if _, err := hpas.Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptrTo(int32(2)), MaxReplicas: 4,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target}}}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	hpa := func() *autoscalingv2.HorizontalPodAutoscaler {
		t.Helper()
		h, err := hpas.Get(ctx, "default", "web")
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	eventually(t, "the autoscaler to read 10% (the pods' idle usage, a tenth of their request)", func() (bool, string) {
		h := hpa()
		return hpaUtilization(h) == 10 && h.Status.DesiredReplicas == 2, fmt.Sprintf("%+v", h.Status)
	})

	// The load goes up: each of the two pods uses all it requests.
	setCPUUsage(t, rc, livePods(t, pods, "web"), "100m")
	eventually(t, `kubectl get hpa's TARGETS "cpu: 100%/50%"`, func() (bool, string) {
		row := hpaTableRow(t, c, "web")
		return row["Targets"] == "cpu: 100%/50%", fmt.Sprint(row)
	})
	row := hpaTableRow(t, c, "web")
	if row["Reference"] != "Deployment/web" || row["MinPods"] != "2" || row["MaxPods"] != float64(4) {
		t.Errorf("kubectl get hpa row %v", row)
	}
	eventually(t, "the autoscaler to double web", func() (bool, string) {
		h := hpa()
		return h.Status.DesiredReplicas == 4 && h.Status.LastScaleTime != nil, fmt.Sprintf("%+v", h.Status)
	})
	if dep, err := deployments.Get(ctx, "default", "web"); err != nil || *dep.Spec.Replicas != 4 {
		t.Fatalf("the Deployment after the rescale: %v, %v", dep, err)
	}
	wantHPAEvent(t, rc, "SuccessfulRescale", "New size: 4; reason: cpu resource utilization (percentage of request) above target")
	scaledUp := hpa().Status.LastScaleTime.Time
	eventually(t, "4 web pods Running, the autoscaler at its maximum", func() (bool, string) {
		h := hpa()
		cond := hpaCondition(h, autoscalingv2.ScalingLimited)
		n := runningReady(livePods(t, pods, "web"))
		return n == 4 && h.Status.CurrentReplicas == 4 && cond.Status == corev1.ConditionTrue && cond.Reason == "TooManyReplicas",
			fmt.Sprintf("%d running, %+v", n, h.Status)
	})

	// The load drops: every pod back to a tenth of its request. The
	// autoscaler sees it, and the window holds the replicas.
	setCPUUsage(t, rc, livePods(t, pods, "web"), "10m")
	eventually(t, "the autoscaler to read 10% and hold 4 replicas (ScaleDownStabilized)", func() (bool, string) {
		h := hpa()
		return hpaUtilization(h) == 10 && hpaCondition(h, autoscalingv2.AbleToScale).Reason == "ScaleDownStabilized", fmt.Sprintf("%+v", h.Status)
	})
	h := hpa()
	if h.Status.DesiredReplicas != 4 || h.Status.CurrentReplicas != 4 || !h.Status.LastScaleTime.Time.Equal(scaledUp) {
		t.Fatalf("inside the window the autoscaler changed the replicas: %+v", h.Status)
	}
	if cond := hpaCondition(h, autoscalingv2.AbleToScale); cond.Status != corev1.ConditionTrue ||
		cond.Message != "recent recommendations were higher than current one, applying the highest recent recommendation" {
		t.Errorf("AbleToScale %+v", cond)
	}
	if dep, err := deployments.Get(ctx, "default", "web"); err != nil || *dep.Spec.Replicas != 4 {
		t.Fatalf("the Deployment inside the window: %v, %v", dep, err)
	}

	eventually(t, "the autoscaler to scale web down to 2 once the window has passed", func() (bool, string) {
		h := hpa()
		return h.Status.DesiredReplicas == 2, fmt.Sprintf("%+v", h.Status)
	})
	h = hpa()
	if held := h.Status.LastScaleTime.Time.Sub(scaledUp); held < 14*time.Second { // lastScaleTime has whole seconds
		t.Errorf("scaled down %s after scaling up, inside the 15s window", held)
	}
	if cond := hpaCondition(h, autoscalingv2.ScalingLimited); cond.Status != corev1.ConditionTrue || cond.Reason != "TooFewReplicas" {
		t.Errorf("ScalingLimited after the scale-down %+v", cond)
	}
	wantHPAEvent(t, rc, "SuccessfulRescale", "New size: 2; reason: All metrics below target")
	eventually(t, "2 web pods left", func() (bool, string) {
		n := len(livePods(t, pods, "web"))
		return n == 2, fmt.Sprint(n)
	})
}

// hpaUtilization is the CPU utilization the autoscaler last read, -1 if none.
func hpaUtilization(h *autoscalingv2.HorizontalPodAutoscaler) int32 {
	for _, m := range h.Status.CurrentMetrics {
		if m.Resource != nil && m.Resource.Current.AverageUtilization != nil {
			return *m.Resource.Current.AverageUtilization
		}
	}
	return -1
}

func hpaCondition(h *autoscalingv2.HorizontalPodAutoscaler, typ autoscalingv2.HorizontalPodAutoscalerConditionType) autoscalingv2.HorizontalPodAutoscalerCondition {
	for _, c := range h.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return autoscalingv2.HorizontalPodAutoscalerCondition{}
}

// setCPUUsage sets the usage the simulated kubelet reports for each pod.
func setCPUUsage(t *testing.T, rc *client.RESTClient, pods []*corev1.Pod, usage string) {
	t.Helper()
	pc := client.For[*corev1.Pod](rc)
	for _, p := range pods {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, kubelet.AnnotationCPUUsage, usage)
		if _, err := pc.Patch(context.Background(), p.Namespace, p.Name, types.MergePatchType, patch); err != nil {
			t.Fatal(err)
		}
	}
}

// hpaTableRow is the autoscaler's row as kubectl get hpa asks for it,
// by column name.
func hpaTableRow(t *testing.T, c *cluster, name string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.URL+"/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/"+name, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var table metav1.Table
	if err := json.Unmarshal(data, &table); err != nil || len(table.Rows) != 1 {
		t.Fatalf("GET %s as a Table: %v\n%s", name, err, data)
	}
	row := map[string]any{}
	for i, col := range table.ColumnDefinitions {
		if i < len(table.Rows[0].Cells) {
			row[col.Name] = table.Rows[0].Cells[i]
		}
	}
	return row
}

// wantHPAEvent fails unless the autoscaler web has an event of reason
// with message.
func wantHPAEvent(t *testing.T, rc *client.RESTClient, reason, message string) {
	t.Helper()
	l, err := client.For[*corev1.Event](rc).List(context.Background(), "default", metav1.ListOptions{
		FieldSelector: "involvedObject.kind=HorizontalPodAutoscaler,involvedObject.name=web,reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range l.Items {
		if e.Message == message && e.Type == corev1.EventTypeNormal && e.Source.Component == "horizontal-pod-autoscaler" {
			return
		}
		seen = append(seen, e.Message)
	}
	t.Errorf("no %s event %q; saw %q", reason, message, seen)
}
