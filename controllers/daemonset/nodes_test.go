package daemonset

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestNodeShouldRunDaemonPod(t *testing.T) {
	taint := func(key string, effect corev1.TaintEffect) corev1.Taint {
		return corev1.Taint{Key: key, Effect: effect}
	}
	tests := []struct {
		name                 string
		node                 *corev1.Node
		change               func(*appsv1.DaemonSet)
		run, continueRunning bool
	}{
		{"plain node", newNode("n", nil), nil, true, true},
		{"node selector matches", newNode("n", map[string]string{"disk": "ssd"}),
			func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"} }, true, true},
		{"node selector does not match", newNode("n", nil),
			func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"} }, false, false},
		{"another node's name", newNode("n", nil),
			func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "m" }, false, false},
		{"required affinity by field", newNode("n", nil), func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Affinity = nodeAffinityFor(nil, "m")
		}, false, false},
		{"required affinity by label", newNode("n", map[string]string{"zone": "a"}), func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}},
				}}}}}
		}, true, true},
		{"untolerated NoSchedule", newNode("n", nil, taint("gpu", corev1.TaintEffectNoSchedule)), nil, false, true},
		{"untolerated NoExecute", newNode("n", nil, taint("gpu", corev1.TaintEffectNoExecute)), nil, false, false},
		{"PreferNoSchedule does not count", newNode("n", nil, taint("gpu", corev1.TaintEffectPreferNoSchedule)), nil, true, true},
		{"tolerated", newNode("n", nil, corev1.Taint{Key: "gpu", Value: "yes", Effect: corev1.TaintEffectNoExecute}), func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "yes"}}
		}, true, true},
		{"not ready: default toleration", newNode("n", nil, taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)), nil, true, true},
		{"unreachable: default toleration", newNode("n", nil, taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)), nil, true, true},
		{"cordoned: default toleration", newNode("n", nil, taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)), nil, true, true},
		{"memory pressure: default toleration", newNode("n", nil, taint(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule)), nil, true, true},
		{"network unavailable", newNode("n", nil, taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)), nil, false, true},
		{"network unavailable, host network", newNode("n", nil, taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)),
			func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true }, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("agent")
			if tt.change != nil {
				tt.change(ds)
			}
			run, cont := nodeShouldRunDaemonPod(tt.node, ds)
			if run != tt.run || cont != tt.continueRunning {
				t.Errorf("shouldRun %v, shouldContinueRunning %v; want %v, %v", run, cont, tt.run, tt.continueRunning)
			}
		})
	}
}

func TestRevisionDataReplacesTheTemplate(t *testing.T) {
	ds := newDS("agent")
	data, err := revisionData(ds)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"agent"}},"spec":{"containers":[{"image":"agent:1","name":"agent","resources":{}}]}}}}`
	if string(data) != want {
		t.Errorf("data\n%s, want\n%s", data, want)
	}
}
