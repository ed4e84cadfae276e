package apiserver_test

import (
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/auth/user"
	"github.com/minictl/minictl/internal/testenv"
)

// testUsers are the users the test's tokens prove: token "alice" is alice.
var testUsers = map[string]*user.Info{
	"alice": {Name: "alice", Groups: []string{user.AllAuthenticated}},
	"bob":   {Name: "bob", Groups: []string{"team-a-devs", user.AllAuthenticated}},
	"robot": {Name: user.ServiceAccountUsername("team-b", "robot"), Groups: user.ServiceAccountGroups("team-b")},
	"carol": {Name: "carol", Groups: []string{user.AllAuthenticated}},

	"scheduler":  {Name: user.KubeScheduler, Groups: []string{user.AllAuthenticated}},
	"manager":    {Name: user.KubeControllerManager, Groups: []string{user.AllAuthenticated}},
	"replicaset": {Name: user.ServiceAccountUsername("kube-system", "replicaset-controller"), Groups: user.ServiceAccountGroups("kube-system")},
	"gc":         {Name: user.ServiceAccountUsername("kube-system", "generic-garbage-collector"), Groups: user.ServiceAccountGroups("kube-system")},
}

// startRBACEnv starts a secureEnv authorizing with RBAC alone, whose
// users are testUsers and anonymous.
func startRBACEnv(t *testing.T) *secureEnv {
	t.Helper()
	return startSecureEnv(t, secureOptions{
		server: apiserver.Config{AnonymousAuth: true, AuthorizationModes: []string{"RBAC"}},
		tokens: usersByToken(testUsers),
	})
}

const rbacPath = "/apis/rbac.authorization.k8s.io/v1"

func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func role(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func roleBinding(ns, name, kind, roleName string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{Kind: kind, Name: roleName}, Subjects: subjects}
}

func clusterRoleBinding(name, roleName string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: roleName}, Subjects: subjects}
}

func rbacRule(verbs, groups, resources []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
}

func userSubject(name string) rbacv1.Subject  { return rbacv1.Subject{Kind: "User", Name: name} }
func groupSubject(name string) rbacv1.Subject { return rbacv1.Subject{Kind: "Group", Name: name} }

func list(s ...string) []string { return s }

