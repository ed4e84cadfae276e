package rbac

import (
	"context"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/auth/authorizer"
	"github.com/minictl/minictl/auth/user"
)

func rule(verbs, groups, resources []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
}

func l(s ...string) []string { return s }

// TestRuleAllows is kube's reading of a rule, piece by piece.
func TestRuleAllows(t *testing.T) {
	res := func(verb, group, resource, sub, name string) authorizer.Attributes {
		return authorizer.Attributes{Verb: verb, ResourceRequest: true, APIGroup: group, Resource: resource, Subresource: sub, Name: name, Namespace: "ns"}
	}
	path := func(verb, p string) authorizer.Attributes { return authorizer.Attributes{Verb: verb, Path: p} }
	for _, c := range []struct {
		name string
		rule rbacv1.PolicyRule
		a    authorizer.Attributes
		want bool
	}{
		{"exact", rule(l("get"), l(""), l("pods")), res("get", "", "pods", "", "p"), true},
		{"other verb", rule(l("get"), l(""), l("pods")), res("list", "", "pods", "", ""), false},
		{"verb *", rule(l("*"), l(""), l("pods")), res("deletecollection", "", "pods", "", ""), true},
		{"other group", rule(l("get"), l(""), l("deployments")), res("get", "apps", "deployments", "", ""), false},
		{"group *", rule(l("get"), l("*"), l("deployments")), res("get", "apps", "deployments", "", ""), true},
		{"resource * covers subresources", rule(l("get"), l(""), l("*")), res("get", "", "pods", "log", "p"), true},
		{"resource does not cover its subresource", rule(l("get"), l(""), l("pods")), res("get", "", "pods", "status", "p"), false},
		{"subresource", rule(l("get"), l(""), l("pods/status")), res("get", "", "pods", "status", "p"), true},
		{"subresource is not the resource", rule(l("get"), l(""), l("pods/status")), res("get", "", "pods", "", "p"), false},
		{"*/sub", rule(l("get"), l("*"), l("*/scale")), res("get", "apps", "deployments", "scale", "d"), true},
		{"*/sub other sub", rule(l("get"), l("*"), l("*/scale")), res("get", "apps", "deployments", "status", "d"), false},
		{"*/sub not the resource", rule(l("get"), l("*"), l("*/scale")), res("get", "apps", "deployments", "", "d"), false},
		{"res/* is a subresource named *", rule(l("get"), l(""), l("pods/*")), res("get", "", "pods", "log", "p"), false},
		{"named", rule(l("get"), l(""), l("configmaps"), "a"), res("get", "", "configmaps", "", "a"), true},
		{"other name", rule(l("get"), l(""), l("configmaps"), "a"), res("get", "", "configmaps", "", "b"), false},
		{"names never allow a list", rule(l("list"), l(""), l("configmaps"), "a"), res("list", "", "configmaps", "", ""), false},
		{"url", rbacv1.PolicyRule{Verbs: l("get"), NonResourceURLs: l("/healthz")}, path("get", "/healthz"), true},
		{"url other", rbacv1.PolicyRule{Verbs: l("get"), NonResourceURLs: l("/healthz")}, path("get", "/healthz/etcd"), false},
		{"url prefix *", rbacv1.PolicyRule{Verbs: l("get"), NonResourceURLs: l("/healthz/*")}, path("get", "/healthz/etcd"), true},
		{"url prefix * not the parent", rbacv1.PolicyRule{Verbs: l("get"), NonResourceURLs: l("/healthz/*")}, path("get", "/healthz"), false},
		{"url *", rbacv1.PolicyRule{Verbs: l("get"), NonResourceURLs: l("*")}, path("get", "/anything"), true},
		{"url verb", rbacv1.PolicyRule{Verbs: l("get"), NonResourceURLs: l("*")}, path("post", "/anything"), false},
		{"resource rule never allows a url", rule(l("*"), l("*"), l("*")), path("get", "/healthz"), false},
	} {
		if got := RuleAllows(c.a, &c.rule); got != c.want {
			t.Errorf("%s: RuleAllows = %v, want %v", c.name, got, c.want)
		}
	}
}

func policy() Policy {
	return Policy{
		ClusterRoles: []*rbacv1.ClusterRole{
			{ObjectMeta: metav1.ObjectMeta{Name: "reader"}, Rules: []rbacv1.PolicyRule{rule(l("get", "list"), l(""), l("pods"))}},
		},
		Roles: []*rbacv1.Role{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "writer"}, Rules: []rbacv1.PolicyRule{rule(l("create"), l(""), l("pods"))}},
		},
		ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{
			{ObjectMeta: metav1.ObjectMeta{Name: "readers"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "reader"},
				Subjects: []rbacv1.Subject{{Kind: "User", Name: "nobody"}, {Kind: "Group", Name: "readers"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "dangling"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "gone"},
				Subjects: []rbacv1.Subject{{Kind: "User", Name: "dora"}}},
		},
		RoleBindings: []*rbacv1.RoleBinding{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "writers"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "writer"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sa"}}},
		},
	}
}

