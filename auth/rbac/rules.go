package rbac

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/minictl/minictl/auth/authorizer"
)

// RuleAllows reports whether rule allows a, as kube's RBAC reads a rule:
// "*" matches any verb, group or resource; "*/status" matches the status
// subresource of any resource, and "pods" never matches "pods/status"
// (nor does "pods/*", which is only a subresource literally named "*");
// resourceNames, when set, allow only requests that name one of them (so
// never a list or a create); a non-resource URL ending in "*" matches
// every path it prefixes.
func RuleAllows(a authorizer.Attributes, rule *rbacv1.PolicyRule) bool {
	if !matchesOrAll(rule.Verbs, a.Verb, rbacv1.VerbAll) {
		return false
	}
	if !a.ResourceRequest {
		return urlMatches(rule.NonResourceURLs, a.Path)
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	return matchesOrAll(rule.APIGroups, a.APIGroup, rbacv1.APIGroupAll) &&
		resourceMatches(rule.Resources, resource, a.Subresource) &&
		(len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, a.Name))
}

func matchesOrAll(list []string, v, all string) bool {
	for _, s := range list {
		if s == all || s == v {
			return true
		}
	}
	return false
}

func resourceMatches(rules []string, resource, subresource string) bool {
	for _, r := range rules {
		if r == rbacv1.ResourceAll || r == resource {
			return true
		}
		if subresource != "" && r == "*/"+subresource {
			return true
		}
	}
	return false
}

func urlMatches(rules []string, path string) bool {
	for _, u := range rules {
		if u == rbacv1.NonResourceAll || u == path {
			return true
		}
		if prefix, ok := strings.CutSuffix(u, "*"); ok && strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}
