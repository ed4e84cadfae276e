package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// HorizontalPodAutoscalers (autoscaling/v2 and autoscaling/v1): one object,
// stored as autoscaling/v2, served at both versions. v1 knows one metric,
// the target CPU utilization; everything else v2 holds travels in v1 as
// the annotations kube-apiserver uses, so that a v1 client that reads and
// writes back an object loses nothing:
//
//   - autoscaling.alpha.kubernetes.io/metrics: the spec's other metrics;
//   - autoscaling.alpha.kubernetes.io/current-metrics: status.currentMetrics;
//   - autoscaling.alpha.kubernetes.io/conditions: status.conditions;
//   - autoscaling.alpha.kubernetes.io/behavior: spec.behavior.
//
// The annotations are JSON in autoscaling/v1's own metric types (the
// older, v2beta1 shape) for the metrics, and in v2's for behavior.
const (
	HPAMetricSpecsAnnotation    = "autoscaling.alpha.kubernetes.io/metrics"
	HPAMetricStatusesAnnotation = "autoscaling.alpha.kubernetes.io/current-metrics"
	HPAConditionsAnnotation     = "autoscaling.alpha.kubernetes.io/conditions"
	HPABehaviorAnnotation       = "autoscaling.alpha.kubernetes.io/behavior"

	// DefaultCPUUtilization is the target of an autoscaler that names no
	// metric.
	DefaultCPUUtilization = 80
)

// HPAScaleToZero is kube's HPAScaleToZero feature gate (alpha, off):
// when on, minReplicas may be 0 as long as an object or external metric
// is configured.
var HPAScaleToZero = false

// hpaConvert converts autoscalers between autoscaling/v1 and v2 (the
// api.Resource.Convert of both versions).
func hpaConvert(_ context.Context, objs []*unstructured.Unstructured, to string) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, u := range objs {
		v2, err := hpaToV2(u)
		if err != nil {
			return nil, err
		}
		var obj any = v2
		if to == "autoscaling/v1" {
			obj = HPAToV1(v2)
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, err
		}
		out[i] = &unstructured.Unstructured{Object: m}
		out[i].SetAPIVersion(to)
		out[i].SetKind("HorizontalPodAutoscaler")
	}
	return out, nil
}

func hpaToV2(u *unstructured.Unstructured) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	if u.GetAPIVersion() == "autoscaling/v1" {
		var v1 autoscalingv1.HorizontalPodAutoscaler
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &v1); err != nil {
			return nil, err
		}
		return HPAToV2(&v1)
	}
	var v2 autoscalingv2.HorizontalPodAutoscaler
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &v2); err != nil {
		return nil, err
	}
	return &v2, nil
}

// HPAToV1 is in as autoscaling/v1: the first CPU utilization target as
// targetCPUUtilizationPercentage, the rest in annotations.
func HPAToV1(in *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv1.HorizontalPodAutoscaler {
	out := &autoscalingv1.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
			MinReplicas:    in.Spec.MinReplicas,
			MaxReplicas:    in.Spec.MaxReplicas,
		},
		Status: autoscalingv1.HorizontalPodAutoscalerStatus{
			ObservedGeneration: in.Status.ObservedGeneration,
			LastScaleTime:      in.Status.LastScaleTime,
			CurrentReplicas:    in.Status.CurrentReplicas,
			DesiredReplicas:    in.Status.DesiredReplicas,
		},
	}
	var others []autoscalingv1.MetricSpec
	for _, m := range in.Spec.Metrics {
		if out.Spec.TargetCPUUtilizationPercentage == nil && isCPUUtilization(m) {
			out.Spec.TargetCPUUtilizationPercentage = ptrTo(*m.Resource.Target.AverageUtilization)
			continue
		}
		others = append(others, metricSpecToV1(m))
	}
	for _, m := range in.Status.CurrentMetrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
			m.Resource.Current.AverageUtilization != nil {
			out.Status.CurrentCPUUtilizationPercentage = ptrTo(*m.Resource.Current.AverageUtilization)
			break
		}
	}
	annotate := func(key string, v any) {
		data, _ := json.Marshal(v) // plain structs: cannot fail
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[key] = string(data)
	}
	if len(others) > 0 {
		annotate(HPAMetricSpecsAnnotation, others)
	}
	if len(in.Status.CurrentMetrics) > 0 {
		st := make([]autoscalingv1.MetricStatus, len(in.Status.CurrentMetrics))
		for i, m := range in.Status.CurrentMetrics {
			st[i] = metricStatusToV1(m)
		}
		annotate(HPAMetricStatusesAnnotation, st)
	}
	if len(in.Status.Conditions) > 0 {
		cs := make([]autoscalingv1.HorizontalPodAutoscalerCondition, len(in.Status.Conditions))
		for i, c := range in.Status.Conditions {
			cs[i] = autoscalingv1.HorizontalPodAutoscalerCondition{
				Type: autoscalingv1.HorizontalPodAutoscalerConditionType(c.Type), Status: c.Status,
				LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
			}
		}
		annotate(HPAConditionsAnnotation, cs)
	}
	if in.Spec.Behavior != nil {
		annotate(HPABehaviorAnnotation, in.Spec.Behavior)
	}
	return out
}

