package bootstrap

import rbacv1 "k8s.io/api/rbac/v1"

// rule builds a PolicyRule as kube's policy is written: verbs first, then
// groups and resources (or URLs), then names.
type rule rbacv1.PolicyRule

func verbs(v ...string) *rule { return &rule{Verbs: v} }

func (r *rule) groups(g ...string) *rule    { r.APIGroups = g; return r }
func (r *rule) resources(s ...string) *rule { r.Resources = s; return r }
func (r *rule) names(n ...string) *rule     { r.ResourceNames = n; return r }
func (r *rule) urls(u ...string) *rule      { r.NonResourceURLs = u; return r }

func rules(rs ...*rule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rs))
	for i, r := range rs {
		out[i] = rbacv1.PolicyRule(*r)
	}
	return out
}

// The API groups the policy names.
const (
	legacyGroup         = ""
	appsGroup           = "apps"
	batchGroup          = "batch"
	policyGroup         = "policy"
	rbacGroup           = "rbac.authorization.k8s.io"
	coordinationGroup   = "coordination.k8s.io"
	certificatesGroup   = "certificates.k8s.io"
	authenticationGroup = "authentication.k8s.io"
	authorizationGroup  = "authorization.k8s.io"
	autoscalingGroup    = "autoscaling"
	networkingGroup     = "networking.k8s.io"
	discoveryGroup      = "discovery.k8s.io"
	eventsGroup         = "events.k8s.io"
	storageGroup        = "storage.k8s.io"
	admissionGroup      = "admissionregistration.k8s.io"
	apiextensionsGroup  = "apiextensions.k8s.io"
	metricsGroup        = "metrics.k8s.io"
)

var (
	read      = []string{"get", "list", "watch"}
	readWrite = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
)

// eventsRule lets a controller record Events, in both the core and the
// events.k8s.io groups, as every kube controller role does.
func eventsRule() *rule {
	return verbs("create", "update", "patch").groups(legacyGroup, eventsGroup).resources("events")
}
