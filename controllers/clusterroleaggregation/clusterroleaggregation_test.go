package clusterroleaggregation

import (
	"fmt"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

func start(t *testing.T) *client.Client[*rbacv1.ClusterRole] {
	t.Helper()
	env := controllertest.StartWith(t, controllertest.Options{})
	c, err := New(Options{Common: controller.Common{Client: env.Client, Informers: env.Informers, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 2, c)
	return client.For[*rbacv1.ClusterRole](env.Client)
}

func rule(verb, resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""}, Resources: []string{resource}}
}

// TestAggregatedRoleGathersLabelledRoles: admin-like roles are the union
// of the roles labelled for them, in name order, each rule once; a new
// label adds rules, a removed role takes its rules away, and a role
// without an aggregationRule is left as it is.
func TestAggregatedRoleGathersLabelledRoles(t *testing.T) {
	roles := start(t)
	ctx := t.Context()
	const label = "rbac.authorization.k8s.io/aggregate-to-admin"
	admin := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "admin"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{label: "true"}},
		}},
	}
	create := func(name string, labels map[string]string, rules ...rbacv1.PolicyRule) {
		t.Helper()
		if _, err := roles.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := roles.Create(ctx, admin); err != nil {
		t.Fatal(err)
	}
	create("b-widgets", map[string]string{label: "true"}, rule("get", "widgets"), rule("list", "pods"))
	create("a-pods", map[string]string{label: "true"}, rule("list", "pods"))
	create("unlabelled", nil, rule("delete", "nodes"))

	want := func(rules ...rbacv1.PolicyRule) {
		t.Helper()
		controllertest.Eventually(t, fmt.Sprintf("admin has rules %v", rules), func() (bool, string) {
			got, err := roles.Get(ctx, "", "admin")
			if err != nil {
				return false, err.Error()
			}
			return equality.Semantic.DeepEqual(got.Rules, rules), fmt.Sprintf("rules %v", got.Rules)
		})
	}
	want(rule("list", "pods"), rule("get", "widgets"))

	if err := roles.Delete(ctx, "", "a-pods", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want(rule("get", "widgets"), rule("list", "pods"))

	un, err := roles.Get(ctx, "", "unlabelled")
	if err != nil {
		t.Fatal(err)
	}
	un.Labels = map[string]string{label: "true"}
	if _, err := roles.Update(ctx, un); err != nil {
		t.Fatal(err)
	}
	want(rule("get", "widgets"), rule("list", "pods"), rule("delete", "nodes"))
	if got, _ := roles.Get(ctx, "", "b-widgets"); len(got.Rules) != 2 {
		t.Errorf("a role without an aggregationRule changed: %v", got.Rules)
	}
}

// TestBootstrapRolesAggregate: with kube's bootstrap policy, view, edit
// and admin fill from the system:aggregate-to-* roles, and an extension's
// role labelled aggregate-to-view reaches all three.
func TestBootstrapRolesAggregate(t *testing.T) {
	env := controllertest.StartWith(t, controllertest.Options{AuthorizationModes: []string{"RBAC"}})
	c, err := New(Options{Common: controller.Common{Client: env.Client, Informers: env.Informers, Logger: controllertest.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 2, c)
	roles := client.For[*rbacv1.ClusterRole](env.Client)
	ctx := t.Context()
	widgets := rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}
	if _, err := roles.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets-view", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		Rules:      []rbacv1.PolicyRule{widgets},
	}); err != nil {
		t.Fatal(err)
	}
	roleRules := map[string]string{ // a rule each gets from its own system:aggregate-to-* role
		"view":  "pods/log",
		"edit":  "pods/exec",
		"admin": "rolebindings",
	}
	for name, resource := range roleRules {
		controllertest.Eventually(t, name+" aggregated", func() (bool, string) {
			r, err := roles.Get(ctx, "", name)
			if err != nil {
				return false, err.Error()
			}
			var haveWidgets, haveOwn bool
			for _, rule := range r.Rules {
				haveWidgets = haveWidgets || equality.Semantic.DeepEqual(rule, widgets)
				for _, res := range rule.Resources {
					haveOwn = haveOwn || res == resource
				}
			}
			return haveWidgets && haveOwn, fmt.Sprintf("%d rules, widgets %v, %s %v", len(r.Rules), haveWidgets, resource, haveOwn)
		})
	}
	for _, lower := range []struct{ name, not string }{{"view", "pods/exec"}, {"edit", "rolebindings"}} {
		r, _ := roles.Get(ctx, "", lower.name)
		for _, rule := range r.Rules {
			for _, res := range rule.Resources {
				if res == lower.not {
					t.Errorf("%s holds %s", lower.name, res)
				}
			}
		}
	}
}
