package node

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/minictl/minictl/auth/authorizer"
)

// rule is a policy rule: verbs on resources (resource/subresource) of API
// groups, as rbacv1.PolicyRule without resource names.
func rule(verbs, groups, resources []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources}
}

var (
	read = []string{"get", "list", "watch"}
	core = []string{""}
)

// NodeRules are what every kubelet may do wherever the graph has no say:
// kube's bootstrap policy for system:nodes. The admission plugin
// NodeRestriction narrows the writes to the node's own objects.
func NodeRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		// Checking the credentials and rights of callers of the kubelet's API.
		rule([]string{"create"}, []string{"authentication.k8s.io"}, []string{"tokenreviews"}),
		rule([]string{"create"}, []string{"authorization.k8s.io"}, []string{"subjectaccessreviews", "localsubjectaccessreviews"}),
		// Services, for the environment of pods.
		rule(read, core, []string{"services"}),
		// Registering its Node and reporting its status.
		rule([]string{"create", "get", "list", "watch"}, core, []string{"nodes"}),
		rule([]string{"update", "patch"}, core, []string{"nodes/status"}),
		rule([]string{"update", "patch"}, core, []string{"nodes"}),
		rule([]string{"create", "update", "patch"}, []string{"", "events.k8s.io"}, []string{"events"}),
		// Its pods, mirror pods, their status and evictions.
		rule(read, core, []string{"pods"}),
		rule([]string{"create", "delete"}, core, []string{"pods"}),
		rule([]string{"update", "patch"}, core, []string{"pods/status"}),
		rule([]string{"create"}, core, []string{"pods/eviction"}),
		// What its pods mount and read, which the graph narrows to those
		// of its own pods.
		rule(read, core, []string{"secrets", "configmaps"}),
		rule([]string{"get"}, core, []string{"persistentvolumeclaims", "persistentvolumes"}),
		rule([]string{"get"}, core, []string{"endpoints"}),
		// Its own client certificate, asked for and waited for.
		rule([]string{"create", "get", "list", "watch"}, []string{"certificates.k8s.io"}, []string{"certificatesigningrequests"}),
		rule([]string{"get", "create", "update", "patch", "delete"}, []string{"coordination.k8s.io"}, []string{"leases"}),
		rule([]string{"get"}, []string{"storage.k8s.io"}, []string{"volumeattachments"}),
		rule([]string{"create"}, core, []string{"serviceaccounts/token"}),
		rule([]string{"get", "update", "patch"}, core, []string{"persistentvolumeclaims/status"}),
		rule(read, []string{"storage.k8s.io"}, []string{"csidrivers"}),
		rule([]string{"get", "create", "update", "patch", "delete"}, []string{"storage.k8s.io"}, []string{"csinodes"}),
		rule(read, []string{"node.k8s.io"}, []string{"runtimeclasses"}),
	}
}

// rulesAllow reports whether one of rules allows the resource request a.
// NodeRules name no resources by name and no paths, so neither is
// matched here.
func rulesAllow(a authorizer.Attributes, rules []rbacv1.PolicyRule) bool {
	if !a.ResourceRequest {
		return false
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	for _, r := range rules {
		if matches(r.Verbs, a.Verb) && matches(r.APIGroups, a.APIGroup) && matches(r.Resources, resource) {
			return true
		}
	}
	return false
}

func matches(allowed []string, s string) bool {
	return slices.Contains(allowed, s) || slices.Contains(allowed, "*")
}
