package apiserver

import (
	"context"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minictl/minictl/api"
)

// matcher decides whether an admission hook acts on a request: a
// webhook, a ValidatingAdmissionPolicy's matchConstraints, or a binding's
// matchResources. It is kube's generic matching, shared by both: the
// namespaceSelector, the objectSelector, the excluded rules, then the
// rules, for the request's resource and, with matchPolicy Equivalent, for
// the same resource in another served version. Matchers are built when a
// configuration changes and shared by every request; they are never
// modified.
type matcher struct {
	rules, exclude []rule
	// anyResource: no rules means every resource (a binding's
	// matchResources), rather than none (a webhook).
	anyResource bool
	matchPolicy *admissionregistrationv1.MatchPolicyType
	nsSel       labels.Selector
	objSel      labels.Selector
	// err is why the selectors do not parse (they were valid when
	// written, so this is not expected); a request the rules match fails
	// with it, as kube's does.
	err error
}

// rule is one rule of a matcher, with the resource names a policy's rule
// may narrow it to (none: any name).
type rule struct {
	admissionregistrationv1.RuleWithOperations
	names []string
}

func newMatcher(rules, exclude []rule, mp *admissionregistrationv1.MatchPolicyType, nsSel, objSel *metav1.LabelSelector) matcher {
	m := matcher{rules: rules, exclude: exclude, matchPolicy: mp}
	m.nsSel, m.err = selectorOf(nsSel)
	if m.err == nil {
		m.objSel, m.err = selectorOf(objSel)
	}
	return m
}

// namedRules are a policy's rules as a matcher's.
func namedRules(rs []admissionregistrationv1.NamedRuleWithOperations) []rule {
	out := make([]rule, len(rs))
	for i, r := range rs {
		out[i] = rule{RuleWithOperations: r.RuleWithOperations, names: r.ResourceNames}
	}
	return out
}

func selectorOf(ls *metav1.LabelSelector) (labels.Selector, error) {
	if ls == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(ls)
}

// matches returns the resource m matches a as (a's own, or an equivalent
// one), or nil. A selector that cannot be evaluated is an error only for a
// request the rules match.
func (s *Server) matches(ctx context.Context, m *matcher, a *attributes) (*api.Resource, error) {
	nsMatch, nsErr := s.matchNamespaceSelector(ctx, m, a)
	if !nsMatch && nsErr == nil {
		return nil, nil
	}
	if m.err == nil && !m.objSel.Empty() && !matchLabels(m.objSel, a.obj) && !matchLabels(m.objSel, a.old) {
		return nil, nil
	}
	if len(m.exclude) > 0 && s.matchRules(m.exclude, m.matchPolicy, a) != nil {
		return nil, nil
	}
	res := a.res
	if len(m.rules) > 0 || !m.anyResource {
		res = s.matchRules(m.rules, m.matchPolicy, a)
	}
	if res == nil {
		return nil, nil
	}
	if m.err != nil {
		return nil, apierrors.NewInternalError(m.err)
	}
	if nsErr != nil {
		return nil, nsErr
	}
	return res, nil
}

func matchLabels(sel labels.Selector, obj api.Object) bool {
	return obj != nil && sel.Matches(labels.Set(obj.GetLabels()))
}

// matchNamespaceSelector is kube's namespace predicate: cluster-scoped
// objects other than namespaces always match; a namespace is matched by
// its own labels (the new ones when it is written); anything else by its
// namespace's labels. A namespace that does not exist is its 404.
func (s *Server) matchNamespaceSelector(ctx context.Context, m *matcher, a *attributes) (bool, error) {
	if a.res != api.Namespaces && a.namespace == "" {
		return true, nil
	}
	if m.err != nil {
		return false, apierrors.NewInternalError(m.err)
	}
	if m.nsSel.Empty() {
		return true, nil
	}
	if a.res == api.Namespaces && a.subresource == "" && (a.op == opCreate || a.op == opUpdate) {
		return m.nsSel.Matches(labels.Set(a.obj.GetLabels())), nil
	}
	name := a.namespace
	if a.res == api.Namespaces {
		name = a.name
	}
	ns, err := s.namespace(ctx, name)
	if apierrors.IsNotFound(err) {
		return false, err
	}
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	return m.nsSel.Matches(labels.Set(ns.Labels)), nil
}

// matchRules finds the first rule that matches a's resource (and name,
// for a rule that lists names) and returns that resource; with
// matchPolicy Equivalent, then the first that matches the same group and
// resource in another served version.
func (s *Server) matchRules(rules []rule, mp *admissionregistrationv1.MatchPolicyType, a *attributes) *api.Resource {
	for _, r := range rules {
		if ruleMatches(r.RuleWithOperations, a, a.res) && nameMatches(r.names, a.name) {
			return a.res
		}
	}
	if mp == nil || *mp != admissionregistrationv1.Equivalent {
		return nil
	}
	for _, r := range rules {
		for _, eq := range s.serving().resources {
			if eq != a.res && eq.Group == a.res.Group && eq.Plural == a.res.Plural &&
				ruleMatches(r.RuleWithOperations, a, eq) && nameMatches(r.names, a.name) {
				return eq
			}
		}
	}
	return nil
}

func nameMatches(names []string, name string) bool {
	return len(names) == 0 || slices.Contains(names, name)
}

// ruleMatches is kube's rules.Matcher: operation, group, version,
// resource and subresource ("pods", "pods/status", "*", "*/*", "*/status"),
// and scope, for the request a seen as a request for res.
func ruleMatches(r admissionregistrationv1.RuleWithOperations, a *attributes, res *api.Resource) bool {
	return scopeMatches(r.Scope, a) &&
		(exactOrWildcard(opStrings(r.Operations), string(a.op))) &&
		exactOrWildcard(r.APIGroups, res.Group) &&
		exactOrWildcard(r.APIVersions, res.Version) &&
		resourceMatches(r.Resources, res.Plural, a.subresource)
}

func opStrings(ops []admissionregistrationv1.OperationType) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = string(op)
	}
	return out
}

func exactOrWildcard(items []string, v string) bool {
	for _, it := range items {
		if it == "*" || it == v {
			return true
		}
	}
	return false
}

func resourceMatches(rules []string, plural, sub string) bool {
	for _, rs := range rules {
		res, rsub, _ := strings.Cut(rs, "/")
		if (res == "*" || res == plural) && (rsub == "*" || rsub == sub) {
			return true
		}
	}
	return false
}

// scopeMatches: Namespaced matches objects in a namespace, Cluster the
// others and namespaces themselves, as kube's scope predicate.
func scopeMatches(scope *admissionregistrationv1.ScopeType, a *attributes) bool {
	if scope == nil || *scope == admissionregistrationv1.AllScopes {
		return true
	}
	inNamespace := a.res != api.Namespaces && a.namespace != ""
	switch *scope {
	case admissionregistrationv1.NamespacedScope:
		return inNamespace
	case admissionregistrationv1.ClusterScope:
		return !inNamespace
	}
	return false
}
