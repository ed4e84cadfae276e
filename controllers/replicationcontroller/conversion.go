package replicationcontroller

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/controllers/replicaset"
)

// ReplicationControllers is the Kind that runs the ReplicaSet controller
// over ReplicationControllers, as kube's pkg/controller/replication/
// conversion.go does: a ReplicationController is a ReplicaSet whose
// selector is a plain label map and whose template is a pointer; their
// statuses have the same fields.
var ReplicationControllers = replicaset.Kind[*corev1.ReplicationController]{
	Name:             Name,
	GroupVersionKind: corev1.SchemeGroupVersion.WithKind("ReplicationController"),
	AsReplicaSet:     asReplicaSet,
	WithStatus:       withStatus,
}

// asReplicaSet is rc as a ReplicaSet. It shares rc's metadata, labels and
// template: the controller only reads it.
func asReplicaSet(rc *corev1.ReplicationController) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: rc.ObjectMeta,
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        rc.Spec.Replicas,
			MinReadySeconds: rc.Spec.MinReadySeconds,
			Selector:        &metav1.LabelSelector{MatchLabels: rc.Spec.Selector},
		},
		Status: appsv1.ReplicaSetStatus{
			Replicas:             rc.Status.Replicas,
			FullyLabeledReplicas: rc.Status.FullyLabeledReplicas,
			ReadyReplicas:        rc.Status.ReadyReplicas,
			AvailableReplicas:    rc.Status.AvailableReplicas,
			ObservedGeneration:   rc.Status.ObservedGeneration,
		},
	}
	if rc.Spec.Template != nil {
		rs.Spec.Template = *rc.Spec.Template
	}
	for _, c := range rc.Status.Conditions {
		rs.Status.Conditions = append(rs.Status.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return rs
}

// withStatus is a copy of rc with status, a ReplicaSet's, as its own.
func withStatus(rc *corev1.ReplicationController, status appsv1.ReplicaSetStatus) *corev1.ReplicationController {
	cp := rc.DeepCopy()
	cp.Status = corev1.ReplicationControllerStatus{
		Replicas:             status.Replicas,
		FullyLabeledReplicas: status.FullyLabeledReplicas,
		ReadyReplicas:        status.ReadyReplicas,
		AvailableReplicas:    status.AvailableReplicas,
		ObservedGeneration:   status.ObservedGeneration,
	}
	for _, c := range status.Conditions {
		cp.Status.Conditions = append(cp.Status.Conditions, corev1.ReplicationControllerCondition{
			Type: corev1.ReplicationControllerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return cp
}
