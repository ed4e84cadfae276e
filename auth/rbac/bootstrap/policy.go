// Package bootstrap is Kubernetes' bootstrap RBAC policy as data: the
// ClusterRoles and ClusterRoleBindings every cluster starts with (the
// user-facing admin, edit and view, the system:* roles of the components,
// and one system:controller:<name> role per controller), as
// kube-apiserver's rbac/bootstrap-roles creates them.
package bootstrap

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/auth/user"
)

const (
	// AutoUpdateAnnotation "true" lets the API server add the rules and
	// subjects a bootstrap object lacks at every start; an administrator
	// who sets it to "false" keeps their changes.
	AutoUpdateAnnotation = "rbac.authorization.kubernetes.io/autoupdate"
	// BootstrappingLabel marks the objects of the bootstrap policy.
	BootstrappingLabel = "kubernetes.io/bootstrapping"

	aggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	aggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	aggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
)

func meta(name string, extraLabels map[string]string) metav1.ObjectMeta {
	labels := map[string]string{BootstrappingLabel: "rbac-defaults"}
	for k, v := range extraLabels {
		labels[k] = v
	}
	return metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{AutoUpdateAnnotation: "true"}}
}

func clusterRole(name string, labels map[string]string, rs ...*rule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: meta(name, labels), Rules: rules(rs...)}
}

func aggregated(name, selectLabel string, labels map[string]string) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		ObjectMeta: meta(name, labels),
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{selectLabel: "true"}},
		}},
	}
}