// HPAToV2 is in as autoscaling/v2: the annotations HPAToV1 wrote become
// fields again, and are dropped. An autoscaler with no metric at all
// targets 80% CPU, as v1 always did. A malformed annotation is an error.
func HPAToV2(in *autoscalingv1.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	out := &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
			MinReplicas:    in.Spec.MinReplicas,
			MaxReplicas:    in.Spec.MaxReplicas,
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			ObservedGeneration: in.Status.ObservedGeneration,
			LastScaleTime:      in.Status.LastScaleTime,
			CurrentReplicas:    in.Status.CurrentReplicas,
			DesiredReplicas:    in.Status.DesiredReplicas,
		},
	}
	if in.Spec.TargetCPUUtilizationPercentage != nil {
		out.Spec.Metrics = append(out.Spec.Metrics, cpuUtilization(*in.Spec.TargetCPUUtilizationPercentage))
	}
	ann := out.Annotations
	if enc, ok := ann[HPAMetricSpecsAnnotation]; ok {
		var others []autoscalingv1.MetricSpec
		if err := json.Unmarshal([]byte(enc), &others); err != nil {
			return nil, fmt.Errorf("annotation %s: %w", HPAMetricSpecsAnnotation, err)
		}
		for _, m := range others {
			out.Spec.Metrics = append(out.Spec.Metrics, metricSpecToV2(m))
		}
		delete(ann, HPAMetricSpecsAnnotation)
	}
	if len(out.Spec.Metrics) == 0 {
		out.Spec.Metrics = []autoscalingv2.MetricSpec{cpuUtilization(DefaultCPUUtilization)}
	}
	if enc, ok := ann[HPAMetricStatusesAnnotation]; ok {
		var st []autoscalingv1.MetricStatus
		if err := json.Unmarshal([]byte(enc), &st); err != nil {
			return nil, fmt.Errorf("annotation %s: %w", HPAMetricStatusesAnnotation, err)
		}
		for _, m := range st {
			out.Status.CurrentMetrics = append(out.Status.CurrentMetrics, metricStatusToV2(m))
		}
		delete(ann, HPAMetricStatusesAnnotation)
	} else if in.Status.CurrentCPUUtilizationPercentage != nil {
		out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
				Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptrTo(*in.Status.CurrentCPUUtilizationPercentage)}},
		}}
	}
	if enc, ok := ann[HPAConditionsAnnotation]; ok {
		var cs []autoscalingv1.HorizontalPodAutoscalerCondition
		if err := json.Unmarshal([]byte(enc), &cs); err != nil {
			return nil, fmt.Errorf("annotation %s: %w", HPAConditionsAnnotation, err)
		}
		for _, c := range cs {
			out.Status.Conditions = append(out.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
				Type: autoscalingv2.HorizontalPodAutoscalerConditionType(c.Type), Status: c.Status,
				LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
			})
		}
		delete(ann, HPAConditionsAnnotation)
	}
	if enc, ok := ann[HPABehaviorAnnotation]; ok {
		var b autoscalingv2.HorizontalPodAutoscalerBehavior
		if err := json.Unmarshal([]byte(enc), &b); err != nil {
			return nil, fmt.Errorf("annotation %s: %w", HPABehaviorAnnotation, err)
		}
		out.Spec.Behavior = &b
		delete(ann, HPABehaviorAnnotation)
	}
	if len(ann) == 0 {
		out.Annotations = nil
	}
	return out, nil
}

func cpuUtilization(pct int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptrTo(pct)}},
	}
}

func isCPUUtilization(m autoscalingv2.MetricSpec) bool {
	return m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
		m.Resource.Target.AverageUtilization != nil
}

