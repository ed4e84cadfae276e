package bootstrap

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ControllerRolePrefix begins the name of each controller's ClusterRole
// and of its binding: system:controller:<ServiceAccount>.
const ControllerRolePrefix = "system:controller:"

// controllerRole is one controller's role, bound to the ServiceAccount
// kube-system/<sa> it runs as (kube's --use-service-account-credentials).
type controllerRole struct {
	sa    string
	rules []*rule
}

// controllers are the roles of the controllers minictl runs, under the
// ServiceAccount names kube gives them, with the permissions each uses.
var controllers = []controllerRole{
	{"clusterrole-aggregation-controller", []*rule{
		verbs("escalate", "get", "list", "patch", "update", "watch").groups(rbacGroup).resources("clusterroles"),
	}},
	{"cronjob-controller", []*rule{
		verbs("get", "list", "watch", "update").groups(batchGroup).resources("cronjobs"),
		verbs("get", "list", "watch", "create", "update", "delete", "patch").groups(batchGroup).resources("jobs"),
		verbs("update").groups(batchGroup).resources("cronjobs/status"),
		verbs("update").groups(batchGroup).resources("cronjobs/finalizers"),
		verbs("list", "delete").groups(legacyGroup).resources("pods"),
		eventsRule(),
	}},
	{"daemon-set-controller", []*rule{
		verbs("get", "list", "watch").groups(appsGroup).resources("daemonsets"),
		verbs("update").groups(appsGroup).resources("daemonsets/status"),
		verbs("update").groups(appsGroup).resources("daemonsets/finalizers"),
		verbs("list", "watch").groups(legacyGroup).resources("nodes"),
		verbs("list", "watch", "create", "delete", "patch").groups(legacyGroup).resources("pods"),
		verbs("create").groups(legacyGroup).resources("pods/binding"),
		verbs("get", "list", "watch", "create", "delete", "update", "patch").groups(appsGroup).resources("controllerrevisions"),
		eventsRule(),
	}},
	{"horizontal-pod-autoscaler", []*rule{
		verbs("get", "list", "watch").groups("autoscaling").resources("horizontalpodautoscalers"),
		verbs("update").groups("autoscaling").resources("horizontalpodautoscalers/status"),
		verbs("get", "update").groups("*").resources("*/scale"),
		verbs("list", "watch").groups(legacyGroup).resources("pods"),
		verbs("list").groups("metrics.k8s.io").resources("pods"),
		verbs("get", "list").groups("custom.metrics.k8s.io").resources("*"),
		verbs("get", "list").groups("external.metrics.k8s.io").resources("*"),
		eventsRule(),
	}},
	{"deployment-controller", []*rule{
		verbs("get", "list", "watch", "update").groups(appsGroup).resources("deployments"),
		verbs("update").groups(appsGroup).resources("deployments/status"),
		verbs("update").groups(appsGroup).resources("deployments/finalizers"),
		verbs("get", "list", "watch", "create", "update", "patch", "delete").groups(appsGroup).resources("replicasets"),
		verbs("get", "list", "watch", "update").groups(legacyGroup).resources("pods"),
		eventsRule(),
	}},
	{"disruption-controller", []*rule{
		verbs("get", "list", "watch").groups(appsGroup).resources("deployments", "replicasets", "statefulsets"),
		verbs("get", "list", "watch").groups(legacyGroup).resources("replicationcontrollers"),
		verbs("get", "list", "watch").groups(policyGroup).resources("poddisruptionbudgets"),
		verbs("update").groups(policyGroup).resources("poddisruptionbudgets/status"),
		verbs("get", "list", "watch").groups(legacyGroup).resources("pods"),
		verbs("patch", "update").groups(legacyGroup).resources("pods/status"),
		verbs("get").groups("*").resources("*/scale"),
		eventsRule(),
	}},
	{"endpoint-controller", []*rule{
		verbs("get", "list", "watch").groups(legacyGroup).resources("services", "pods"),
		verbs("get", "list", "create", "update", "delete").groups(legacyGroup).resources("endpoints"),
		verbs("create").groups(legacyGroup).resources("endpoints/restricted"),
		eventsRule(),
	}},
	{"endpointslice-controller", []*rule{
		verbs("get", "list", "watch").groups(legacyGroup).resources("services", "pods", "nodes"),
		// The slices are owned by their service, and the owner reference
		// blocks the service's deletion: that takes the right to update
		// the service's finalizers.
		verbs("update").groups(legacyGroup).resources("services/finalizers"),
		verbs("get", "list", "create", "update", "delete").groups(discoveryGroup).resources("endpointslices"),
		eventsRule(),
	}},
	{"endpointslicemirroring-controller", []*rule{
		verbs("get", "list", "watch").groups(legacyGroup).resources("services", "endpoints"),
		// The slices are owned by their Endpoints, as above.
		verbs("update").groups(legacyGroup).resources("services/finalizers"),
		verbs("update").groups(legacyGroup).resources("endpoints/finalizers"),
		verbs("get", "list", "create", "update", "delete").groups(discoveryGroup).resources("endpointslices"),
		eventsRule(),
	}},
	{"generic-garbage-collector", []*rule{
		verbs("get", "list", "watch", "patch", "update", "delete").groups("*").resources("*"),
		eventsRule(),
	}},
	{"job-controller", []*rule{
		verbs("get", "list", "watch", "update", "patch").groups(batchGroup).resources("jobs"),
		verbs("update").groups(batchGroup).resources("jobs/status"),
		verbs("update").groups(batchGroup).resources("jobs/finalizers"),
		verbs("list", "watch", "create", "delete", "patch").groups(legacyGroup).resources("pods"),
		eventsRule(),
	}},
	{"namespace-controller", []*rule{
		verbs("get", "list", "watch", "delete").groups(legacyGroup).resources("namespaces"),
		verbs("update").groups(legacyGroup).resources("namespaces/finalize", "namespaces/status"),
		verbs("get", "list", "delete", "deletecollection").groups("*").resources("*"),
		// minictl's namespace controller records Events (Finalized,
		// FailedDeleteContent), which kube's does not.
		eventsRule(),
	}},
	// node-controller is the ServiceAccount of the node lifecycle and the
	// node IPAM controllers alike.
	{"node-controller", []*rule{
		verbs("get", "list", "update", "delete", "patch").groups(legacyGroup).resources("nodes"),
		verbs("patch", "update").groups(legacyGroup).resources("nodes/status"),
		verbs("patch", "update").groups(legacyGroup).resources("pods/status"),
		verbs("list", "delete").groups(legacyGroup).resources("pods"),
		eventsRule(),
	}},
	{"pod-garbage-collector", []*rule{
		verbs("list", "watch", "delete").groups(legacyGroup).resources("pods"),
		verbs("get", "list", "watch").groups(legacyGroup).resources("nodes"),
		verbs("patch").groups(legacyGroup).resources("pods/status"),
		// minictl's podgc records an Event for each pod it deletes, which
		// kube's does not.
		eventsRule(),
	}},
	{"replicaset-controller", []*rule{
		verbs("get", "list", "watch", "update").groups(appsGroup).resources("replicasets"),
		verbs("update").groups(appsGroup).resources("replicasets/status"),
		verbs("update").groups(appsGroup).resources("replicasets/finalizers"),
		verbs("list", "watch", "patch", "create", "delete").groups(legacyGroup).resources("pods"),
		eventsRule(),
	}},
	{"replication-controller", []*rule{
		verbs("get", "list", "watch", "update").groups(legacyGroup).resources("replicationcontrollers"),
		verbs("update").groups(legacyGroup).resources("replicationcontrollers/status"),
		verbs("update").groups(legacyGroup).resources("replicationcontrollers/finalizers"),
		verbs("list", "watch", "patch", "create", "delete").groups(legacyGroup).resources("pods"),
		eventsRule(),
	}},
	{"resourcequota-controller", []*rule{
		verbs("list", "watch").groups("*").resources("*"),
		verbs("update").groups(legacyGroup).resources("resourcequotas/status"),
		eventsRule(),
	}},
	{"service-account-controller", []*rule{
		verbs("create").groups(legacyGroup).resources("serviceaccounts"),
		eventsRule(),
	}},
	// Binding, provisioning and protecting volumes, with the rules kube
	// gives these ServiceAccounts (the binder's take in what its in-tree
	// volume plugins once needed).
	{"persistent-volume-binder", []*rule{
		verbs("get", "list", "watch", "update", "create", "delete").groups(legacyGroup).resources("persistentvolumes"),
		verbs("update").groups(legacyGroup).resources("persistentvolumes/status"),
		verbs("get", "list", "watch", "update").groups(legacyGroup).resources("persistentvolumeclaims"),
		verbs("update").groups(legacyGroup).resources("persistentvolumeclaims/status"),
		verbs("list", "watch", "get", "create", "delete").groups(legacyGroup).resources("pods"),
		verbs("get", "list", "watch").groups(storageGroup).resources("storageclasses"),
		verbs("get", "create", "update", "delete").groups(legacyGroup).resources("endpoints"),
		verbs("get", "create", "delete").groups(legacyGroup).resources("services"),
		verbs("get").groups(legacyGroup).resources("secrets"),
		verbs("get", "list").groups(legacyGroup).resources("nodes"),
		verbs("watch").groups(legacyGroup).resources("events"),
		eventsRule(),
	}},
	{"pvc-protection-controller", []*rule{
		verbs("get", "list", "watch", "update").groups(legacyGroup).resources("persistentvolumeclaims"),
		verbs("list", "watch", "get").groups(legacyGroup).resources("pods"),
		eventsRule(),
	}},
	{"pv-protection-controller", []*rule{
		verbs("get", "list", "watch", "update").groups(legacyGroup).resources("persistentvolumes"),
		eventsRule(),
	}},
	{"statefulset-controller", []*rule{
		verbs("list", "watch").groups(legacyGroup).resources("pods"),
		verbs("get", "list", "watch").groups(appsGroup).resources("statefulsets"),
		verbs("update").groups(appsGroup).resources("statefulsets/status"),
		verbs("update").groups(appsGroup).resources("statefulsets/finalizers"),
		verbs("get", "create", "delete", "update", "patch").groups(legacyGroup).resources("pods"),
		verbs("get", "create", "delete", "update", "patch", "list", "watch").groups(appsGroup).resources("controllerrevisions"),
		verbs("get", "create").groups(legacyGroup).resources("persistentvolumeclaims"),
		// kube adds this rule with StatefulSetAutoDeletePVC, on by default.
		verbs("update", "delete").groups(legacyGroup).resources("persistentvolumeclaims"),
		eventsRule(),
	}},
	{"ttl-after-finished-controller", []*rule{
		verbs("get", "list", "watch", "delete").groups(batchGroup).resources("jobs"),
		eventsRule(),
	}},
	// Signing, approving and cleaning up CertificateSigningRequests.
	{"certificate-controller", []*rule{
		verbs("get", "list", "watch", "delete").groups(certificatesGroup).resources("certificatesigningrequests"),
		verbs("update").groups(certificatesGroup).resources("certificatesigningrequests/status", "certificatesigningrequests/approval"),
		verbs("approve").groups(certificatesGroup).resources("signers").names("kubernetes.io/kube-apiserver-client-kubelet"),
		verbs("sign").groups(certificatesGroup).resources("signers").names(
			"kubernetes.io/kube-apiserver-client", "kubernetes.io/kube-apiserver-client-kubelet",
			"kubernetes.io/kubelet-serving", "kubernetes.io/legacy-unknown"),
		verbs("create").groups(authorizationGroup).resources("subjectaccessreviews"),
		eventsRule(),
	}},
	{"root-ca-cert-publisher", []*rule{
		verbs("create", "update").groups(legacyGroup).resources("configmaps"),
		eventsRule(),
	}},
	// The cloud controller manager's service and route controllers.
	{"service-controller", []*rule{
		verbs("get", "list", "watch").groups(legacyGroup).resources("services"),
		// The load-balancer-cleanup finalizer is patched onto the Service
		// itself; kube's in-tree role predates the finalizer, and cloud
		// providers grant this beside it.
		verbs("patch", "update").groups(legacyGroup).resources("services"),
		verbs("patch", "update").groups(legacyGroup).resources("services/status"),
		verbs("list", "watch").groups(legacyGroup).resources("nodes"),
		eventsRule(),
	}},
	{"route-controller", []*rule{
		verbs("list", "watch").groups(legacyGroup).resources("nodes"),
		verbs("patch").groups(legacyGroup).resources("nodes/status"),
		eventsRule(),
	}},
}