// ClusterRoles returns the bootstrap ClusterRoles, the controllers' last.
func ClusterRoles() []*rbacv1.ClusterRole {
	roles := []*rbacv1.ClusterRole{
		clusterRole("cluster-admin", nil,
			verbs("*").groups("*").resources("*"),
			verbs("*").urls("*")),
		clusterRole("system:discovery", nil,
			verbs("get").urls("/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/",
				// minictl's web view: the page's static files, the same
				// for everyone; what it shows, it reads through the API.
				"/ui", "/ui/*")),
		clusterRole("system:monitoring", nil,
			verbs("get").urls("/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*")),
		clusterRole("system:basic-user", nil,
			verbs("create").groups(authorizationGroup).resources("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
			verbs("create").groups(authenticationGroup).resources("selfsubjectreviews")),
		clusterRole("system:public-info-viewer", nil,
			verbs("get").urls("/healthz", "/livez", "/readyz", "/version", "/version/")),

		aggregated("admin", aggregateToAdmin, nil),
		aggregated("edit", aggregateToEdit, map[string]string{aggregateToAdmin: "true"}),
		aggregated("view", aggregateToView, map[string]string{aggregateToEdit: "true"}),

		clusterRole("system:aggregate-to-admin", map[string]string{aggregateToAdmin: "true"},
			verbs("create").groups(authorizationGroup).resources("localsubjectaccessreviews"),
			verbs(readWrite...).groups(rbacGroup).resources("roles", "rolebindings")),
		clusterRole("system:aggregate-to-edit", map[string]string{aggregateToAdmin: "true", aggregateToEdit: "true"},
			// Reading what view leaves out because it escalates: the
			// Secrets (their tokens) and the ways into a running pod.
			verbs(read...).groups(legacyGroup).resources(
				"pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"),
			verbs("impersonate").groups(legacyGroup).resources("serviceaccounts"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(legacyGroup).resources(
				"pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"),
			verbs("create").groups(legacyGroup).resources("pods/eviction"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(legacyGroup).resources(
				"replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
				"services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets", "events"),
			verbs("create").groups(legacyGroup).resources("serviceaccounts/token"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(appsGroup).resources(
				"statefulsets", "statefulsets/scale", "daemonsets", "deployments", "deployments/scale", "deployments/rollback",
				"replicasets", "replicasets/scale"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(autoscalingGroup).resources("horizontalpodautoscalers"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(batchGroup).resources("jobs", "cronjobs"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(networkingGroup).resources("ingresses", "networkpolicies"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(policyGroup).resources("poddisruptionbudgets"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(coordinationGroup).resources("leases")),
		clusterRole("system:aggregate-to-view", map[string]string{aggregateToAdmin: "true", aggregateToEdit: "true", aggregateToView: "true"},
			verbs(read...).groups(legacyGroup).resources(
				"pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
				"services", "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"),
			verbs(read...).groups(legacyGroup).resources(
				"limitranges", "resourcequotas", "bindings", "events",
				"pods/status", "resourcequotas/status", "namespaces/status", "replicationcontrollers/status", "pods/log"),
			verbs(read...).groups(legacyGroup).resources("namespaces"),
			verbs(read...).groups(discoveryGroup).resources("endpointslices"),
			verbs(read...).groups(appsGroup).resources(
				"controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale",
				"daemonsets", "daemonsets/status", "deployments", "deployments/status", "deployments/scale",
				"replicasets", "replicasets/status", "replicasets/scale"),
			verbs(read...).groups(autoscalingGroup).resources("horizontalpodautoscalers", "horizontalpodautoscalers/status"),
			verbs(read...).groups(batchGroup).resources("jobs", "cronjobs", "cronjobs/status", "jobs/status"),
			verbs(read...).groups(policyGroup).resources("poddisruptionbudgets", "poddisruptionbudgets/status"),
			verbs(read...).groups(networkingGroup).resources("ingresses", "ingresses/status", "networkpolicies"),
			verbs(read...).groups(coordinationGroup).resources("leases")),
		// metrics-server's reader role, which its manifests install: the
		// resource metrics for everyone who may view, edit or administer.
		clusterRole("system:aggregated-metrics-reader", map[string]string{aggregateToAdmin: "true", aggregateToEdit: "true", aggregateToView: "true"},
			verbs("get", "list", "watch").groups(metricsGroup).resources("pods", "nodes")),

		clusterRole("system:node", nil,
			verbs("create").groups(authenticationGroup).resources("tokenreviews"),
			verbs("create").groups(authorizationGroup).resources("subjectaccessreviews", "localsubjectaccessreviews"),
			verbs("get", "list", "watch").groups(legacyGroup).resources("services"),
			verbs("create", "get", "list", "watch").groups(legacyGroup).resources("nodes"),
			verbs("update", "patch").groups(legacyGroup).resources("nodes/status"),
			verbs("update", "patch").groups(legacyGroup).resources("nodes"),
			eventsRule(),
			verbs("get", "list", "watch").groups(legacyGroup).resources("pods"),
			verbs("create", "delete").groups(legacyGroup).resources("pods"),
			verbs("update", "patch").groups(legacyGroup).resources("pods/status"),
			verbs("create").groups(legacyGroup).resources("pods/eviction"),
			verbs("get").groups(legacyGroup).resources("secrets", "configmaps"),
			verbs("get").groups(legacyGroup).resources("persistentvolumeclaims", "persistentvolumes"),
			verbs("get").groups(legacyGroup).resources("endpoints"),
			verbs("create", "get", "list", "watch").groups(certificatesGroup).resources("certificatesigningrequests"),
			verbs("delete", "create", "update", "get").groups(coordinationGroup).resources("leases"),
			verbs("create").groups(legacyGroup).resources("serviceaccounts/token")),
		clusterRole("system:node-bootstrapper", nil,
			verbs("create", "get", "list", "watch").groups(certificatesGroup).resources("certificatesigningrequests")),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:nodeclient", nil,
			verbs("create").groups(certificatesGroup).resources("certificatesigningrequests/nodeclient")),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", nil,
			verbs("create").groups(certificatesGroup).resources("certificatesigningrequests/selfnodeclient")),

		clusterRole("system:kube-scheduler", nil,
			eventsRule(),
			verbs("create").groups(coordinationGroup).resources("leases"),
			verbs("get", "update").groups(coordinationGroup).resources("leases").names("kube-scheduler"),
			verbs("create").groups(legacyGroup).resources("endpoints"),
			verbs("get", "update").groups(legacyGroup).resources("endpoints").names("kube-scheduler"),
			verbs(read...).groups(legacyGroup).resources("nodes"),
			verbs("get", "list", "watch", "delete").groups(legacyGroup).resources("pods"),
			verbs("create").groups(legacyGroup).resources("bindings", "pods/binding"),
			verbs("patch", "update").groups(legacyGroup).resources("pods/status"),
			verbs("get", "list", "watch").groups(legacyGroup).resources("replicationcontrollers", "services"),
			verbs("get", "list", "watch").groups(appsGroup).resources("replicasets", "statefulsets"),
			verbs("get", "list", "watch").groups(policyGroup).resources("poddisruptionbudgets"),
			verbs("get", "list", "watch", "update").groups(legacyGroup).resources("persistentvolumeclaims", "persistentvolumes"),
			verbs("create").groups(authenticationGroup).resources("tokenreviews"),
			verbs("create").groups(authorizationGroup).resources("subjectaccessreviews"),
			verbs("get", "list", "watch").groups(storageGroup).resources("csinodes", "csidrivers", "csistoragecapacities", "storageclasses", "volumeattachments"),
			verbs("get", "list", "watch").groups(legacyGroup).resources("namespaces")),
		// The scheduler's volume binding: it claims the Available volumes
		// it chooses, and marks the claims to provision with their node.
		clusterRole("system:volume-scheduler", nil,
			verbs("get", "list", "watch", "update", "patch").groups(legacyGroup).resources("persistentvolumes"),
			verbs(read...).groups(storageGroup).resources("storageclasses"),
			verbs("get", "list", "watch", "update", "patch").groups(legacyGroup).resources("persistentvolumeclaims")),
		clusterRole("system:kube-controller-manager", nil,
			eventsRule(),
			verbs("create").groups(coordinationGroup).resources("leases"),
			verbs("get", "update").groups(coordinationGroup).resources("leases").names("kube-controller-manager"),
			verbs("create").groups(legacyGroup).resources("endpoints"),
			verbs("get", "update").groups(legacyGroup).resources("endpoints").names("kube-controller-manager"),
			// the token controller runs with the manager's own credentials
			verbs("create", "delete", "get", "update").groups(legacyGroup).resources("secrets", "serviceaccounts"),
			verbs("create").groups(authenticationGroup).resources("tokenreviews"),
			verbs("create").groups(authorizationGroup).resources("subjectaccessreviews"),
			verbs("list", "watch").groups("*").resources("*"),
			verbs("create").groups(legacyGroup).resources("serviceaccounts/token")),
		// Kube ships no role for the cloud controller manager; this is
		// the one cloud providers' manifests grant it: its lease, the
		// nodes and Services its controllers tend, and its controllers'
		// ServiceAccounts and tokens.
		clusterRole("system:cloud-controller-manager", nil,
			eventsRule(),
			verbs("create", "get", "list", "watch", "update").groups(coordinationGroup).resources("leases"),
			verbs("*").groups(legacyGroup).resources("nodes"),
			verbs("patch").groups(legacyGroup).resources("nodes/status"),
			verbs("list", "patch", "update", "watch").groups(legacyGroup).resources("services", "services/status"),
			verbs("create", "get", "list", "watch", "update").groups(legacyGroup).resources("serviceaccounts"),
			verbs("create").groups(legacyGroup).resources("serviceaccounts/token")),
	}
	roles = append(roles, simIngressControllerRole())
	return append(roles, controllerRoles()...)
}

// simIngressControllerRole is what minictl's simulated ingress controller
// may do, as an ingress-nginx install's ClusterRole lets it: read the
// Ingresses (and hold them with its finalizer), write their status, read
// the Services behind them, create its IngressClass, and record Events.
func simIngressControllerRole() *rbacv1.ClusterRole {
	return clusterRole(user.SimIngressController, nil,
		verbs("get", "list", "watch", "update").groups(networkingGroup).resources("ingresses"),
		verbs("update").groups(networkingGroup).resources("ingresses/status"),
		verbs("get", "list", "watch", "create").groups(networkingGroup).resources("ingressclasses"),
		verbs("get", "list", "watch").groups(legacyGroup).resources("services"),
		eventsRule())
}

func clusterRoleBinding(name, role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: meta(name, nil),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   subjects,
	}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

// ClusterRoleBindings returns the bootstrap ClusterRoleBindings, the
// controllers' last.
func ClusterRoleBindings() []*rbacv1.ClusterRoleBinding {
	bindings := []*rbacv1.ClusterRoleBinding{
		clusterRoleBinding("cluster-admin", "cluster-admin", group(user.SystemPrivilegedGroup)),
		clusterRoleBinding("system:monitoring", "system:monitoring", group(user.MonitoringGroup)),
		clusterRoleBinding("system:discovery", "system:discovery", group(user.AllAuthenticated)),
		clusterRoleBinding("system:basic-user", "system:basic-user", group(user.AllAuthenticated)),
		clusterRoleBinding("system:public-info-viewer", "system:public-info-viewer", group(user.AllAuthenticated), group(user.AllUnauthenticated)),
		clusterRoleBinding("system:kube-controller-manager", "system:kube-controller-manager", userSubject(user.KubeControllerManager)),
		clusterRoleBinding("system:kube-scheduler", "system:kube-scheduler", userSubject(user.KubeScheduler)),
		clusterRoleBinding("system:cloud-controller-manager", "system:cloud-controller-manager", userSubject(user.CloudControllerManager)),
		clusterRoleBinding(user.SimIngressController, user.SimIngressController, userSubject(user.SimIngressController)),
		clusterRoleBinding("system:volume-scheduler", "system:volume-scheduler", userSubject(user.KubeScheduler)),
	}
	return append(bindings, controllerRoleBindings()...)
}