// metricSpecToV1 and the functions after it move one metric between the
// v2 shape (a target with a type) and v1's (one field per kind of target).
func metricSpecToV1(m autoscalingv2.MetricSpec) autoscalingv1.MetricSpec {
	out := autoscalingv1.MetricSpec{Type: autoscalingv1.MetricSourceType(m.Type)}
	switch {
	case m.Resource != nil:
		out.Resource = &autoscalingv1.ResourceMetricSource{Name: m.Resource.Name,
			TargetAverageUtilization: m.Resource.Target.AverageUtilization, TargetAverageValue: m.Resource.Target.AverageValue}
	case m.ContainerResource != nil:
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricSource{Name: m.ContainerResource.Name, Container: m.ContainerResource.Container,
			TargetAverageUtilization: m.ContainerResource.Target.AverageUtilization, TargetAverageValue: m.ContainerResource.Target.AverageValue}
	case m.Pods != nil:
		out.Pods = &autoscalingv1.PodsMetricSource{MetricName: m.Pods.Metric.Name, Selector: m.Pods.Metric.Selector,
			TargetAverageValue: quantityOrZero(m.Pods.Target.AverageValue)}
	case m.Object != nil:
		out.Object = &autoscalingv1.ObjectMetricSource{Target: autoscalingv1.CrossVersionObjectReference(m.Object.DescribedObject),
			MetricName: m.Object.Metric.Name, Selector: m.Object.Metric.Selector,
			TargetValue: quantityOrZero(m.Object.Target.Value), AverageValue: m.Object.Target.AverageValue}
	case m.External != nil:
		out.External = &autoscalingv1.ExternalMetricSource{MetricName: m.External.Metric.Name, MetricSelector: m.External.Metric.Selector,
			TargetValue: m.External.Target.Value, TargetAverageValue: m.External.Target.AverageValue}
	}
	return out
}

func metricSpecToV2(m autoscalingv1.MetricSpec) autoscalingv2.MetricSpec {
	out := autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType(m.Type)}
	switch {
	case m.Resource != nil:
		out.Resource = &autoscalingv2.ResourceMetricSource{Name: m.Resource.Name,
			Target: targetV2(m.Resource.TargetAverageUtilization, nil, m.Resource.TargetAverageValue)}
	case m.ContainerResource != nil:
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{Name: m.ContainerResource.Name, Container: m.ContainerResource.Container,
			Target: targetV2(m.ContainerResource.TargetAverageUtilization, nil, m.ContainerResource.TargetAverageValue)}
	case m.Pods != nil:
		out.Pods = &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: m.Pods.MetricName, Selector: m.Pods.Selector},
			Target: targetV2(nil, nil, ptrTo(m.Pods.TargetAverageValue))}
	case m.Object != nil:
		out.Object = &autoscalingv2.ObjectMetricSource{DescribedObject: autoscalingv2.CrossVersionObjectReference(m.Object.Target),
			Metric: autoscalingv2.MetricIdentifier{Name: m.Object.MetricName, Selector: m.Object.Selector},
			Target: targetV2(nil, ptrTo(m.Object.TargetValue), m.Object.AverageValue)}
	case m.External != nil:
		out.External = &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: m.External.MetricName, Selector: m.External.MetricSelector},
			Target: targetV2(nil, m.External.TargetValue, m.External.TargetAverageValue)}
	}
	return out
}

// targetV2 is a v1 target as v2's: its type is the field that is set.
func targetV2(util *int32, value, avg *resource.Quantity) autoscalingv2.MetricTarget {
	t := autoscalingv2.MetricTarget{AverageUtilization: util, Value: value, AverageValue: avg}
	switch {
	case util != nil:
		t.Type = autoscalingv2.UtilizationMetricType
	case value != nil && !value.IsZero():
		t.Type = autoscalingv2.ValueMetricType
	case avg != nil:
		t.Type = autoscalingv2.AverageValueMetricType
	case value != nil:
		t.Type = autoscalingv2.ValueMetricType
	}
	return t
}

func quantityOrZero(q *resource.Quantity) resource.Quantity {
	if q == nil {
		return resource.Quantity{}
	}
	return *q
}

