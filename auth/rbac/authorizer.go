package rbac

import (
	"context"
	"errors"
	"sync/atomic"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/minictl/minictl/auth/authorizer"
	"github.com/minictl/minictl/auth/user"
)

// Authorizer is the RBAC authorization mode. It reads the Index its
// source returns at each request, so the policy it applies is always the
// latest the source has.
type Authorizer struct {
	index func() *Index
}

// New returns the RBAC authorizer of the policy index returns.
func New(index func() *Index) *Authorizer { return &Authorizer{index: index} }

// Static returns an index function that always returns x.
func Static(x *Index) func() *Index {
	var p atomic.Pointer[Index]
	p.Store(x)
	return p.Load
}

// Authorize allows a when a rule granted to its user allows it, and
// otherwise has no opinion: RBAC never denies. The reason of an allow
// names the binding, as kube's does; a refusal's reason names the roles
// that could not be read.
func (az *Authorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	var (
		reason string
		errs   []error
	)
	az.index().visit(a.User, a.Namespace, func(b *binding, s rbacv1.Subject, rule *rbacv1.PolicyRule) bool {
		if RuleAllows(a, rule) {
			reason = "RBAC: allowed by " + b.describe(s)
			return false
		}
		return true
	}, func(err error) { errs = append(errs, err) })
	if reason != "" {
		return authorizer.Allow, reason, nil
	}
	if len(errs) > 0 {
		return authorizer.NoOpinion, "RBAC: " + errors.Join(errs...).Error(), nil
	}
	return authorizer.NoOpinion, "", nil
}

// Rules returns every rule granted to u at the cluster scope and in
// namespace, and the errors of the bindings whose roles are missing.
func (az *Authorizer) Rules(u *user.Info, namespace string) ([]rbacv1.PolicyRule, []error) {
	var (
		rules []rbacv1.PolicyRule
		errs  []error
	)
	az.index().visit(u, namespace, func(_ *binding, _ rbacv1.Subject, rule *rbacv1.PolicyRule) bool {
		rules = append(rules, *rule)
		return true
	}, func(err error) { errs = append(errs, err) })
	return rules, errs
}

// RulesFor lists what u may do in namespace, for SelfSubjectRulesReview.
func (az *Authorizer) RulesFor(_ context.Context, u *user.Info, namespace string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool, error) {
	rules, errs := az.Rules(u, namespace)
	var res []authorizationv1.ResourceRule
	var nonRes []authorizationv1.NonResourceRule
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			nonRes = append(nonRes, authorizationv1.NonResourceRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
			continue
		}
		res = append(res, authorizationv1.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	return res, nonRes, len(errs) > 0, errors.Join(errs...)
}

// RoleRules returns the rules of the role ref names, as Index.RoleRules.
func (az *Authorizer) RoleRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	return az.index().RoleRules(ref, namespace)
}
