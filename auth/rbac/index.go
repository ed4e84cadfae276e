// Package rbac is kube's RBAC authorizer: Roles and ClusterRoles say what
// may be done, RoleBindings and ClusterRoleBindings grant that to users,
// groups and ServiceAccounts. A request is allowed when some binding to
// its user (or one of the user's groups) refers to a role with a rule that
// allows it; nothing is ever denied outright, so the next authorizer may
// still allow what RBAC does not.
//
// The policy is read into an Index, which finds the bindings of a user by
// subject in a map, so that a request costs a few map lookups and the
// rules of the user's own roles, however many bindings the cluster has.
package rbac

import (
	"cmp"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/auth/user"
)

// Policy is a cluster's RBAC objects, as listed.
type Policy struct {
	Roles               []*rbacv1.Role
	ClusterRoles        []*rbacv1.ClusterRole
	RoleBindings        []*rbacv1.RoleBinding
	ClusterRoleBindings []*rbacv1.ClusterRoleBinding
}

// Index is a Policy ready to answer: roles by name, bindings by subject.
// It is never modified once built, so every request may read it at once.
type Index struct {
	roles        map[string]*rbacv1.Role // namespace/name
	clusterRoles map[string]*rbacv1.ClusterRole
	// cluster holds the ClusterRoleBindings by subject key; namespaced
	// the RoleBindings of each namespace by subject key.
	cluster    map[string][]*binding
	namespaced map[string]map[string][]*binding
}

// binding is a RoleBinding or ClusterRoleBinding, as the index keeps it.
type binding struct {
	kind      string // "RoleBinding" or "ClusterRoleBinding"
	name      string
	namespace string // the RoleBinding's; "" for a ClusterRoleBinding
	ref       rbacv1.RoleRef
	subjects  []rbacv1.Subject
}

// Subject keys: a user (ServiceAccounts are users named
// system:serviceaccount:<ns>:<name>) or a group.
func userKey(name string) string  { return "u:" + name }
func groupKey(name string) string { return "g:" + name }

// subjectKey is the key s is found under; "" for a subject that can match
// nobody (a ServiceAccount without a namespace in a ClusterRoleBinding).
func subjectKey(s rbacv1.Subject, bindingNamespace string) string {
	switch s.Kind {
	case rbacv1.UserKind:
		return userKey(s.Name)
	case rbacv1.GroupKind:
		return groupKey(s.Name)
	case rbacv1.ServiceAccountKind:
		ns := cmp.Or(s.Namespace, bindingNamespace)
		if ns == "" {
			return ""
		}
		return userKey(user.ServiceAccountUsername(ns, s.Name))
	}
	return ""
}

// NewIndex indexes p.
func NewIndex(p Policy) *Index {
	x := &Index{
		roles:        make(map[string]*rbacv1.Role, len(p.Roles)),
		clusterRoles: make(map[string]*rbacv1.ClusterRole, len(p.ClusterRoles)),
		cluster:      map[string][]*binding{},
		namespaced:   map[string]map[string][]*binding{},
	}
	for _, r := range p.Roles {
		x.roles[r.Namespace+"/"+r.Name] = r
	}
	for _, r := range p.ClusterRoles {
		x.clusterRoles[r.Name] = r
	}
	for _, crb := range p.ClusterRoleBindings {
		add(x.cluster, &binding{kind: "ClusterRoleBinding", name: crb.Name, ref: crb.RoleRef, subjects: crb.Subjects})
	}
	for _, rb := range p.RoleBindings {
		m := x.namespaced[rb.Namespace]
		if m == nil {
			m = map[string][]*binding{}
			x.namespaced[rb.Namespace] = m
		}
		add(m, &binding{kind: "RoleBinding", name: rb.Name, namespace: rb.Namespace, ref: rb.RoleRef, subjects: rb.Subjects})
	}
	return x
}