func metricStatusToV1(m autoscalingv2.MetricStatus) autoscalingv1.MetricStatus {
	out := autoscalingv1.MetricStatus{Type: autoscalingv1.MetricSourceType(m.Type)}
	switch {
	case m.Resource != nil:
		out.Resource = &autoscalingv1.ResourceMetricStatus{Name: m.Resource.Name,
			CurrentAverageUtilization: m.Resource.Current.AverageUtilization, CurrentAverageValue: quantityOrZero(m.Resource.Current.AverageValue)}
	case m.ContainerResource != nil:
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricStatus{Name: m.ContainerResource.Name, Container: m.ContainerResource.Container,
			CurrentAverageUtilization: m.ContainerResource.Current.AverageUtilization, CurrentAverageValue: quantityOrZero(m.ContainerResource.Current.AverageValue)}
	case m.Pods != nil:
		out.Pods = &autoscalingv1.PodsMetricStatus{MetricName: m.Pods.Metric.Name, Selector: m.Pods.Metric.Selector,
			CurrentAverageValue: quantityOrZero(m.Pods.Current.AverageValue)}
	case m.Object != nil:
		out.Object = &autoscalingv1.ObjectMetricStatus{Target: autoscalingv1.CrossVersionObjectReference(m.Object.DescribedObject),
			MetricName: m.Object.Metric.Name, Selector: m.Object.Metric.Selector,
			CurrentValue: quantityOrZero(m.Object.Current.Value), AverageValue: m.Object.Current.AverageValue}
	case m.External != nil:
		out.External = &autoscalingv1.ExternalMetricStatus{MetricName: m.External.Metric.Name, MetricSelector: m.External.Metric.Selector,
			CurrentValue: quantityOrZero(m.External.Current.Value), CurrentAverageValue: m.External.Current.AverageValue}
	}
	return out
}

func metricStatusToV2(m autoscalingv1.MetricStatus) autoscalingv2.MetricStatus {
	out := autoscalingv2.MetricStatus{Type: autoscalingv2.MetricSourceType(m.Type)}
	switch {
	case m.Resource != nil:
		out.Resource = &autoscalingv2.ResourceMetricStatus{Name: m.Resource.Name,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: m.Resource.CurrentAverageUtilization, AverageValue: ptrTo(m.Resource.CurrentAverageValue)}}
	case m.ContainerResource != nil:
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{Name: m.ContainerResource.Name, Container: m.ContainerResource.Container,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: m.ContainerResource.CurrentAverageUtilization, AverageValue: ptrTo(m.ContainerResource.CurrentAverageValue)}}
	case m.Pods != nil:
		out.Pods = &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: m.Pods.MetricName, Selector: m.Pods.Selector},
			Current: autoscalingv2.MetricValueStatus{AverageValue: ptrTo(m.Pods.CurrentAverageValue)}}
	case m.Object != nil:
		out.Object = &autoscalingv2.ObjectMetricStatus{DescribedObject: autoscalingv2.CrossVersionObjectReference(m.Object.Target),
			Metric:  autoscalingv2.MetricIdentifier{Name: m.Object.MetricName, Selector: m.Object.Selector},
			Current: autoscalingv2.MetricValueStatus{Value: ptrTo(m.Object.CurrentValue), AverageValue: m.Object.AverageValue}}
	case m.External != nil:
		out.External = &autoscalingv2.ExternalMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: m.External.MetricName, Selector: m.External.MetricSelector},
			Current: autoscalingv2.MetricValueStatus{Value: ptrTo(m.External.CurrentValue), AverageValue: m.External.CurrentAverageValue}}
	}
	return out
}

// The behavior defaults (kube's GenerateHPAScaleUpRules and
// GenerateHPAScaleDownRules): up at once, by the larger of 100% and 4 pods
// each 15s; down by up to 100% each 15s. The scale-down stabilization
// window is left unset: the controller's
// --horizontal-pod-autoscaler-downscale-stabilization (5m) applies.
const (
	DefaultHPAScaleUpPercent      = 100
	DefaultHPAScaleUpPods         = 4
	DefaultHPAScaleUpPeriod       = 15
	DefaultHPAScaleDownPercent    = 100
	DefaultHPAScaleDownPeriod     = 15
	MaxHPAStabilizationWindow     = 3600
	MaxHPAScalingPolicyPeriodSecs = 1800
)

