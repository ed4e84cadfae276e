package compat

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

// client-go's typed Apply with applyconfigurations, as controllers use it:
// it creates, conflicts with another manager's field, forces, and
// ExtractDeployment reads back exactly what the manager applied.
func TestClientGoApply(t *testing.T) {
	ctx := context.Background()
	cs := clientset(t)
	const ns = "compat-ssa"
	createNamespace(t, cs, ns)
	deploys := cs.AppsV1().Deployments(ns)

	labels := map[string]string{"app": "api"}
	want := appsv1ac.Deployment("api", ns).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(2).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
					WithName("api").WithImage("nginx:1.27").
					WithPorts(
						corev1ac.ContainerPort().WithContainerPort(53).WithProtocol("TCP"),
						corev1ac.ContainerPort().WithContainerPort(53).WithProtocol("UDP"),
					)))))
	d, err := deploys.Apply(ctx, want, metav1.ApplyOptions{FieldManager: "api-operator"})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if *d.Spec.Replicas != 2 || len(d.Spec.Template.Spec.Containers[0].Ports) != 2 {
		t.Fatalf("applied %+v", d.Spec)
	}

	if _, err := deploys.Patch(ctx, "api", "application/merge-patch+json", []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{FieldManager: "autoscaler"}); err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	_, err = deploys.Apply(ctx, want, metav1.ApplyOptions{FieldManager: "api-operator"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "autoscaler" using apps/v1: .spec.replicas`) {
		t.Fatalf("apply over the autoscaler's replicas: %v, want a conflict naming it", err)
	}
	d, err = deploys.Apply(ctx, want, metav1.ApplyOptions{FieldManager: "api-operator", Force: true})
	if err != nil || *d.Spec.Replicas != 2 {
		t.Fatalf("forced apply: %v", err)
	}

	extracted, err := appsv1ac.ExtractDeployment(d, "api-operator")
	if err != nil {
		t.Fatalf("extract: %v", err)
	}
	if extracted.Spec == nil || extracted.Spec.Replicas == nil || *extracted.Spec.Replicas != 2 ||
		len(extracted.Spec.Template.Spec.Containers) != 1 || len(extracted.Spec.Template.Spec.Containers[0].Ports) != 2 {
		t.Errorf("extracted %+v", extracted.Spec)
	}
}