// add files b under each of its subjects' keys, once per key.
func add(m map[string][]*binding, b *binding) {
	var seen []string
	for _, s := range b.subjects {
		k := subjectKey(s, b.namespace)
		if k == "" || slices.Contains(seen, k) {
			continue
		}
		seen = append(seen, k)
		m[k] = append(m[k], b)
	}
}

// bindingsFor returns the bindings in m to u or one of its groups, each
// once, in name order (so that the binding an allow names is always the
// same one).
func bindingsFor(m map[string][]*binding, u *user.Info) []*binding {
	if len(m) == 0 {
		return nil
	}
	bs := m[userKey(u.Name)]
	grown := false
	for _, g := range u.Groups {
		more := m[groupKey(g)]
		if len(more) == 0 {
			continue
		}
		if !grown {
			bs = slices.Clone(bs)
			grown = true
		}
		bs = append(bs, more...)
	}
	if grown {
		slices.SortFunc(bs, func(a, b *binding) int { return cmp.Compare(a.name, b.name) })
		bs = slices.Compact(bs)
	}
	return bs
}

// appliesTo returns the first subject of b that u is, as kube names it
// in an allow's reason.
func (b *binding) appliesTo(u *user.Info) (rbacv1.Subject, bool) {
	for _, s := range b.subjects {
		switch k := subjectKey(s, b.namespace); {
		case k == "":
		case k == userKey(u.Name):
			return s, true
		case s.Kind == rbacv1.GroupKind && u.InGroup(s.Name):
			return s, true
		}
	}
	return rbacv1.Subject{}, false
}

// String describes b granting to s as kube's RBAC authorizer does:
// ClusterRoleBinding "x" of ClusterRole "y" to User "z", and
// RoleBinding "name/namespace" of Role "y" to ServiceAccount "name/namespace".
func (b *binding) describe(s rbacv1.Subject) string {
	name := b.name
	if b.namespace != "" {
		name += "/" + b.namespace
	}
	subject := fmt.Sprintf("%s %q", s.Kind, s.Name)
	if s.Kind == rbacv1.ServiceAccountKind {
		subject = fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+cmp.Or(s.Namespace, b.namespace))
	}
	return fmt.Sprintf("%s %q of %s %q to %s", b.kind, name, b.ref.Kind, b.ref.Name, subject)
}

// RoleRules returns the rules of the role ref names, as a binding in
// namespace ("" for a ClusterRoleBinding) refers to it; an error (kube's
// NotFound) when it does not exist.
func (x *Index) RoleRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "ClusterRole":
		if r, ok := x.clusterRoles[ref.Name]; ok {
			return r.Rules, nil
		}
		return nil, apierrors.NewNotFound(rbacv1.Resource("clusterroles"), ref.Name)
	case "Role":
		if r, ok := x.roles[namespace+"/"+ref.Name]; ok && namespace != "" {
			return r.Rules, nil
		}
		return nil, apierrors.NewNotFound(rbacv1.Resource("roles"), ref.Name)
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

// visit calls fn with each rule granted to u at the cluster scope and, if
// namespace is set, in namespace, with the binding and subject that grant
// it, until fn returns false. A binding to a missing role is passed to
// onErr instead.
func (x *Index) visit(u *user.Info, namespace string, fn func(b *binding, s rbacv1.Subject, rule *rbacv1.PolicyRule) bool, onErr func(error)) {
	if u == nil {
		return
	}
	walk := func(bs []*binding, ns string) bool {
		for _, b := range bs {
			s, ok := b.appliesTo(u)
			if !ok {
				continue
			}
			rules, err := x.RoleRules(b.ref, ns)
			if err != nil {
				onErr(err)
				continue
			}
			for i := range rules {
				if !fn(b, s, &rules[i]) {
					return false
				}
			}
		}
		return true
	}
	if !walk(bindingsFor(x.cluster, u), "") || namespace == "" {
		return
	}
	walk(bindingsFor(x.namespaced[namespace], u), namespace)
}