// defaultHPA is kube's autoscaling/v2 SetDefaults_HorizontalPodAutoscaler:
// minReplicas 1, 80% CPU when no metric is named, and a behavior given in
// part filled in with the defaults.
func defaultHPA(hpa *autoscalingv2.HorizontalPodAutoscaler) {
	if hpa.Spec.MinReplicas == nil {
		hpa.Spec.MinReplicas = ptrTo(int32(1))
	}
	if len(hpa.Spec.Metrics) == 0 {
		hpa.Spec.Metrics = []autoscalingv2.MetricSpec{cpuUtilization(DefaultCPUUtilization)}
	}
	if b := hpa.Spec.Behavior; b != nil {
		b.ScaleUp = scalingRules(b.ScaleUp, ptrTo(int32(0)), []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: DefaultHPAScaleUpPods, PeriodSeconds: DefaultHPAScaleUpPeriod},
			{Type: autoscalingv2.PercentScalingPolicy, Value: DefaultHPAScaleUpPercent, PeriodSeconds: DefaultHPAScaleUpPeriod},
		})
		b.ScaleDown = scalingRules(b.ScaleDown, nil, []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PercentScalingPolicy, Value: DefaultHPAScaleDownPercent, PeriodSeconds: DefaultHPAScaleDownPeriod},
		})
	}
}

// DefaultHPABehavior is the behavior of an autoscaler that names none.
func DefaultHPABehavior() *autoscalingv2.HorizontalPodAutoscalerBehavior {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{}}}
	defaultHPA(hpa)
	return hpa.Spec.Behavior
}

func scalingRules(r *autoscalingv2.HPAScalingRules, window *int32, policies []autoscalingv2.HPAScalingPolicy) *autoscalingv2.HPAScalingRules {
	if r == nil {
		r = &autoscalingv2.HPAScalingRules{}
	}
	if r.StabilizationWindowSeconds == nil {
		r.StabilizationWindowSeconds = window
	}
	if r.SelectPolicy == nil {
		r.SelectPolicy = ptrTo(autoscalingv2.MaxChangePolicySelect)
	}
	if len(r.Policies) == 0 {
		r.Policies = policies
	}
	return r
}

// defaultHPAV1 is autoscaling/v1's SetDefaults_HorizontalPodAutoscaler.
func defaultHPAV1(hpa *autoscalingv1.HorizontalPodAutoscaler) {
	if hpa.Spec.MinReplicas == nil {
		hpa.Spec.MinReplicas = ptrTo(int32(1))
	}
}

// An autoscaler's status is its controller's: a create starts empty, and
// an update of the main resource keeps it (kube's hpa strategy).
func prepareHPAForCreate(hpa *autoscalingv2.HorizontalPodAutoscaler) {
	hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{}
}

func prepareHPAForUpdate(hpa, old *autoscalingv2.HorizontalPodAutoscaler) { hpa.Status = old.Status }

func prepareHPAV1ForCreate(hpa *autoscalingv1.HorizontalPodAutoscaler) {
	hpa.Status = autoscalingv1.HorizontalPodAutoscalerStatus{}
	delete(hpa.Annotations, HPAMetricStatusesAnnotation)
	delete(hpa.Annotations, HPAConditionsAnnotation)
}

func prepareHPAV1ForUpdate(hpa, old *autoscalingv1.HorizontalPodAutoscaler) {
	hpa.Status = old.Status
	for _, k := range []string{HPAMetricStatusesAnnotation, HPAConditionsAnnotation} {
		if v, ok := old.Annotations[k]; ok {
			if hpa.Annotations == nil {
				hpa.Annotations = map[string]string{}
			}
			hpa.Annotations[k] = v
		} else {
			delete(hpa.Annotations, k)
		}
	}
}

// validateHPAV1 validates a v1 object as kube does: as the one object it
// is, in v2's terms and field paths.
func validateHPAV1(hpa *autoscalingv1.HorizontalPodAutoscaler) field.ErrorList {
	v2, err := HPAToV2(hpa)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations"), "", err.Error())}
	}
	defaultHPA(v2)
	return validateHPA(v2)
}

// validateHPA is kube's ValidateHorizontalPodAutoscalerSpec.
func validateHPA(hpa *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	var errs field.ErrorList
	spec := hpa.Spec
	p := field.NewPath("spec")
	minReplicas := int32(1)
	if spec.MinReplicas != nil {
		minReplicas = *spec.MinReplicas
	}
	if HPAScaleToZero {
		if minReplicas < 0 {
			errs = append(errs, field.Invalid(p.Child("minReplicas"), minReplicas, "must be greater than or equal to 0"))
		}
	} else if minReplicas < 1 {
		errs = append(errs, field.Invalid(p.Child("minReplicas"), minReplicas, "must be greater than or equal to 1"))
	}
	if spec.MaxReplicas < 1 {
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), spec.MaxReplicas, "must be greater than 0"))
	}
	if spec.MinReplicas != nil && spec.MaxReplicas < minReplicas {
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), spec.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	errs = append(errs, validateScaleTargetRef(spec.ScaleTargetRef, p.Child("scaleTargetRef"))...)
	errs = append(errs, validateMetrics(spec.Metrics, p.Child("metrics"), minReplicas)...)
	if spec.Behavior != nil {
		bp := p.Child("behavior")
		errs = append(errs, validateScalingRules(spec.Behavior.ScaleUp, bp.Child("scaleUp"))...)
		errs = append(errs, validateScalingRules(spec.Behavior.ScaleDown, bp.Child("scaleDown"))...)
	}
	return errs
}

