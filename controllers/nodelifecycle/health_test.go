package nodelifecycle

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// nodeWithReady is a node whose Ready condition has status s, last
// heartbeat hb and last transition tr.
func nodeWithReady(s corev1.ConditionStatus, hb, tr time.Time) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: s,
			LastHeartbeatTime: metav1.NewTime(hb), LastTransitionTime: metav1.NewTime(tr),
		}}},
	}
}

func leaseRenewedAt(t time.Time) *coordinationv1.Lease {
	rt := metav1.NewMicroTime(t)
	return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &rt}}
}

func TestObserve(t *testing.T) {
	// Times the kubelet writes, on its own clock: deliberately far from
	// the controller's, which alone decides probe times.
	kubelet := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	saved := &nodeHealth{
		probeTimestamp:           t0,
		readyTransitionTimestamp: t0.Add(-time.Hour),
		status:                   &nodeWithReady(corev1.ConditionTrue, kubelet, kubelet).Status,
		lease:                    leaseRenewedAt(kubelet),
		everReady:                true,
	}
	now := t0.Add(30 * time.Second)
	tests := []struct {
		name                  string
		saved                 *nodeHealth
		node                  *corev1.Node
		lease                 *coordinationv1.Lease
		wantProbe, wantTrans  time.Time
		wantEverReady         bool
		wantStatusFromNewNode bool
	}{
		{"first sight", nil, nodeWithReady(corev1.ConditionFalse, kubelet, kubelet), nil,
			now, now, false, true},
		{"first sight of a Ready node", nil, nodeWithReady(corev1.ConditionTrue, kubelet, kubelet), nil,
			now, now, true, true},
		{"nothing new", saved, nodeWithReady(corev1.ConditionTrue, kubelet, kubelet), leaseRenewedAt(kubelet),
			t0, t0.Add(-time.Hour), true, false},
		{"new heartbeat, same Ready", saved, nodeWithReady(corev1.ConditionTrue, kubelet.Add(time.Second), kubelet), leaseRenewedAt(kubelet),
			now, t0.Add(-time.Hour), true, true},
		{"new heartbeat and a Ready transition", saved, nodeWithReady(corev1.ConditionFalse, kubelet.Add(time.Second), kubelet.Add(time.Second)), leaseRenewedAt(kubelet),
			now, now, true, true},
		{"a transition without a heartbeat is not news", saved, nodeWithReady(corev1.ConditionTrue, kubelet, kubelet.Add(time.Second)), leaseRenewedAt(kubelet),
			t0, t0.Add(-time.Hour), true, false},
		{"lease renewed", saved, nodeWithReady(corev1.ConditionTrue, kubelet, kubelet), leaseRenewedAt(kubelet.Add(time.Millisecond)),
			now, t0.Add(-time.Hour), true, false},
		{"lease older than the one seen", saved, nodeWithReady(corev1.ConditionTrue, kubelet, kubelet), leaseRenewedAt(kubelet.Add(-time.Second)),
			t0, t0.Add(-time.Hour), true, false},
		{"Ready condition vanished", saved, &corev1.Node{}, leaseRenewedAt(kubelet),
			now, now, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before nodeHealth
			if tt.saved != nil {
				before = *tt.saved
			}
			h := observe(tt.saved, tt.node, tt.lease, now)
			if !h.probeTimestamp.Equal(tt.wantProbe) || !h.readyTransitionTimestamp.Equal(tt.wantTrans) {
				t.Errorf("probe %v transition %v, want %v %v", h.probeTimestamp, h.readyTransitionTimestamp, tt.wantProbe, tt.wantTrans)
			}
			if h.everReady != tt.wantEverReady {
				t.Errorf("everReady = %v", h.everReady)
			}
			fromNew := readyStatus(h.status) == readyStatus(&tt.node.Status) &&
				len(h.status.Conditions) == len(tt.node.Status.Conditions) &&
				(len(h.status.Conditions) == 0 || h.status.Conditions[0].LastTransitionTime.Equal(&tt.node.Status.Conditions[0].LastTransitionTime))
			if tt.wantStatusFromNewNode && !fromNew {
				t.Errorf("status not taken from the node: %+v", h.status)
			}
			if tt.saved != nil && *tt.saved != before {
				t.Error("the saved record was changed")
			}
		})
	}
}

func TestMarkUnknown(t *testing.T) {
	created := metav1.NewTime(t0.Add(-time.Hour))
	now := metav1.NewTime(t0)
	node := nodeWithReady(corev1.ConditionTrue, t0.Add(-time.Minute), t0.Add(-time.Minute))
	node.CreationTimestamp = created
	node.Status.Conditions = append(node.Status.Conditions,
		corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
		corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse})

	if !markUnknown(node, now) {
		t.Fatal("nothing changed")
	}
	want := map[corev1.NodeConditionType]string{
		corev1.NodeReady:          "NodeStatusUnknown",
		corev1.NodeMemoryPressure: "NodeStatusUnknown",
		corev1.NodeDiskPressure:   "NodeStatusNeverUpdated",
		corev1.NodePIDPressure:    "NodeStatusNeverUpdated",
	}
	for typ, reason := range want {
		c := condition(&node.Status, typ)
		if c == nil || c.Status != corev1.ConditionUnknown || c.Reason != reason || !c.LastTransitionTime.Equal(&now) {
			t.Errorf("%s = %+v, want Unknown with reason %s at %v", typ, c, reason, now)
		}
	}
	if c := condition(&node.Status, corev1.NodeReady); c.Message != "Kubelet stopped posting node status." ||
		!c.LastHeartbeatTime.Equal(&metav1.Time{Time: t0.Add(-time.Minute)}) {
		t.Errorf("Ready = %+v: message, or a heartbeat that moved", c)
	}
	if c := condition(&node.Status, corev1.NodeDiskPressure); !c.LastHeartbeatTime.Equal(&created) {
		t.Errorf("a never-posted condition's heartbeat = %v, want the creation time", c.LastHeartbeatTime)
	}
	if c := condition(&node.Status, corev1.NodeNetworkUnavailable); c.Status != corev1.ConditionFalse {
		t.Errorf("NetworkUnavailable changed: %+v", c)
	}
	if markUnknown(node, metav1.NewTime(t0.Add(time.Minute))) {
		t.Error("a node already Unknown changed again")
	}
}
