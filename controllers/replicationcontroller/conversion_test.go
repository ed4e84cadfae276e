package replicationcontroller

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestConversionKeepsEveryField: what the ReplicaSet controller reads of
// an RC is the RC, and the status it writes back loses nothing.
func TestConversionKeepsEveryField(t *testing.T) {
	three := int32(3)
	when := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	rc := &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, UID: "u1", Generation: 4},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: &three, MinReadySeconds: 7, Selector: map[string]string{"app": "web"},
			Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}}},
		},
	}
	rs := asReplicaSet(rc)
	if rs.Name != "web" || rs.UID != "u1" || rs.Generation != 4 || *rs.Spec.Replicas != 3 || rs.Spec.MinReadySeconds != 7 ||
		rs.Spec.Selector.MatchLabels["app"] != "web" || len(rs.Spec.Selector.MatchExpressions) != 0 ||
		rs.Spec.Template.Labels["tier"] != "front" {
		t.Errorf("as a ReplicaSet: %+v", rs)
	}

	status := appsv1.ReplicaSetStatus{
		Replicas: 3, FullyLabeledReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1, ObservedGeneration: 4,
		Conditions: []appsv1.ReplicaSetCondition{{
			Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, LastTransitionTime: when,
			Reason: "FailedCreate", Message: "pods \"web-x\" is forbidden: exceeded quota",
		}},
	}
	written := withStatus(rc, status)
	if rc.Status.Replicas != 0 {
		t.Errorf("withStatus modified its argument: %+v", rc.Status)
	}
	if written.Status.Conditions[0].Type != corev1.ReplicationControllerReplicaFailure {
		t.Errorf("condition type %q, want %q", written.Status.Conditions[0].Type, corev1.ReplicationControllerReplicaFailure)
	}
	if back := asReplicaSet(written).Status; !apiequality.Semantic.DeepEqual(back, status) {
		t.Errorf("status round trip:\n got %+v\nwant %+v", back, status)
	}
}