func validateScaleTargetRef(ref autoscalingv2.CrossVersionObjectReference, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.Kind == "" {
		errs = append(errs, field.Required(p.Child("kind"), ""))
	} else {
		for _, msg := range nameIsPathSegment(ref.Kind, false) {
			errs = append(errs, field.Invalid(p.Child("kind"), ref.Kind, msg))
		}
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range nameIsPathSegment(ref.Name, false) {
			errs = append(errs, field.Invalid(p.Child("name"), ref.Name, msg))
		}
	}
	return errs
}

func validateMetrics(metrics []autoscalingv2.MetricSpec, p *field.Path, minReplicas int32) field.ErrorList {
	var errs field.ErrorList
	hasObjectOrExternal := false
	for i, m := range metrics {
		mp := p.Index(i)
		if m.Object != nil || m.External != nil {
			hasObjectOrExternal = true
		}
		errs = append(errs, validateMetric(m, mp)...)
	}
	if minReplicas == 0 && !hasObjectOrExternal {
		errs = append(errs, field.Forbidden(p, "must specify at least one Object or External metric to support scaling to zero replicas"))
	}
	return errs
}

func validateMetric(m autoscalingv2.MetricSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	set := 0
	for _, b := range []bool{m.Object != nil, m.Pods != nil, m.Resource != nil, m.ContainerResource != nil, m.External != nil} {
		if b {
			set++
		}
	}
	if m.Type == "" {
		return append(errs, field.Required(p.Child("type"), "must specify a metric source type"))
	}
	if set > 1 {
		errs = append(errs, field.Forbidden(p, "must populate the given metric source only"))
	}
	switch m.Type {
	case autoscalingv2.ResourceMetricSourceType:
		if m.Resource == nil {
			return append(errs, field.Required(p.Child("resource"), "must populate information for the given metric source"))
		}
		rp := p.Child("resource")
		if m.Resource.Name == "" {
			errs = append(errs, field.Required(rp.Child("name"), "must specify a resource name"))
		}
		errs = append(errs, validateResourceTarget(m.Resource.Target, rp.Child("target"))...)
	case autoscalingv2.ContainerResourceMetricSourceType:
		if m.ContainerResource == nil {
			return append(errs, field.Required(p.Child("containerResource"), "must populate information for the given metric source"))
		}
		rp := p.Child("containerResource")
		if m.ContainerResource.Name == "" {
			errs = append(errs, field.Required(rp.Child("name"), "must specify a resource name"))
		}
		if m.ContainerResource.Container == "" {
			errs = append(errs, field.Required(rp.Child("container"), "must specify a container"))
		}
		errs = append(errs, validateResourceTarget(m.ContainerResource.Target, rp.Child("target"))...)
	case autoscalingv2.PodsMetricSourceType:
		if m.Pods == nil {
			return append(errs, field.Required(p.Child("pods"), "must populate information for the given metric source"))
		}
		pp := p.Child("pods")
		errs = append(errs, validateMetricIdentifier(m.Pods.Metric, pp.Child("metric"))...)
		if m.Pods.Target.AverageValue == nil {
			errs = append(errs, field.Required(pp.Child("target", "averageValue"), "must specify a positive target averageValue"))
		}
		errs = append(errs, validateTarget(m.Pods.Target, pp.Child("target"))...)
	case autoscalingv2.ObjectMetricSourceType:
		if m.Object == nil {
			return append(errs, field.Required(p.Child("object"), "must populate information for the given metric source"))
		}
		op := p.Child("object")
		errs = append(errs, validateScaleTargetRef(m.Object.DescribedObject, op.Child("describedObject"))...)
		errs = append(errs, validateMetricIdentifier(m.Object.Metric, op.Child("metric"))...)
		if m.Object.Target.Value == nil && m.Object.Target.AverageValue == nil {
			errs = append(errs, field.Required(op.Child("target", "averageValue"), "must set either a target value or averageValue"))
		}
		errs = append(errs, validateTarget(m.Object.Target, op.Child("target"))...)
	case autoscalingv2.ExternalMetricSourceType:
		if m.External == nil {
			return append(errs, field.Required(p.Child("external"), "must populate information for the given metric source"))
		}
		ep := p.Child("external")
		errs = append(errs, validateMetricIdentifier(m.External.Metric, ep.Child("metric"))...)
		if m.External.Target.Value == nil && m.External.Target.AverageValue == nil {
			errs = append(errs, field.Required(ep.Child("target", "averageValue"), "must set either a target value for metric or a per-pod target"))
		}
		errs = append(errs, validateTarget(m.External.Target, ep.Child("target"))...)
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), m.Type, []string{
			string(autoscalingv2.ContainerResourceMetricSourceType), string(autoscalingv2.ExternalMetricSourceType),
			string(autoscalingv2.ObjectMetricSourceType), string(autoscalingv2.PodsMetricSourceType),
			string(autoscalingv2.ResourceMetricSourceType)}))
	}
	return errs
}