// TestRBACAuthorizationMatrix: on the secure port, users, groups and
// ServiceAccounts may do what their bindings grant and nothing else, at
// the cluster scope and in namespaces, on subresources, named objects and
// non-resource paths; a refusal is kube's 403.
func TestRBACAuthorizationMatrix(t *testing.T) {
	e := startRBACEnv(t)
	for _, ns := range []string{"team-a", "team-b"} {
		createNamespace(t, e.Env, ns)
	}
	create[corev1.ConfigMap](t, e.Env, cmPath("team-a", ""), configMap("allowed", nil, nil))
	create[corev1.ConfigMap](t, e.Env, cmPath("team-a", ""), configMap("other", nil, nil))
	create[corev1.Pod](t, e.Env, podPath("team-b", ""), pod("p", "", nil))
	create[corev1.Pod](t, e.Env, podPath("team-a", ""), pod("p", "", nil))

	create[rbacv1.ClusterRole](t, e.Env, rbacPath+"/clusterroles", clusterRole("pod-reader", rbacRule(list("get", "list", "watch"), list(""), list("pods"))))
	create[rbacv1.ClusterRole](t, e.Env, rbacPath+"/clusterroles", clusterRole("metrics-reader",
		rbacv1.PolicyRule{Verbs: list("get"), NonResourceURLs: list("/metrics", "/logs/*")}))
	create[rbacv1.ClusterRole](t, e.Env, rbacPath+"/clusterroles", clusterRole("status-reader", rbacRule(list("get"), list("*"), list("*/status"))))
	create[rbacv1.ClusterRole](t, e.Env, rbacPath+"/clusterroles", clusterRole("one-configmap", rbacRule(list("get", "update"), list(""), list("configmaps"), "allowed")))
	create[rbacv1.Role](t, e.Env, rbacPath+"/namespaces/team-a/roles", role("team-a", "deployer", rbacRule(list("*"), list("apps"), list("deployments"))))
	create[rbacv1.ClusterRoleBinding](t, e.Env, rbacPath+"/clusterrolebindings", clusterRoleBinding("alice-pods", "pod-reader", userSubject("alice")))
	create[rbacv1.ClusterRoleBinding](t, e.Env, rbacPath+"/clusterrolebindings", clusterRoleBinding("alice-metrics", "metrics-reader", userSubject("alice")))
	create[rbacv1.RoleBinding](t, e.Env, rbacPath+"/namespaces/team-a/rolebindings", roleBinding("team-a", "devs", "Role", "deployer", groupSubject("team-a-devs")))
	create[rbacv1.RoleBinding](t, e.Env, rbacPath+"/namespaces/team-a/rolebindings", roleBinding("team-a", "bob-cm", "ClusterRole", "one-configmap", userSubject("bob")))
	create[rbacv1.RoleBinding](t, e.Env, rbacPath+"/namespaces/team-b/rolebindings", roleBinding("team-b", "robot-status", "ClusterRole", "status-reader",
		rbacv1.Subject{Kind: "ServiceAccount", Name: "robot"}))
	// The authorizer reads the watch caches, which see a write a moment
	// after it is answered.
	eventually(t, "the last binding in force", func() (bool, string) {
		r := e.as(t, "robot", "GET", "/api/v1/namespaces/team-b/pods/p/status", nil)
		return r.code == http.StatusOK, truncate(r.body)
	})

	deployment := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx"}}}}}}
	for _, c := range []struct {
		token, method, path string
		body                any
		code                int
		message             string // of a 403
	}{
		// alice reads pods everywhere, through a ClusterRoleBinding
		{"alice", "GET", "/api/v1/namespaces/team-a/pods", nil, 200, ""},
		{"alice", "GET", "/api/v1/pods", nil, 200, ""},
		{"alice", "GET", "/api/v1/namespaces/team-b/pods/p", nil, 200, ""},
		{"alice", "DELETE", "/api/v1/namespaces/team-a/pods/p", nil, 403,
			`pods "p" is forbidden: User "alice" cannot delete resource "pods" in API group "" in the namespace "team-a"`},
		// "pods" does not cover the pods/status subresource
		{"alice", "GET", "/api/v1/namespaces/team-a/pods/p/status", nil, 403,
			`pods "p" is forbidden: User "alice" cannot get resource "pods/status" in API group "" in the namespace "team-a"`},
		{"alice", "GET", "/api/v1/namespaces/team-a/configmaps", nil, 403,
			`configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" in the namespace "team-a"`},
		// non-resource URLs, exactly and by a trailing *
		{"alice", "GET", "/metrics", nil, 200, ""},
		{"alice", "GET", "/logs/kube-apiserver.log", nil, 404, ""},
		{"alice", "GET", "/logz", nil, 403, `forbidden: User "alice" cannot get path "/logz"`},
		{"bob", "GET", "/metrics", nil, 403, `forbidden: User "bob" cannot get path "/metrics"`},
		// every authenticated user has system:discovery and system:basic-user
		{"bob", "GET", "/apis", nil, 200, ""},
		{"bob", "GET", "/version", nil, 200, ""},
		// bob's group edits deployments in team-a only, through a Role
		{"bob", "GET", "/apis/apps/v1/namespaces/team-a/deployments", nil, 200, ""},
		{"bob", "POST", "/apis/apps/v1/namespaces/team-a/deployments", deployment, 201, ""},
		{"bob", "GET", "/apis/apps/v1/namespaces/team-b/deployments", nil, 403,
			`deployments.apps is forbidden: User "bob" cannot list resource "deployments" in API group "apps" in the namespace "team-b"`},
		{"bob", "GET", "/apis/apps/v1/deployments", nil, 403,
			`deployments.apps is forbidden: User "bob" cannot list resource "deployments" in API group "apps" at the cluster scope`},
		{"bob", "GET", "/api/v1/namespaces/team-a/pods", nil, 403,
			`pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "team-a"`},
		// bob reads one ConfigMap by name, through a RoleBinding to a ClusterRole
		{"bob", "GET", "/api/v1/namespaces/team-a/configmaps/allowed", nil, 200, ""},
		{"bob", "GET", "/api/v1/namespaces/team-a/configmaps/other", nil, 403,
			`configmaps "other" is forbidden: User "bob" cannot get resource "configmaps" in API group "" in the namespace "team-a"`},
		{"bob", "GET", "/api/v1/namespaces/team-a/configmaps", nil, 403,
			`configmaps is forbidden: User "bob" cannot list resource "configmaps" in API group "" in the namespace "team-a"`},
		{"bob", "GET", "/api/v1/namespaces/team-b/configmaps/allowed", nil, 403,
			`configmaps "allowed" is forbidden: User "bob" cannot get resource "configmaps" in API group "" in the namespace "team-b"`},
		// the ServiceAccount reads every */status in its own namespace only
		{"robot", "GET", "/api/v1/namespaces/team-b/pods/p/status", nil, 200, ""},
		{"robot", "GET", "/api/v1/namespaces/team-b/pods/p", nil, 403,
			`pods "p" is forbidden: User "system:serviceaccount:team-b:robot" cannot get resource "pods" in API group "" in the namespace "team-b"`},
		{"robot", "GET", "/api/v1/namespaces/team-a/pods/p/status", nil, 403,
			`pods "p" is forbidden: User "system:serviceaccount:team-b:robot" cannot get resource "pods/status" in API group "" in the namespace "team-a"`},
		// carol has no bindings of her own
		{"carol", "GET", "/api/v1/namespaces/team-a/pods", nil, 403,
			`pods is forbidden: User "carol" cannot list resource "pods" in API group "" in the namespace "team-a"`},
		{"carol", "GET", "/api/v1/namespaces", nil, 403,
			`namespaces is forbidden: User "carol" cannot list resource "namespaces" in API group "" at the cluster scope`},
		// anonymous requests see public information, not discovery
		{"", "GET", "/healthz", nil, 200, ""},
		{"", "GET", "/version", nil, 200, ""},
		{"", "GET", "/api", nil, 403, `forbidden: User "system:anonymous" cannot get path "/api"`},
		{"", "GET", "/api/v1/namespaces/team-a/pods", nil, 403,
			`pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "team-a"`},
		{"forged", "GET", "/healthz", nil, 401, ""},
	} {
		r := e.as(t, c.token, c.method, c.path, c.body)
		if r.code != c.code {
			t.Errorf("%s %s %s: got %d, want %d; body: %s", c.token, c.method, c.path, r.code, c.code, truncate(r.body))
			continue
		}
		if c.code == http.StatusForbidden {
			st := r.status(t)
			if st.Reason != metav1.StatusReasonForbidden || st.Message != c.message {
				t.Errorf("%s %s %s: got Status %q %q, want Forbidden %q", c.token, c.method, c.path, st.Reason, st.Message, c.message)
			}
		}
	}

	// Deleting a binding takes its permissions away.
	do(t, e.Env, "DELETE", rbacPath+"/clusterrolebindings/alice-pods", "", nil).want(t, 200)
	eventually(t, "alice's pods access revoked", func() (bool, string) {
		r := e.as(t, "alice", "GET", "/api/v1/namespaces/team-a/pods", nil)
		return r.code == http.StatusForbidden, truncate(r.body)
	})
	e.as(t, "alice", "GET", "/metrics", nil).want(t, 200)
}

