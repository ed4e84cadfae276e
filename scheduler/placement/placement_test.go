package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestToleratesTaint(t *testing.T) {
	taint := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name string
		tol  corev1.Toleration
		want bool
	}{
		{"same key, value and effect", corev1.Toleration{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}, true},
		{"Equal spelled out", corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db"}, true},
		{"another value", corev1.Toleration{Key: "dedicated", Value: "web"}, false},
		{"Exists ignores the value", corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}, true},
		{"Exists with no key tolerates every key", corev1.Toleration{Operator: corev1.TolerationOpExists}, true},
		{"another effect", corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}, false},
		{"another key", corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists}, false},
		{"an unsupported operator", corev1.Toleration{Key: "dedicated", Operator: "Gt", Value: "db"}, false},
	} {
		if got := ToleratesTaint(tc.tol, taint); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if TolerationsTolerateTaint(nil, taint) {
		t.Error("no tolerations tolerate a taint")
	}
}

func TestMatchesNodeSelector(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2", Labels: map[string]string{"zone": "a", "size": "8"}}}
	required := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	expr := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	named := func(names ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: names}}}
	}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want bool
	}{
		{"nothing asked", corev1.PodSpec{}, true},
		{"a nodeSelector it has", corev1.PodSpec{NodeSelector: map[string]string{"zone": "a"}}, true},
		{"a nodeSelector it lacks", corev1.PodSpec{NodeSelector: map[string]string{"zone": "b"}}, false},
		{"an expression that holds", corev1.PodSpec{Affinity: required(expr("zone", corev1.NodeSelectorOpIn, "a", "b"))}, true},
		{"Gt", corev1.PodSpec{Affinity: required(expr("size", corev1.NodeSelectorOpGt, "4"))}, true},
		{"one term of two", corev1.PodSpec{Affinity: required(expr("zone", corev1.NodeSelectorOpIn, "b"), named("node-2"))}, true},
		{"its name", corev1.PodSpec{Affinity: required(named("node-2"))}, true},
		{"another name", corev1.PodSpec{Affinity: required(named("node-1"))}, false},
		{"an empty term", corev1.PodSpec{Affinity: required(corev1.NodeSelectorTerm{})}, false},
		{"an unknown operator", corev1.PodSpec{Affinity: required(expr("zone", "Near", "a"))}, false},
		{"the selector and the affinity both", corev1.PodSpec{NodeSelector: map[string]string{"zone": "b"}, Affinity: required(named("node-2"))}, false},
	} {
		if got := MatchesNodeSelector(&tc.spec, node); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