func validateResourceTarget(t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.AverageUtilization == nil && t.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("averageUtilization"), "must set either a target raw value or a target utilization"))
	}
	if t.AverageUtilization != nil && t.AverageValue != nil {
		errs = append(errs, field.Forbidden(p.Child("averageValue"), "may not set both a target raw value and a target utilization"))
	}
	return append(errs, validateTarget(t, p)...)
}

// validateTarget is kube's validateMetricTarget.
func validateTarget(t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch t.Type {
	case "":
		errs = append(errs, field.Required(p.Child("type"), "must specify a metric target type"))
	case autoscalingv2.UtilizationMetricType, autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType:
	default:
		errs = append(errs, field.Invalid(p.Child("type"), t.Type, "must be either Utilization, Value, or AverageValue"))
	}
	if t.Value != nil && t.Value.Sign() != 1 {
		errs = append(errs, field.Invalid(p.Child("value"), t.Value.String(), "must be positive"))
	}
	if t.AverageValue != nil && t.AverageValue.Sign() != 1 {
		errs = append(errs, field.Invalid(p.Child("averageValue"), t.AverageValue.String(), "must be positive"))
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		errs = append(errs, field.Invalid(p.Child("averageUtilization"), *t.AverageUtilization, "must be greater than 0"))
	}
	return errs
}

func validateMetricIdentifier(id autoscalingv2.MetricIdentifier, p *field.Path) field.ErrorList {
	if id.Name == "" {
		return field.ErrorList{field.Required(p.Child("name"), "must specify a metric name")}
	}
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(id.Name, false) {
		errs = append(errs, field.Invalid(p.Child("name"), id.Name, msg))
	}
	return errs
}

// validateScalingRules is kube's validateScalingRules: a window of at
// most an hour, a known select policy, and at least one policy, each of a
// known type with a positive value and a period of at most 30 minutes.
func validateScalingRules(r *autoscalingv2.HPAScalingRules, p *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if w := r.StabilizationWindowSeconds; w != nil {
		if *w < 0 {
			errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), *w, "must be greater than or equal to zero"))
		}
		if *w > MaxHPAStabilizationWindow {
			errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), *w,
				fmt.Sprintf("must be less than or equal to %v", MaxHPAStabilizationWindow)))
		}
	}
	if s := r.SelectPolicy; s != nil {
		switch *s {
		case autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect, autoscalingv2.DisabledPolicySelect:
		default:
			errs = append(errs, field.NotSupported(p.Child("selectPolicy"), *s, []string{
				string(autoscalingv2.DisabledPolicySelect), string(autoscalingv2.MaxChangePolicySelect), string(autoscalingv2.MinChangePolicySelect)}))
		}
	}
	pp := p.Child("policies")
	if len(r.Policies) == 0 {
		errs = append(errs, field.Required(pp, "must specify at least one Policy"))
	}
	for i, pol := range r.Policies {
		ip := pp.Index(i)
		switch pol.Type {
		case autoscalingv2.PodsScalingPolicy, autoscalingv2.PercentScalingPolicy:
		default:
			errs = append(errs, field.NotSupported(ip.Child("type"), pol.Type, []string{
				string(autoscalingv2.PercentScalingPolicy), string(autoscalingv2.PodsScalingPolicy)}))
		}
		if pol.Value <= 0 {
			errs = append(errs, field.Invalid(ip.Child("value"), pol.Value, "must be greater than zero"))
		}
		if pol.PeriodSeconds <= 0 {
			errs = append(errs, field.Invalid(ip.Child("periodSeconds"), pol.PeriodSeconds, "must be greater than zero"))
		}
		if pol.PeriodSeconds > MaxHPAScalingPolicyPeriodSecs {
			errs = append(errs, field.Invalid(ip.Child("periodSeconds"), pol.PeriodSeconds,
				fmt.Sprintf("must be less than or equal to %v", MaxHPAScalingPolicyPeriodSecs)))
		}
	}
	return errs
}

