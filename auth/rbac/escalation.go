package rbac

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/minictl/minictl/auth/user"
)

// Escalation prevention, as kube's: whoever creates or updates a role may
// grant in it only what they hold themselves (unless they may "escalate"
// it), and whoever binds a role must hold everything it grants (unless
// they may "bind" it). Otherwise RBAC's write permissions would be
// permission to do anything.

// Covers reports whether owner grants everything servant grants, and
// returns what it lacks. Each servant rule is broken into its single
// verb, group, resource and name pieces, and every piece must be covered
// by one owner rule.
func Covers(owner, servant []rbacv1.PolicyRule) (bool, []rbacv1.PolicyRule) {
	var missing []rbacv1.PolicyRule
	for _, rule := range servant {
		for _, piece := range breakdown(rule) {
			if !slices.ContainsFunc(owner, func(o rbacv1.PolicyRule) bool { return ruleCovers(o, piece) }) {
				missing = append(missing, piece)
			}
		}
	}
	return len(missing) == 0, missing
}

// breakdown splits a rule into rules of one verb and one group, resource
// and name (or URL) each.
func breakdown(rule rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, group := range rule.APIGroups {
		for _, resource := range rule.Resources {
			for _, verb := range rule.Verbs {
				if len(rule.ResourceNames) == 0 {
					out = append(out, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: []string{verb}})
				}
				for _, name := range rule.ResourceNames {
					out = append(out, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, ResourceNames: []string{name}, Verbs: []string{verb}})
				}
			}
		}
	}
	for _, url := range rule.NonResourceURLs {
		for _, verb := range rule.Verbs {
			out = append(out, rbacv1.PolicyRule{NonResourceURLs: []string{url}, Verbs: []string{verb}})
		}
	}
	return out
}

// ruleCovers is kube's: owner's verbs, groups, resources (where "*"
// covers all, and "*/sub" every resource's sub), names and URLs (where a
// trailing "*" covers every URL it prefixes) each include sub's.
func ruleCovers(owner, sub rbacv1.PolicyRule) bool {
	names := len(owner.ResourceNames) == 0 || (len(sub.ResourceNames) > 0 && hasAll(owner.ResourceNames, sub.ResourceNames))
	return (slices.Contains(owner.Verbs, rbacv1.VerbAll) || hasAll(owner.Verbs, sub.Verbs)) &&
		(slices.Contains(owner.APIGroups, rbacv1.APIGroupAll) || hasAll(owner.APIGroups, sub.APIGroups)) &&
		resourcesCover(owner.Resources, sub.Resources) &&
		urlsCover(owner.NonResourceURLs, sub.NonResourceURLs) &&
		names
}

func hasAll(set, items []string) bool {
	for _, it := range items {
		if !slices.Contains(set, it) {
			return false
		}
	}
	return true
}

func resourcesCover(set, resources []string) bool {
	if slices.Contains(set, rbacv1.ResourceAll) {
		return true
	}
	for _, r := range resources {
		if slices.Contains(set, r) {
			continue
		}
		_, sub, ok := strings.Cut(r, "/")
		if !ok || !slices.Contains(set, "*/"+sub) {
			return false
		}
	}
	return true
}

func urlsCover(set, urls []string) bool {
	for _, u := range urls {
		if !slices.ContainsFunc(set, func(o string) bool {
			prefix, wild := strings.CutSuffix(o, "*")
			return o == u || (wild && strings.HasPrefix(u, prefix))
		}) {
			return false
		}
	}
	return true
}

// ConfirmNoEscalation returns nil when u holds, in namespace ("" for the
// cluster scope), every rule of rules, and otherwise kube's error listing
// what u lacks.
func (az *Authorizer) ConfirmNoEscalation(u *user.Info, namespace string, rules []rbacv1.PolicyRule) error {
	owner, errs := az.Rules(u, namespace)
	ok, missing := Covers(owner, rules)
	if ok {
		return nil
	}
	var name string
	var groups []string
	if u != nil {
		name, groups = u.Name, u.Groups
	}
	descriptions := compactStrings(missing)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", name, groups, strings.Join(descriptions, "\n"))
	if len(errs) > 0 {
		msg += fmt.Sprintf("; resolution errors: %v", errs)
	}
	return fmt.Errorf("%s", msg)
}

// compactStrings describes rules as kube lists missing permissions: the
// simple rules of one group and resource merged into one with all their
// verbs, each printed as {APIGroups:["g"], Resources:["r"], Verbs:["v"]},
// sorted and without repeats.
func compactStrings(rules []rbacv1.PolicyRule) []string {
	type key struct{ group, resource string }
	merged := map[key]*rbacv1.PolicyRule{}
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		if len(r.ResourceNames) == 0 && len(r.NonResourceURLs) == 0 && len(r.APIGroups) == 1 && len(r.Resources) == 1 {
			k := key{r.APIGroups[0], r.Resources[0]}
			if m, ok := merged[k]; ok {
				if !slices.Contains(m.Verbs, r.Verbs[0]) {
					m.Verbs = append(m.Verbs, r.Verbs...)
				}
				continue
			}
			r := r
			r.Verbs = slices.Clone(r.Verbs)
			merged[k] = &r
			out = append(out, r) // placeholder; replaced below
			continue
		}
		out = append(out, r)
	}
	var descs []string
	for _, r := range out {
		if len(r.ResourceNames) == 0 && len(r.NonResourceURLs) == 0 && len(r.APIGroups) == 1 && len(r.Resources) == 1 {
			r = *merged[key{r.APIGroups[0], r.Resources[0]}]
		}
		descs = append(descs, CompactString(r))
	}
	slices.Sort(descs)
	return slices.Compact(descs)
}

// CompactString prints a rule with only the fields it sets, as kube does.
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	field := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, v))
		}
	}
	field("APIGroups", r.APIGroups)
	field("Resources", r.Resources)
	field("NonResourceURLs", r.NonResourceURLs)
	field("ResourceNames", r.ResourceNames)
	field("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}