// TestRBACEscalationPrevention: a user who may write roles and bindings
// grants only what they hold, unless they may escalate the role or bind
// the role the binding names.
func TestRBACEscalationPrevention(t *testing.T) {
	e := startRBACEnv(t)
	createNamespace(t, e.Env, "team-a")
	create[rbacv1.ClusterRole](t, e.Env, rbacPath+"/clusterroles", clusterRole("rbac-writer",
		rbacRule(list("create", "update", "patch", "get"), list("rbac.authorization.k8s.io"), list("roles", "rolebindings"))))
	create[rbacv1.Role](t, e.Env, rbacPath+"/namespaces/team-a/roles", role("team-a", "deployer", rbacRule(list("*"), list("apps"), list("deployments"))))
	create[rbacv1.RoleBinding](t, e.Env, rbacPath+"/namespaces/team-a/rolebindings", roleBinding("team-a", "devs", "Role", "deployer", groupSubject("team-a-devs")))
	create[rbacv1.RoleBinding](t, e.Env, rbacPath+"/namespaces/team-a/rolebindings", roleBinding("team-a", "bob-rbac", "ClusterRole", "rbac-writer", userSubject("bob")))
	rolesPath := rbacPath + "/namespaces/team-a/roles"
	bindingsPath := rbacPath + "/namespaces/team-a/rolebindings"
	eventually(t, "bob's bindings in force", func() (bool, string) {
		r := e.as(t, "bob", "GET", rolesPath+"/deployer", nil)
		return r.code == http.StatusOK, truncate(r.body)
	})

	// What bob holds he may grant, in a Role and by binding.
	e.as(t, "bob", "POST", rolesPath, role("team-a", "deploy-reader", rbacRule(list("get", "list"), list("apps"), list("deployments")))).want(t, 201)
	e.as(t, "bob", "POST", bindingsPath, roleBinding("team-a", "carol-deploys", "Role", "deployer", userSubject("carol"))).want(t, 201)

	// What he does not hold he may not.
	st := e.as(t, "bob", "POST", rolesPath, role("team-a", "pod-killer", rbacRule(list("delete", "get"), list(""), list("pods")))).wantStatus(t, 403, metav1.StatusReasonForbidden)
	want := `roles.rbac.authorization.k8s.io "pod-killer" is forbidden: user "bob" (groups=["team-a-devs" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:` +
		"\n" + `{APIGroups:[""], Resources:["pods"], Verbs:["delete" "get"]}`
	if st.Message != want {
		t.Errorf("escalating Role refused with\n%s\nwant\n%s", st.Message, want)
	}
	st = e.as(t, "bob", "POST", bindingsPath, roleBinding("team-a", "bob-admin", "ClusterRole", "cluster-admin", userSubject("bob"))).wantStatus(t, 403, metav1.StatusReasonForbidden)
	if !strings.HasPrefix(st.Message, `rolebindings.rbac.authorization.k8s.io "bob-admin" is forbidden: user "bob" (groups=["team-a-devs" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:`) {
		t.Errorf("binding to cluster-admin refused with %q", st.Message)
	}
	// Updating his own Role to more than he holds is escalation too.
	dr := get[rbacv1.Role](t, e.Env, rolesPath+"/deploy-reader")
	dr.Rules = append(dr.Rules, rbacRule(list("list"), list(""), list("secrets")))
	for _, r := range []*reply{
		e.as(t, "bob", "PUT", rolesPath+"/deploy-reader", dr),
		e.patch(t, "bob", jsonPatch, rolesPath+"/deploy-reader", `[{"op":"add","path":"/rules/-","value":{"verbs":["list"],"apiGroups":[""],"resources":["secrets"]}}]`),
	} {
		if st := r.wantStatus(t, 403, metav1.StatusReasonForbidden); !strings.Contains(st.Message, `is attempting to grant RBAC permissions not currently held:`+"\n"+`{APIGroups:[""], Resources:["secrets"], Verbs:["list"]}`) {
			t.Errorf("escalating update refused with %q", st.Message)
		}
	}
	if got := get[rbacv1.Role](t, e.Env, rolesPath+"/deploy-reader"); len(got.Rules) != 1 {
		t.Errorf("a refused update changed the Role: %v", got.Rules)
	}
	// A change that grants nothing new (a label) is not escalation.
	e.patch(t, "bob", jsonPatch, rolesPath+"/deploy-reader", `[{"op":"add","path":"/metadata/labels","value":{"team":"a"}}]`).want(t, 200)

	// escalate on roles and bind on cluster-admin lift the checks.
	create[rbacv1.ClusterRole](t, e.Env, rbacPath+"/clusterroles", clusterRole("escalator",
		rbacRule(list("escalate"), list("rbac.authorization.k8s.io"), list("roles")),
		rbacRule(list("bind"), list("rbac.authorization.k8s.io"), list("clusterroles"), "cluster-admin")))
	create[rbacv1.RoleBinding](t, e.Env, bindingsPath, roleBinding("team-a", "bob-escalates", "ClusterRole", "escalator", userSubject("bob")))
	eventually(t, "bob may escalate", func() (bool, string) {
		r := e.as(t, "bob", "POST", rolesPath, role("team-a", "pod-killer", rbacRule(list("delete", "get"), list(""), list("pods"))))
		return r.code == http.StatusCreated, truncate(r.body)
	})
	e.as(t, "bob", "POST", bindingsPath, roleBinding("team-a", "bob-admin", "ClusterRole", "cluster-admin", userSubject("bob"))).want(t, 201)
}

