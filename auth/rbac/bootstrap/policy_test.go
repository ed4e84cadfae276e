package bootstrap

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/auth/rbac"
	"github.com/minictl/minictl/auth/user"
)

// TestPolicyIsValid: every bootstrap object passes the API server's own
// validation, and every binding names a role of the policy, so the
// server can create them all at start.
func TestPolicyIsValid(t *testing.T) {
	clusterRoles := map[string]bool{}
	for _, r := range ClusterRoles() {
		if clusterRoles[r.Name] {
			t.Errorf("ClusterRole %s twice", r.Name)
		}
		clusterRoles[r.Name] = true
		if errs := api.ClusterRoles.Validate(r); len(errs) > 0 {
			t.Errorf("ClusterRole %s: %v", r.Name, errs)
		}
		if r.Annotations[AutoUpdateAnnotation] != "true" || r.Labels[BootstrappingLabel] != "rbac-defaults" {
			t.Errorf("ClusterRole %s: labels %v annotations %v", r.Name, r.Labels, r.Annotations)
		}
	}
	for _, b := range ClusterRoleBindings() {
		if errs := api.ClusterRoleBindings.Validate(b); len(errs) > 0 {
			t.Errorf("ClusterRoleBinding %s: %v", b.Name, errs)
		}
		if !clusterRoles[b.RoleRef.Name] {
			t.Errorf("ClusterRoleBinding %s refers to ClusterRole %s, which the policy lacks", b.Name, b.RoleRef.Name)
		}
	}
	roles := map[string]bool{}
	for _, r := range Roles() {
		roles[r.Namespace+"/"+r.Name] = true
		if errs := api.Roles.Validate(r); len(errs) > 0 {
			t.Errorf("Role %s/%s: %v", r.Namespace, r.Name, errs)
		}
	}
	for _, b := range RoleBindings() {
		if errs := api.RoleBindings.Validate(b); len(errs) > 0 {
			t.Errorf("RoleBinding %s/%s: %v", b.Namespace, b.Name, errs)
		}
		if !roles[b.Namespace+"/"+b.RoleRef.Name] {
			t.Errorf("RoleBinding %s/%s refers to a Role the policy lacks", b.Namespace, b.Name)
		}
	}
	for _, sa := range ControllerServiceAccounts() {
		if !clusterRoles[ControllerRolePrefix+sa] {
			t.Errorf("controller %s has no ClusterRole", sa)
		}
	}
}

// TestEditReadsWhatViewLeavesOut: edit (and admin, which aggregates it)
// reads the Secrets and the ways into a pod that view leaves out, as
// kube's system:aggregate-to-edit does; view does not.
func TestEditReadsWhatViewLeavesOut(t *testing.T) {
	byName := map[string][]rbacv1.PolicyRule{}
	for _, r := range ClusterRoles() {
		byName[r.Name] = r.Rules
	}
	escalating := []rbacv1.PolicyRule{{
		Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""},
		Resources: []string{"secrets", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "services/proxy"},
	}}
	if ok, missing := rbac.Covers(byName["system:aggregate-to-edit"], escalating); !ok {
		t.Errorf("system:aggregate-to-edit lacks %v", missing)
	}
	for _, r := range escalating[0].Resources {
		read := []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{r}}}
		if ok, _ := rbac.Covers(byName["system:aggregate-to-view"], read); ok {
			t.Errorf("system:aggregate-to-view reads %s", r)
		}
	}
}

// TestSchedulerMayBindVolumes: what the scheduler's user is bound to
// covers what its volume binding does: read claims, volumes and classes,
// claim a volume, annotate a claim and take the annotation off again.
func TestSchedulerMayBindVolumes(t *testing.T) {
	roles := map[string][]rbacv1.PolicyRule{}
	for _, r := range ClusterRoles() {
		roles[r.Name] = r.Rules
	}
	var rules []rbacv1.PolicyRule
	for _, b := range ClusterRoleBindings() {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.UserKind && s.Name == user.KubeScheduler {
				rules = append(rules, roles[b.RoleRef.Name]...)
			}
		}
	}
	want := []rbacv1.PolicyRule{
		{Verbs: []string{"get", "list", "watch", "update", "patch"}, APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims", "persistentvolumes"}},
		{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}},
	}
	if ok, missing := rbac.Covers(rules, want); !ok {
		t.Errorf("the scheduler may not %v", missing)
	}
}
