package service

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWhichServicesAndNodesCount(t *testing.T) {
	class := "example.com/lb"
	svc := func(typ corev1.ServiceType, class *string, finalizers ...string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Finalizers: finalizers}, Spec: corev1.ServiceSpec{Type: typ, LoadBalancerClass: class}}
	}
	for _, tc := range []struct {
		name           string
		svc            *corev1.Service
		wants, cleanup bool
	}{
		{"load balancer", svc(corev1.ServiceTypeLoadBalancer, nil), true, false},
		{"another implementation's class", svc(corev1.ServiceTypeLoadBalancer, &class), false, false},
		{"node port", svc(corev1.ServiceTypeNodePort, nil), false, false},
		{"no longer a load balancer, finalizer left", svc(corev1.ServiceTypeClusterIP, nil, LoadBalancerCleanupFinalizer), false, true},
		{"load balancer with its finalizer", svc(corev1.ServiceTypeLoadBalancer, nil, LoadBalancerCleanupFinalizer), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := wantsLoadBalancer(tc.svc); got != tc.wants {
				t.Errorf("wantsLoadBalancer = %v, want %v", got, tc.wants)
			}
			if got := needsCleanup(tc.svc); got != tc.cleanup {
				t.Errorf("needsCleanup = %v, want %v", got, tc.cleanup)
			}
		})
	}

	node := func(labels map[string]string, taints ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
		for _, k := range taints {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule})
		}
		return n
	}
	exclude := func(v string) map[string]string { return map[string]string{corev1.LabelNodeExcludeBalancers: v} }
	for _, tc := range []struct {
		name     string
		node     *corev1.Node
		included bool
	}{
		{"plain", node(nil), true},
		{"excluded", node(exclude("true")), false},
		{"label false", node(exclude("false")), true},
		{"label not a boolean", node(exclude("yes")), false},
		{"uninitialized is still a backend", node(nil, "node.cloudprovider.kubernetes.io/uninitialized"), true},
		{"about to be removed by the autoscaler", node(nil, ToBeDeletedTaint), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nodeIncluded(tc.node) && !hasTaint(tc.node, ToBeDeletedTaint)
			if got != tc.included {
				t.Errorf("backend = %v, want %v", got, tc.included)
			}
		})
	}
}
