package apiserver_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/internal/testenv"
)

func hpaPath(version, ns, name string) string {
	p := "/apis/autoscaling/" + version + "/namespaces/" + ns + "/horizontalpodautoscalers"
	if name != "" {
		p += "/" + name
	}
	return p
}

func hpaV2(name string) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas:    10,
		},
	}
}

// TestHorizontalPodAutoscalers serves one stored autoscaler at
// autoscaling/v2 and autoscaling/v1 as kube-apiserver does: v1's CPU
// target is v2's first CPU utilization metric, what v1 cannot say travels
// in its annotations and comes back whole, and kube's defaults and
// validation apply through either version.
func TestHorizontalPodAutoscalers(t *testing.T) {
	env := testenv.Start(t)

	t.Run("v1 with a CPU target reads back in v2 as a Utilization metric, defaulted", func(t *testing.T) {
		v1 := &autoscalingv1.HorizontalPodAutoscaler{
			TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "HorizontalPodAutoscaler"},
			ObjectMeta: metav1.ObjectMeta{Name: "from-v1"},
			Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
				ScaleTargetRef:                 autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				MaxReplicas:                    5,
				TargetCPUUtilizationPercentage: ptr(int32(50)),
			},
		}
		got := create[autoscalingv1.HorizontalPodAutoscaler](t, env, hpaPath("v1", "default", ""), v1)
		if got.Spec.MinReplicas == nil || *got.Spec.MinReplicas != 1 || got.Spec.TargetCPUUtilizationPercentage == nil || *got.Spec.TargetCPUUtilizationPercentage != 50 {
			t.Fatalf("v1 create answered %+v", got.Spec)
		}
		v2 := get[autoscalingv2.HorizontalPodAutoscaler](t, env, hpaPath("v2", "default", "from-v1"))
		if v2.APIVersion != "autoscaling/v2" || len(v2.Spec.Metrics) != 1 || !isCPU(v2.Spec.Metrics[0], 50) {
			t.Fatalf("v2 reads %s %+v", v2.APIVersion, v2.Spec.Metrics)
		}
		if len(v2.Annotations) != 0 {
			t.Errorf("v2 carries annotations %v", v2.Annotations)
		}
	})

	t.Run("v2 metrics and behavior survive a v1 read and write", func(t *testing.T) {
		h := hpaV2("rich")
		h.Spec.Metrics = []autoscalingv2.MetricSpec{
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(int32(60))}}},
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr(resource.MustParse("100Mi"))}}},
		}
		h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr(int32(60))}}
		created := create[autoscalingv2.HorizontalPodAutoscaler](t, env, hpaPath("v2", "default", ""), h)
		// kube's behavior defaults fill what was left out.
		up, down := created.Spec.Behavior.ScaleUp, created.Spec.Behavior.ScaleDown
		if up == nil || *up.StabilizationWindowSeconds != 0 || len(up.Policies) != 2 || *up.SelectPolicy != autoscalingv2.MaxChangePolicySelect {
			t.Errorf("scaleUp defaulted to %+v", up)
		}
		if *down.StabilizationWindowSeconds != 60 || len(down.Policies) != 1 || down.Policies[0].Value != 100 || down.Policies[0].PeriodSeconds != 15 {
			t.Errorf("scaleDown defaulted to %+v", down)
		}

		v1 := get[autoscalingv1.HorizontalPodAutoscaler](t, env, hpaPath("v1", "default", "rich"))
		if v1.Spec.TargetCPUUtilizationPercentage == nil || *v1.Spec.TargetCPUUtilizationPercentage != 60 {
			t.Errorf("v1 target %v", v1.Spec.TargetCPUUtilizationPercentage)
		}
		for _, k := range []string{api.HPAMetricSpecsAnnotation, api.HPABehaviorAnnotation} {
			if v1.Annotations[k] == "" {
				t.Errorf("v1 lacks annotation %s: %v", k, v1.Annotations)
			}
		}
		v1.Spec.MaxReplicas = 7
		update[autoscalingv1.HorizontalPodAutoscaler](t, env, hpaPath("v1", "default", "rich"), v1)

		v2 := get[autoscalingv2.HorizontalPodAutoscaler](t, env, hpaPath("v2", "default", "rich"))
		if v2.Spec.MaxReplicas != 7 || len(v2.Spec.Metrics) != 2 || !isCPU(v2.Spec.Metrics[0], 60) ||
			v2.Spec.Metrics[1].Resource == nil || v2.Spec.Metrics[1].Resource.Name != corev1.ResourceMemory ||
			v2.Spec.Metrics[1].Resource.Target.Type != autoscalingv2.AverageValueMetricType ||
			v2.Spec.Metrics[1].Resource.Target.AverageValue.Cmp(resource.MustParse("100Mi")) != 0 {
			t.Errorf("after a v1 update v2 reads max %d metrics %+v", v2.Spec.MaxReplicas, v2.Spec.Metrics)
		}
		if v2.Spec.Behavior == nil || *v2.Spec.Behavior.ScaleDown.StabilizationWindowSeconds != 60 {
			t.Errorf("behavior after a v1 update: %+v", v2.Spec.Behavior)
		}
		if len(v2.Annotations) != 0 {
			t.Errorf("v2 carries annotations %v", v2.Annotations)
		}
	})

	t.Run("status written through v2 reads in v1", func(t *testing.T) {
		h := get[autoscalingv2.HorizontalPodAutoscaler](t, env, hpaPath("v2", "default", "from-v1"))
		h.Status = autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, DesiredReplicas: 4,
			CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
					Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr(int32(100)), AverageValue: ptr(resource.MustParse("100m"))}}}},
			Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "SucceededRescale"}},
		}
		update[autoscalingv2.HorizontalPodAutoscaler](t, env, hpaPath("v2", "default", "from-v1")+"/status", h)
		v1 := get[autoscalingv1.HorizontalPodAutoscaler](t, env, hpaPath("v1", "default", "from-v1"))
		if v1.Status.CurrentCPUUtilizationPercentage == nil || *v1.Status.CurrentCPUUtilizationPercentage != 100 ||
			v1.Status.DesiredReplicas != 4 || v1.Annotations[api.HPAConditionsAnnotation] == "" {
			t.Errorf("v1 status %+v, annotations %v", v1.Status, v1.Annotations)
		}
		// A main-resource update through v1 keeps the status.
		v1.Spec.MaxReplicas = 6
		update[autoscalingv1.HorizontalPodAutoscaler](t, env, hpaPath("v1", "default", "from-v1"), v1)
		v2 := get[autoscalingv2.HorizontalPodAutoscaler](t, env, hpaPath("v2", "default", "from-v1"))
		if v2.Status.DesiredReplicas != 4 || len(v2.Status.Conditions) != 1 || len(v2.Status.CurrentMetrics) != 1 {
			t.Errorf("status after a v1 update: %+v", v2.Status)
		}
	})

	invalid := []struct {
		name  string
		edit  func(*autoscalingv2.HorizontalPodAutoscaler)
		field string
		msg   string
	}{
		{"minReplicas 0", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptr(int32(0)) },
			"spec.minReplicas", "must be greater than or equal to 1"},
		{"maxReplicas below minReplicas", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.MinReplicas = ptr(int32(5))
			h.Spec.MaxReplicas = 3
		},
			"spec.maxReplicas", "must be greater than or equal to `minReplicas`"},
		{"no target name", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.ScaleTargetRef.Name = "" },
			"spec.scaleTargetRef.name", "Required value"},
		{"a utilization of 0", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(int32(0))}}}}
		}, "spec.metrics[0].resource.target.averageUtilization", "must be greater than 0"},
		{"a stabilization window over an hour", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr(int32(3601))}}
		}, "spec.behavior.scaleUp.stabilizationWindowSeconds", "must be less than or equal to 3600"},
	}
	for _, c := range invalid {
		t.Run("refused: "+c.name, func(t *testing.T) {
			h := hpaV2("bad")
			c.edit(h)
			before := revision(t, env)
			st := do(t, env, http.MethodPost, hpaPath("v2", "default", ""), jsonType, h).
				wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
			assertCause(t, st, c.field, c.msg)
			if after := revision(t, env); after != before {
				t.Errorf("a refused create moved the revision from %d to %d", before, after)
			}
		})
	}

	t.Run("refused through v1: minReplicas 0", func(t *testing.T) {
		v1 := &autoscalingv1.HorizontalPodAutoscaler{
			TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "HorizontalPodAutoscaler"},
			ObjectMeta: metav1.ObjectMeta{Name: "zero"},
			Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MinReplicas: ptr(int32(0)), MaxReplicas: 3,
				ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "web"}},
		}
		st := do(t, env, http.MethodPost, hpaPath("v1", "default", ""), jsonType, v1).
			wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		assertCause(t, st, "spec.minReplicas", "must be greater than or equal to 1")
	})

	t.Run("a table has kubectl's columns", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, env.URL+hpaPath("v1", "default", "from-v1"), nil)
		req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		resp, err := env.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var table metav1.Table
		if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range table.ColumnDefinitions {
			names = append(names, c.Name)
		}
		if !slices.Equal(names, []string{"Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"}) || len(table.Rows) != 1 {
			t.Fatalf("columns %v, %d rows", names, len(table.Rows))
		}
		cells := table.Rows[0].Cells
		if cells[1] != "Deployment/web" || cells[2] != "cpu: 100%/50%" || cells[3] != "1" {
			t.Errorf("row %v", cells)
		}
	})
}

func isCPU(m autoscalingv2.MetricSpec, pct int32) bool {
	return m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
		m.Resource.Target.Type == autoscalingv2.UtilizationMetricType && m.Resource.Target.AverageUtilization != nil &&
		*m.Resource.Target.AverageUtilization == pct
}

func assertCause(t *testing.T, st metav1.Status, field, msg string) {
	t.Helper()
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Field == field && strings.Contains(c.Message, msg) {
				return
			}
		}
	}
	t.Errorf("no cause on %s saying %q: %+v", field, msg, st.Details)
}