// hpaTable is kubectl's: REFERENCE is kind/name, TARGETS each metric's
// current/target (three at most), MINPODS <unset> when unset.
var hpaTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Reference", Type: "string", Description: autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["scaleTargetRef"]},
	{Name: "Targets", Type: "string", Description: autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["metrics"]},
	{Name: "MinPods", Type: "string", Description: autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["minReplicas"]},
	{Name: "MaxPods", Type: "integer", Description: autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["maxReplicas"]},
	{Name: "Replicas", Type: "integer", Description: autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()["currentReplicas"]},
	ageColumn,
}, func(hpa *autoscalingv2.HorizontalPodAutoscaler, now time.Time) []any {
	minPods := "<unset>"
	if hpa.Spec.MinReplicas != nil {
		minPods = fmt.Sprint(*hpa.Spec.MinReplicas)
	}
	ref := hpa.Spec.ScaleTargetRef.Kind + "/" + hpa.Spec.ScaleTargetRef.Name
	return []any{hpa.Name, ref, hpaTargets(hpa), minPods, int64(hpa.Spec.MaxReplicas), int64(hpa.Status.CurrentReplicas), age(hpa.CreationTimestamp, now)}
})

var hpaV1Table = &Table{Columns: hpaTable.Columns, Row: func(obj Object, now time.Time) ([]any, []metav1.TableRowCondition) {
	v2, err := HPAToV2(obj.(*autoscalingv1.HorizontalPodAutoscaler))
	if err != nil {
		v2 = &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: obj.(*autoscalingv1.HorizontalPodAutoscaler).ObjectMeta}
	}
	return hpaTable.Row(v2, now)
}}

func hpaTargets(hpa *autoscalingv2.HorizontalPodAutoscaler) string {
	if len(hpa.Spec.Metrics) == 0 {
		return "<none>"
	}
	var cells []string
	for i, m := range hpa.Spec.Metrics {
		if i == 3 {
			cells = append(cells, fmt.Sprintf("+ %d more...", len(hpa.Spec.Metrics)-3))
			break
		}
		var cur *autoscalingv2.MetricStatus
		if i < len(hpa.Status.CurrentMetrics) && hpa.Status.CurrentMetrics[i].Type == m.Type {
			cur = &hpa.Status.CurrentMetrics[i]
		}
		cells = append(cells, metricCell(m, cur))
	}
	return strings.Join(cells, ", ")
}

func metricCell(m autoscalingv2.MetricSpec, cur *autoscalingv2.MetricStatus) string {
	current := "<unknown>"
	switch {
	case m.Resource != nil && m.Resource.Target.AverageUtilization != nil:
		if cur != nil && cur.Resource != nil && cur.Resource.Current.AverageUtilization != nil {
			current = fmt.Sprintf("%d%%", *cur.Resource.Current.AverageUtilization)
		}
		return fmt.Sprintf("%s: %s/%d%%", m.Resource.Name, current, *m.Resource.Target.AverageUtilization)
	case m.Resource != nil && m.Resource.Target.AverageValue != nil:
		if cur != nil && cur.Resource != nil && cur.Resource.Current.AverageValue != nil {
			current = cur.Resource.Current.AverageValue.String()
		}
		return fmt.Sprintf("%s: %s/%s", m.Resource.Name, current, m.Resource.Target.AverageValue.String())
	case m.Pods != nil && m.Pods.Target.AverageValue != nil:
		if cur != nil && cur.Pods != nil && cur.Pods.Current.AverageValue != nil {
			current = cur.Pods.Current.AverageValue.String()
		}
		return fmt.Sprintf("%s/%s", current, m.Pods.Target.AverageValue.String())
	}
	return "<unknown>/<unknown>"
}
