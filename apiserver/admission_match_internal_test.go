package apiserver

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
)

// TestMatcherPolicyRules: a policy's rules may name resources, excluded
// rules win over rules, and a binding's matcher without rules matches
// every resource while a webhook's matches none.
func TestMatcherPolicyRules(t *testing.T) {
	s := &Server{}
	r := func(resources string, names ...string) rule {
		return rule{names: names, RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{resources}},
		}}
	}
	node := func(name string, labels map[string]string) *attributes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		return &attributes{op: opUpdate, res: api.Nodes, name: name, obj: n, old: n}
	}
	anyRes := newMatcher(nil, nil, nil, nil, nil)
	anyRes.anyResource = true
	for _, tc := range []struct {
		what string
		m    matcher
		a    *attributes
		want bool
	}{
		{"rule", newMatcher([]rule{r("nodes")}, nil, nil, nil, nil), node("a", nil), true},
		{"named rule, that name", newMatcher([]rule{r("nodes", "a", "b")}, nil, nil, nil, nil), node("b", nil), true},
		{"named rule, another name", newMatcher([]rule{r("nodes", "a")}, nil, nil, nil, nil), node("c", nil), false},
		{"excluded", newMatcher([]rule{r("*")}, []rule{r("nodes")}, nil, nil, nil), node("a", nil), false},
		{"excluded by name", newMatcher([]rule{r("*")}, []rule{r("nodes", "a")}, nil, nil, nil), node("a", nil), false},
		{"not excluded by name", newMatcher([]rule{r("*")}, []rule{r("nodes", "a")}, nil, nil, nil), node("b", nil), true},
		{"no rules: a webhook", newMatcher(nil, nil, nil, nil, nil), node("a", nil), false},
		{"no rules: a binding", anyRes, node("a", nil), true},
		{"object selector", newMatcher([]rule{r("nodes")}, nil, nil, nil, &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}), node("a", map[string]string{"x": "y"}), true},
		{"object selector, no match", newMatcher([]rule{r("nodes")}, nil, nil, nil, &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}), node("a", nil), false},
	} {
		res, err := s.matches(context.Background(), &tc.m, tc.a)
		if err != nil || (res != nil) != tc.want {
			t.Errorf("%s: got %v, %v; want match %v", tc.what, res, err, tc.want)
		}
	}
}