// TestBootstrapPolicy: the server starts with kube's bootstrap roles and
// bindings, and a restart restores what was deleted and the rules taken
// from an auto-updated role, but keeps an administrator's changes to a
// role whose autoupdate annotation is "false".
func TestBootstrapPolicy(t *testing.T) {
	e := struct{ *testenv.Env }{testenv.StartWith(t, testenv.Options{Server: apiserver.Config{AuthorizationModes: []string{"RBAC"}}})}
	for _, name := range []string{"cluster-admin", "admin", "edit", "view", "system:basic-user", "system:discovery",
		"system:public-info-viewer", "system:node", "system:node-bootstrapper", "system:kube-scheduler",
		"system:kube-controller-manager", "system:monitoring", "system:controller:replicaset-controller",
		"system:controller:clusterrole-aggregation-controller", "system:certificates.k8s.io:certificatesigningrequests:nodeclient"} {
		r := get[rbacv1.ClusterRole](t, e.Env, rbacPath+"/clusterroles/"+name)
		if r.Annotations["rbac.authorization.kubernetes.io/autoupdate"] != "true" || r.Labels["kubernetes.io/bootstrapping"] != "rbac-defaults" {
			t.Errorf("clusterrole %s: labels %v annotations %v", name, r.Labels, r.Annotations)
		}
	}
	crb := get[rbacv1.ClusterRoleBinding](t, e.Env, rbacPath+"/clusterrolebindings/system:controller:replicaset-controller")
	if len(crb.Subjects) != 1 || crb.Subjects[0] != (rbacv1.Subject{Kind: "ServiceAccount", Name: "replicaset-controller", Namespace: "kube-system"}) {
		t.Errorf("replicaset-controller binding subjects %v", crb.Subjects)
	}
	view := get[rbacv1.ClusterRole](t, e.Env, rbacPath+"/clusterroles/view")
	if view.AggregationRule == nil || view.AggregationRule.ClusterRoleSelectors[0].MatchLabels["rbac.authorization.k8s.io/aggregate-to-view"] != "true" {
		t.Errorf("view aggregationRule %v", view.AggregationRule)
	}

	do(t, e.Env, "DELETE", rbacPath+"/clusterrolebindings/system:basic-user", "", nil).want(t, 200)
	basic := get[rbacv1.ClusterRole](t, e.Env, rbacPath+"/clusterroles/system:basic-user")
	basic.Rules = basic.Rules[:1]
	update[rbacv1.ClusterRole](t, e.Env, rbacPath+"/clusterroles/system:basic-user", basic)
	disc := get[rbacv1.ClusterRole](t, e.Env, rbacPath+"/clusterroles/system:discovery")
	disc.Annotations["rbac.authorization.kubernetes.io/autoupdate"] = "false"
	disc.Rules[0].NonResourceURLs = []string{"/api"}
	update[rbacv1.ClusterRole](t, e.Env, rbacPath+"/clusterroles/system:discovery", disc)

	e.RestartServer()
	do(t, e.Env, "GET", rbacPath+"/clusterrolebindings/system:basic-user", "", nil).want(t, 200)
	if got := get[rbacv1.ClusterRole](t, e.Env, rbacPath+"/clusterroles/system:basic-user"); len(got.Rules) != 2 {
		t.Errorf("system:basic-user after restart has rules %v, want its two", got.Rules)
	}
	if got := get[rbacv1.ClusterRole](t, e.Env, rbacPath+"/clusterroles/system:discovery"); len(got.Rules) != 1 || len(got.Rules[0].NonResourceURLs) != 1 {
		t.Errorf("system:discovery, not auto-updated, was changed at restart: %v", got.Rules)
	}
}

