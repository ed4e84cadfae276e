package scheduler

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestUsageFollowsThePodInformer: what the handlers see moves a pod's
// requests between nodes and drops them when it finishes or goes, and an
// assumption ends when the pod is seen bound, so nothing counts twice.
func TestUsageFollowsThePodInformer(t *testing.T) {
	s := &Scheduler{assumed: map[string]assumedPod{}, bound: map[string]boundPod{}, usage: map[string]*nodeUsage{}, unschedulable: map[string]time.Time{}}
	pods := func(node string) int64 {
		if u := s.usageByNodeLocked()[node]; u != nil {
			return u.pods
		}
		return 0
	}
	cpu := func(node string) int64 {
		if u := s.usageByNodeLocked()[node]; u != nil {
			return u.requested[corev1.ResourceCPU]
		}
		return 0
	}
	a := benchPod(1)
	s.observe(a) // pending: holds nothing
	if pods("node-1") != 0 {
		t.Fatalf("a pending pod counts")
	}
	s.assumed["default/web-1"] = assumedPod{pod: a, node: "node-1", take: usageOf(a)}
	if pods("node-1") != 1 || cpu("node-1") != 10 {
		t.Fatalf("assumed pod: %d pods, %dm cpu on node-1", pods("node-1"), cpu("node-1"))
	}
	bound := a.DeepCopy()
	bound.Spec.NodeName = "node-1"
	s.observe(bound)
	if _, ok := s.assumed["default/web-1"]; ok || pods("node-1") != 1 {
		t.Fatalf("bound pod: assumed %v, %d pods on node-1", ok, pods("node-1"))
	}
	moved := bound.DeepCopy()
	moved.Spec.NodeName = "node-2"
	s.observe(moved)
	if pods("node-1") != 0 || pods("node-2") != 1 || cpu("node-2") != 10 {
		t.Fatalf("moved pod: %d on node-1, %d on node-2", pods("node-1"), pods("node-2"))
	}
	done := moved.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	s.observe(done)
	if pods("node-2") != 0 || len(s.usage) != 0 {
		t.Fatalf("finished pod still counts: %d, usage %v", pods("node-2"), s.usage)
	}
	s.observe(moved)
	s.gone("default/web-1")
	if pods("node-2") != 0 || len(s.bound) != 0 {
		t.Fatalf("deleted pod still counts")
	}
}
