package api

import (
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRBACDefaults: a binding's roleRef and its User and Group subjects
// default to the RBAC group; a ServiceAccount's stays the core group.
func TestRBACDefaults(t *testing.T) {
	rb := &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "r"}, Subjects: []rbacv1.Subject{
		{Kind: "User", Name: "u"}, {Kind: "Group", Name: "g"}, {Kind: "ServiceAccount", Name: "sa"},
	}}
	RoleBindings.Default(rb)
	if rb.RoleRef.APIGroup != rbacv1.GroupName || rb.Subjects[0].APIGroup != rbacv1.GroupName ||
		rb.Subjects[1].APIGroup != rbacv1.GroupName || rb.Subjects[2].APIGroup != "" {
		t.Errorf("defaulted to %+v", rb)
	}
}

// TestRBACValidation: kube's rules and messages for roles and bindings.
func TestRBACValidation(t *testing.T) {
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}
	for _, c := range []struct {
		name string
		res  *Resource
		obj  Object
		want string // "" for valid
	}{
		{"role", Roles, &rbacv1.Role{Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}, ""},
		{"no verbs", Roles, &rbacv1.Role{Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}}}},
			"rules[0].verbs: Required value: verbs must contain at least one value"},
		{"no groups", ClusterRoles, &rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}}}},
			"rules[0].apiGroups: Required value: resource rules must supply at least one api group"},
		{"no resources", ClusterRoles, &rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}}}},
			"rules[0].resources: Required value: resource rules must supply at least one resource"},
		{"urls in a Role", Roles, &rbacv1.Role{Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}},
			"namespaced rules cannot apply to non-resource URLs"},
		{"urls in a ClusterRole", ClusterRoles, &rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}}, ""},
		{"urls and resources", ClusterRoles, &rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}, NonResourceURLs: []string{"/healthz"}}}},
			"rules cannot apply to both regular resources and non-resource URLs"},
		{"empty aggregationRule", ClusterRoles, &rbacv1.ClusterRole{AggregationRule: &rbacv1.AggregationRule{}},
			"aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"},
		{"binding", RoleBindings, &rbacv1.RoleBinding{RoleRef: ref, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sa"}}}, ""},
		{"ClusterRoleBinding to a Role", ClusterRoleBindings, &rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"}},
			`roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"`},
		{"other roleRef group", RoleBindings, &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: "example.com", Kind: "Role", Name: "r"}},
			`roleRef.apiGroup: Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io"`},
		{"no roleRef name", RoleBindings, &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role"}},
			"roleRef.name: Required value"},
		{"ServiceAccount without namespace in a ClusterRoleBinding", ClusterRoleBindings,
			&rbacv1.ClusterRoleBinding{RoleRef: ref, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sa"}}},
			"subjects[0].namespace: Required value"},
		{"ServiceAccount of the RBAC group", RoleBindings,
			&rbacv1.RoleBinding{RoleRef: ref, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sa", APIGroup: rbacv1.GroupName}}},
			`subjects[0].apiGroup: Unsupported value: "rbac.authorization.k8s.io": supported values: ""`},
		{"User of the core group", RoleBindings,
			&rbacv1.RoleBinding{RoleRef: ref, Subjects: []rbacv1.Subject{{Kind: "User", Name: "u"}}},
			`subjects[0].apiGroup: Unsupported value: "": supported values: "rbac.authorization.k8s.io"`},
		{"unknown subject kind", RoleBindings,
			&rbacv1.RoleBinding{RoleRef: ref, Subjects: []rbacv1.Subject{{Kind: "Robot", Name: "r"}}},
			`subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"`},
	} {
		errs := c.res.Validate(c.obj)
		switch {
		case c.want == "" && len(errs) > 0:
			t.Errorf("%s: %v", c.name, errs)
		case c.want != "" && !strings.Contains(errs.ToAggregate().Error(), c.want):
			t.Errorf("%s: got %v, want %q", c.name, errs, c.want)
		}
	}

	old := &rbacv1.RoleBinding{RoleRef: ref}
	moved := &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"}}
	if errs := RoleBindings.ValidateUpdate(moved, old); len(errs) != 1 || !strings.Contains(errs[0].Error(), "roleRef: Invalid value") || errs[0].Detail != "cannot change roleRef" {
		t.Errorf("roleRef change: %v", errs)
	}
	if errs := RoleBindings.ValidateUpdate(old.DeepCopy(), old); len(errs) != 0 {
		t.Errorf("unchanged roleRef: %v", errs)
	}
	if msgs := RoleBindings.ValidateName("system:controller:x", false); len(msgs) != 0 {
		t.Errorf("RBAC names may hold colons: %v", msgs)
	}
	if msgs := ClusterRoles.ValidateName("a/b", false); len(msgs) == 0 {
		t.Error("an RBAC name with a slash was accepted")
	}
}

// TestBindingTable: `kubectl get rolebindings -o wide` columns.
func TestBindingTable(t *testing.T) {
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "devs", CreationTimestamp: metav1.NewTime(time.Unix(0, 0))},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "ann"}, {Kind: "User", Name: "bob"}, {Kind: "Group", Name: "devs"},
			{Kind: "ServiceAccount", Name: "ci", Namespace: "tools"}}}
	var names []string
	for _, c := range RoleBindings.TableColumns() {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "Name,Role,Age,Users,Groups,ServiceAccounts" {
		t.Errorf("columns %s", got)
	}
	row := RoleBindings.TableRow(rb, time.Unix(0, 0).Add(3*time.Hour))
	want := []any{"devs", "ClusterRole/edit", "3h", "ann, bob", "devs", "tools/ci"}
	for i := range want {
		if row.Cells[i] != want[i] {
			t.Errorf("cell %s = %v, want %v", names[i], row.Cells[i], want[i])
		}
	}
}