// TestBootstrapRolesLetComponentsWork: the scheduler, the controller
// manager and a controller's ServiceAccount may do, through the bootstrap
// policy alone, what they do, and no more.
func TestBootstrapRolesLetComponentsWork(t *testing.T) {
	e := startRBACEnv(t)
	lease := map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": map[string]any{"name": "kube-scheduler"}}
	event := map[string]any{"apiVersion": "v1", "kind": "Event", "metadata": map[string]any{"name": "e1"},
		"involvedObject": map[string]any{"kind": "Pod", "name": "p", "namespace": "default"}, "reason": "Scheduled", "message": "m"}
	for _, c := range []struct {
		token, method, path string
		body                any
		allowed             bool
	}{
		{"scheduler", "GET", "/api/v1/pods", nil, true},
		{"scheduler", "GET", "/api/v1/nodes", nil, true},
		{"scheduler", "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", lease, true},
		{"scheduler", "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler", nil, true},
		{"scheduler", "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager", nil, false},
		{"scheduler", "POST", "/api/v1/namespaces/default/events", event, true},
		{"scheduler", "DELETE", "/api/v1/nodes/n1", nil, false},
		{"manager", "GET", "/api/v1/secrets", nil, true},
		{"manager", "GET", "/apis/apps/v1/deployments", nil, true},
		{"manager", "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager", nil, true},
		{"manager", "DELETE", "/api/v1/namespaces/default/pods/p", nil, false},
		{"replicaset", "POST", "/api/v1/namespaces/default/pods", pod("web-1", "", nil), true},
		{"replicaset", "PUT", "/apis/apps/v1/namespaces/default/replicasets/web/status", nil, true},
		{"replicaset", "DELETE", "/api/v1/nodes/n1", nil, false},
		{"replicaset", "GET", "/api/v1/secrets", nil, false},
		{"gc", "DELETE", "/apis/apps/v1/namespaces/default/replicasets/web", nil, true},
		{"gc", "POST", "/api/v1/namespaces/default/pods", pod("web-2", "", nil), false},
	} {
		r := e.as(t, c.token, c.method, c.path, c.body)
		if got := r.code != http.StatusForbidden; got != c.allowed {
			t.Errorf("%s %s %s: got %d, want allowed=%v; body: %s", c.token, c.method, c.path, r.code, c.allowed, truncate(r.body))
		}
	}
}