// ControllerServiceAccounts are the names of the kube-system
// ServiceAccounts the controllers run as.
func ControllerServiceAccounts() []string {
	names := make([]string, len(controllers))
	for i, c := range controllers {
		names[i] = c.sa
	}
	return names
}

func controllerRoles() []*rbacv1.ClusterRole {
	var out []*rbacv1.ClusterRole
	for _, c := range controllers {
		out = append(out, clusterRole(ControllerRolePrefix+c.sa, nil, c.rules...))
	}
	return out
}

func controllerRoleBindings() []*rbacv1.ClusterRoleBinding {
	var out []*rbacv1.ClusterRoleBinding
	for _, c := range controllers {
		out = append(out, clusterRoleBinding(ControllerRolePrefix+c.sa, ControllerRolePrefix+c.sa,
			rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: c.sa, Namespace: metav1.NamespaceSystem}))
	}
	return out
}

// Roles returns the bootstrap Roles of each namespace: the bootstrap
// signer's in kube-public (it signs the cluster-info ConfigMap) and the
// token cleaner's in kube-system (it deletes expired bootstrap tokens).
func Roles() []*rbacv1.Role {
	role := func(ns, name string, rs ...*rule) *rbacv1.Role {
		r := &rbacv1.Role{ObjectMeta: meta(name, nil), Rules: rules(rs...)}
		r.Namespace = ns
		return r
	}
	return []*rbacv1.Role{
		role(metav1.NamespacePublic, ControllerRolePrefix+"bootstrap-signer",
			verbs("get", "list", "watch").groups(legacyGroup).resources("configmaps"),
			verbs("update").groups(legacyGroup).resources("configmaps").names("cluster-info"),
			eventsRule()),
		role(metav1.NamespaceSystem, ControllerRolePrefix+"bootstrap-signer",
			verbs("get", "list", "watch").groups(legacyGroup).resources("secrets")),
		role(metav1.NamespaceSystem, ControllerRolePrefix+"token-cleaner",
			verbs("delete", "get", "list", "watch").groups(legacyGroup).resources("secrets"),
			eventsRule()),
	}
}

// RoleBindings binds the Roles to their controllers' ServiceAccounts.
func RoleBindings() []*rbacv1.RoleBinding {
	var out []*rbacv1.RoleBinding
	for _, r := range Roles() {
		sa := strings.TrimPrefix(r.Name, ControllerRolePrefix)
		rb := &rbacv1.RoleBinding{
			ObjectMeta: meta(r.Name, nil),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: metav1.NamespaceSystem}},
		}
		rb.Namespace = r.Namespace
		out = append(out, rb)
	}
	return out
}