// TestAuthorizeReasons: an allow names the binding, role and subject as
// kube's does; a binding to a missing role is a refusal's reason.
func TestAuthorizeReasons(t *testing.T) {
	az := New(Static(NewIndex(policy())))
	sa := &user.Info{Name: user.ServiceAccountUsername("ns", "sa"), Groups: user.ServiceAccountGroups("ns")}
	for _, c := range []struct {
		u      *user.Info
		verb   string
		ns     string
		want   authorizer.Decision
		reason string
	}{
		{&user.Info{Name: "ann", Groups: l("readers")}, "list", "", authorizer.Allow,
			`RBAC: allowed by ClusterRoleBinding "readers" of ClusterRole "reader" to Group "readers"`},
		{sa, "create", "ns", authorizer.Allow,
			`RBAC: allowed by RoleBinding "writers/ns" of Role "writer" to ServiceAccount "sa/ns"`},
		{sa, "create", "other", authorizer.NoOpinion, ""},
		{&user.Info{Name: "ann"}, "list", "ns", authorizer.NoOpinion, ""},
		{&user.Info{Name: "dora"}, "list", "ns", authorizer.NoOpinion,
			`RBAC: clusterroles.rbac.authorization.k8s.io "gone" not found`},
	} {
		d, reason, err := az.Authorize(context.Background(), authorizer.Attributes{
			User: c.u, Verb: c.verb, ResourceRequest: true, Resource: "pods", Namespace: c.ns})
		if d != c.want || reason != c.reason || err != nil {
			t.Errorf("%s %s in %q: got %v %q %v, want %v %q", c.u.Name, c.verb, c.ns, d, reason, err, c.want, c.reason)
		}
	}
	res, _, incomplete, _ := az.RulesFor(context.Background(), &user.Info{Name: "dora", Groups: l("readers")}, "ns")
	if len(res) != 1 || !incomplete {
		t.Errorf("RulesFor dora: %v incomplete %v, want the reader rule, incomplete", res, incomplete)
	}
}

// TestCovers is kube's escalation arithmetic.
func TestCovers(t *testing.T) {
	for _, c := range []struct {
		name           string
		owner, servant []rbacv1.PolicyRule
		want           bool
	}{
		{"same", []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods"))}, []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods"))}, true},
		{"more verbs", []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods"))}, []rbacv1.PolicyRule{rule(l("get", "delete"), l(""), l("pods"))}, false},
		{"split over rules", []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods")), rule(l("delete"), l(""), l("pods"))},
			[]rbacv1.PolicyRule{rule(l("get", "delete"), l(""), l("pods"))}, true},
		{"star", []rbacv1.PolicyRule{rule(l("*"), l("*"), l("*"))}, []rbacv1.PolicyRule{rule(l("get"), l("apps"), l("deployments/scale"))}, true},
		{"*/sub", []rbacv1.PolicyRule{rule(l("get"), l(""), l("*/status"))}, []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods/status"))}, true},
		{"named owner, unnamed servant", []rbacv1.PolicyRule{rule(l("get"), l(""), l("secrets"), "a")}, []rbacv1.PolicyRule{rule(l("get"), l(""), l("secrets"))}, false},
		{"unnamed owner, named servant", []rbacv1.PolicyRule{rule(l("get"), l(""), l("secrets"))}, []rbacv1.PolicyRule{rule(l("get"), l(""), l("secrets"), "a")}, true},
		{"url prefix", []rbacv1.PolicyRule{{Verbs: l("get"), NonResourceURLs: l("/logs/*")}}, []rbacv1.PolicyRule{{Verbs: l("get"), NonResourceURLs: l("/logs/a")}}, true},
		{"url other", []rbacv1.PolicyRule{{Verbs: l("get"), NonResourceURLs: l("/logs/*")}}, []rbacv1.PolicyRule{{Verbs: l("get"), NonResourceURLs: l("/metrics")}}, false},
	} {
		if got, _ := Covers(c.owner, c.servant); got != c.want {
			t.Errorf("%s: Covers = %v, want %v", c.name, got, c.want)
		}
	}
	u := &user.Info{Name: "ann", Groups: l("readers")}
	err := New(Static(NewIndex(policy()))).ConfirmNoEscalation(u, "", []rbacv1.PolicyRule{rule(l("get", "list", "delete", "update"), l(""), l("pods"))})
	want := "user \"ann\" (groups=[\"readers\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\" \"update\"]}"
	if err == nil || err.Error() != want {
		t.Errorf("ConfirmNoEscalation: %v, want %s", err, want)
	}
}

// BenchmarkRBACAuthorize: one request's authorization in a cluster of
// 1,000 bindings costs the user's own bindings, not the cluster's.
func BenchmarkRBACAuthorize(b *testing.B) {
	p := Policy{ClusterRoles: []*rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: "edit"}, Rules: []rbacv1.PolicyRule{
			rule(l("get", "list", "watch"), l(""), l("pods", "services", "configmaps")),
			rule(l("create", "update", "delete"), l(""), l("configmaps")),
		}},
	}}
	for i := range 1000 {
		ns := fmt.Sprintf("ns-%d", i%100)
		p.RoleBindings = append(p.RoleBindings, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("rb-%d", i)},
			RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: fmt.Sprintf("user-%d", i)}, {Kind: "Group", Name: fmt.Sprintf("group-%d", i)}},
		})
	}
	az := New(Static(NewIndex(p)))
	u := &user.Info{Name: "user-999", Groups: l("group-5", user.AllAuthenticated)}
	a := authorizer.Attributes{User: u, Verb: "create", ResourceRequest: true, Resource: "configmaps", Namespace: "ns-99"}
	b.ReportAllocs()
	for b.Loop() {
		if d, reason, _ := az.Authorize(context.Background(), a); d != authorizer.Allow || !strings.Contains(reason, "rb-999") {
			b.Fatalf("got %v %q", d, reason)
		}
	}
}
