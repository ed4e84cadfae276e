package apiserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/auth/authorizer"
	"github.com/minictl/minictl/auth/rbac"
	"github.com/minictl/minictl/auth/rbac/bootstrap"
	"github.com/minictl/minictl/auth/user"
)

// rbacPolicy is the RBAC index as of the last changes the four RBAC
// watch caches saw. A request finds it current by comparing revisions,
// without a lock, and only a change to a role or binding rebuilds it, so
// that authorizing costs a few map lookups and never a list.
type rbacPolicy struct {
	current atomic.Pointer[rbacSnapshot]
	build   sync.Mutex // one rebuild at a time
}

type rbacSnapshot struct {
	rvs   [4]int64
	index *rbac.Index
}

var rbacResources = [4]*api.Resource{api.Roles, api.ClusterRoles, api.RoleBindings, api.ClusterRoleBindings}

// contentRV is the revision of the cache's last change to its objects:
// its last event's, or, with none since it was filled, the fill's. Unlike
// currentRV it does not move with etcd's progress notifications, which
// change nothing the RBAC index is built from.
func (c *watchCache) contentRV() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.count > 0 {
		return c.eventAt(c.count - 1).rv
	}
	return c.oldest
}

// rbacIndex returns the index of the roles and bindings the watch caches
// hold now.
func (s *Server) rbacIndex() *rbac.Index {
	sv := s.serving()
	rvs := func() [4]int64 {
		var rvs [4]int64
		for i, res := range rbacResources {
			if c := sv.caches[res]; c != nil {
				rvs[i] = c.contentRV()
			}
		}
		return rvs
	}
	p := &s.rbacPolicy
	if cur := p.current.Load(); cur != nil && cur.rvs == rvs() && cur.rvs != [4]int64{} {
		return cur.index
	}
	p.build.Lock()
	defer p.build.Unlock()
	if cur := p.current.Load(); cur != nil && cur.rvs == rvs() && cur.rvs != [4]int64{} {
		return cur.index // another request rebuilt it meanwhile
	}
	var pol rbac.Policy
	var built [4]int64
	for i, res := range rbacResources {
		c := sv.caches[res]
		if c == nil {
			continue
		}
		built[i] = c.contentRV() // before the list: a change in between rebuilds again
		items, _ := c.list(&filter{})
		for _, it := range items {
			switch o := it.object().(type) {
			case *rbacv1.Role:
				pol.Roles = append(pol.Roles, o)
			case *rbacv1.ClusterRole:
				pol.ClusterRoles = append(pol.ClusterRoles, o)
			case *rbacv1.RoleBinding:
				pol.RoleBindings = append(pol.RoleBindings, o)
			case *rbacv1.ClusterRoleBinding:
				pol.ClusterRoleBindings = append(pol.ClusterRoleBindings, o)
			}
		}
	}
	snap := &rbacSnapshot{rvs: built, index: rbac.NewIndex(pol)}
	p.current.Store(snap)
	return snap.index
}

// escalationAllowed: system:masters, and the server's own callers (no
// user), may grant anything, as kube's EscalationAllowed.
func escalationAllowed(ctx context.Context) (*user.Info, bool) {
	u, ok := user.From(ctx)
	return u, !ok || u.InGroup(user.SystemPrivilegedGroup)
}

// confirmRBACWrite refuses a write of a role that grants more than its
// writer holds, or of a binding to a role whose permissions its writer
// lacks, as kube's RBAC storage does; old is nil on create. The writer
// may still do so with the escalate verb on the role, or the bind verb on
// the role a binding refers to. Without the RBAC mode, nothing is
// checked: there is nobody to escalate past.
func (s *Server) confirmRBACWrite(ctx context.Context, res *api.Resource, obj, old api.Object) error {
	if s.rbac == nil {
		return nil
	}
	switch res {
	case api.Roles, api.ClusterRoles, api.RoleBindings, api.ClusterRoleBindings:
	default:
		return nil
	}
	u, allowed := escalationAllowed(ctx)
	if allowed || (old != nil && onlyGCFields(obj, old)) {
		return nil
	}
	switch o := obj.(type) {
	case *rbacv1.Role:
		return s.confirmRole(ctx, u, res, o.Namespace, o.Name, o.Rules, false)
	case *rbacv1.ClusterRole:
		if err := s.confirmRole(ctx, u, res, "", o.Name, o.Rules, false); err != nil {
			return err
		}
		// An aggregationRule can gather anything: setting one takes
		// cluster-admin's permissions.
		if o.AggregationRule != nil && (old == nil || !equality.Semantic.DeepEqual(o.AggregationRule, old.(*rbacv1.ClusterRole).AggregationRule)) {
			return s.confirmRole(ctx, u, res, "", o.Name, fullAuthority, true)
		}
	case *rbacv1.RoleBinding:
		return s.confirmBinding(ctx, u, res, o.Namespace, o.Name, o.RoleRef)
	case *rbacv1.ClusterRoleBinding:
		return s.confirmBinding(ctx, u, res, "", o.Name, o.RoleRef)
	}
	return nil
}

// fullAuthority is cluster-admin's rules.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

func (s *Server) confirmRole(ctx context.Context, u *user.Info, res *api.Resource, namespace, name string, rules []rbacv1.PolicyRule, aggregation bool) error {
	if s.allowed(ctx, authorizer.Attributes{
		User: u, Verb: "escalate", ResourceRequest: true,
		APIGroup: rbacv1.GroupName, APIVersion: "v1", Resource: res.Plural, Namespace: namespace, Name: name,
	}) {
		return nil
	}
	if err := s.rbac.ConfirmNoEscalation(u, namespace, rules); err != nil {
		if aggregation {
			err = errors.New("must have cluster-admin privileges to use the aggregationRule")
		}
		return apierrors.NewForbidden(res.GroupResource(), name, err)
	}
	return nil
}

func (s *Server) confirmBinding(ctx context.Context, u *user.Info, res *api.Resource, namespace, name string, ref rbacv1.RoleRef) error {
	a := authorizer.Attributes{
		User: u, Verb: "bind", ResourceRequest: true,
		APIGroup: ref.APIGroup, APIVersion: "v1", Namespace: namespace, Name: ref.Name,
	}
	switch ref.Kind {
	case "ClusterRole":
		a.Resource = "clusterroles"
	case "Role":
		a.Resource = "roles"
	}
	if s.allowed(ctx, a) {
		return nil
	}
	rules, err := s.rbac.RoleRules(ref, namespace)
	if err != nil {
		return err
	}
	if err := s.rbac.ConfirmNoEscalation(u, namespace, rules); err != nil {
		return apierrors.NewForbidden(res.GroupResource(), name, err)
	}
	return nil
}

func (s *Server) allowed(ctx context.Context, a authorizer.Attributes) bool {
	d, _, _ := s.authorizer.Authorize(ctx, a)
	return d == authorizer.Allow
}

// onlyGCFields: an update that changes nothing but metadata
// the garbage collector and the server keep (owner references,
// finalizers, managedFields) grants nothing new, as kube's
// IsOnlyMutatingGCFields.
func onlyGCFields(obj, old api.Object) bool {
	a, b := obj.DeepCopyObject().(api.Object), old.DeepCopyObject().(api.Object)
	for _, o := range []api.Object{a, b} {
		o.SetOwnerReferences(nil)
		o.SetFinalizers(nil)
		o.SetManagedFields(nil)
		o.SetResourceVersion("")
		o.SetGeneration(0)
	}
	return equality.Semantic.DeepEqual(a, b)
}

// reconcileBootstrapPolicy creates the bootstrap roles and bindings that
// are missing, and adds the rules and subjects a bootstrap object lacks to
// the objects whose autoupdate annotation is "true", as kube-apiserver's
// rbac/bootstrap-roles does at every start. It takes nothing away.
func (s *Server) reconcileBootstrapPolicy(ctx context.Context) error {
	var errs []error
	for _, r := range bootstrap.ClusterRoles() {
		errs = append(errs, s.reconcileRBACObject(ctx, api.ClusterRoles, r))
	}
	for _, b := range bootstrap.ClusterRoleBindings() {
		errs = append(errs, s.reconcileRBACObject(ctx, api.ClusterRoleBindings, b))
	}
	for _, r := range bootstrap.Roles() {
		errs = append(errs, s.reconcileRBACObject(ctx, api.Roles, r))
	}
	for _, b := range bootstrap.RoleBindings() {
		errs = append(errs, s.reconcileRBACObject(ctx, api.RoleBindings, b))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return s.waitRBACCaches(ctx)
}

// waitRBACCaches waits until the watch caches the authorizer reads (see
// rbacIndex) hold every write made so far: the bootstrap policy is in
// force once the server says it is ready, as kube-apiserver is ready only
// once its authorizer's informers have synced. Without it, a request just
// after start could find a binding whose role its cache had not taken in.
func (s *Server) waitRBACCaches(ctx context.Context) error {
	rev, err := s.store.Revision(ctx)
	if err != nil {
		return err
	}
	sv := s.serving()
	for _, res := range rbacResources {
		if c := sv.caches[res]; c != nil {
			if err := c.waitFresh(ctx, rev); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Server) reconcileRBACObject(ctx context.Context, res *api.Resource, want api.Object) error {
	rs := s.serving().stores[res]
	if rs == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.requestTimeout)
	defer cancel()
	_, err := s.createObject(ctx, rs, want.DeepCopyObject().(api.Object), createOptions{manager: "kube-apiserver"})
	if err == nil || !isAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create %s %s: %w", res.Singular, want.GetName(), err)
		}
		return nil
	}
	_, err = s.updateObject(ctx, rs, want.GetNamespace(), want.GetName(), updateOptions{mode: modeMain, manager: "kube-apiserver"}, func(cur api.Object) (api.Object, error) {
		if cur.GetAnnotations()[bootstrap.AutoUpdateAnnotation] != "true" {
			return nil, errNoChange
		}
		if !addMissing(cur, want) {
			return nil, errNoChange
		}
		return cur, nil
	})
	if err != nil && !errors.Is(err, errNoChange) {
		return fmt.Errorf("reconcile %s %s: %w", res.Singular, want.GetName(), err)
	}
	return nil
}

// errNoChange ends an update that has nothing to write.
var errNoChange = errors.New("nothing to change")

// addMissing adds to cur the rules, subjects, labels and annotations of
// want it lacks; false if it lacks none. An aggregated ClusterRole's
// rules are the aggregation controller's, and are left alone.
func addMissing(cur, want api.Object) bool {
	changed := false
	labels, annotations := cur.GetLabels(), cur.GetAnnotations()
	for k, v := range want.GetLabels() {
		if _, ok := labels[k]; !ok {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k], changed = v, true
		}
	}
	for k, v := range want.GetAnnotations() {
		if _, ok := annotations[k]; !ok {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[k], changed = v, true
		}
	}
	cur.SetLabels(labels)
	cur.SetAnnotations(annotations)
	addRules := func(have *[]rbacv1.PolicyRule, want []rbacv1.PolicyRule) {
		if ok, missing := rbac.Covers(*have, want); !ok {
			*have, changed = append(*have, missing...), true
		}
	}
	addSubjects := func(have *[]rbacv1.Subject, want []rbacv1.Subject) {
		for _, s := range want {
			if !containsSubject(*have, s) {
				*have, changed = append(*have, s), true
			}
		}
	}
	switch c := cur.(type) {
	case *rbacv1.ClusterRole:
		w := want.(*rbacv1.ClusterRole)
		if w.AggregationRule != nil {
			if c.AggregationRule == nil {
				c.AggregationRule, changed = w.AggregationRule.DeepCopy(), true
			}
			break
		}
		addRules(&c.Rules, w.Rules)
	case *rbacv1.Role:
		addRules(&c.Rules, want.(*rbacv1.Role).Rules)
	case *rbacv1.ClusterRoleBinding:
		addSubjects(&c.Subjects, want.(*rbacv1.ClusterRoleBinding).Subjects)
	case *rbacv1.RoleBinding:
		addSubjects(&c.Subjects, want.(*rbacv1.RoleBinding).Subjects)
	}
	return changed
}

func containsSubject(list []rbacv1.Subject, s rbacv1.Subject) bool {
	for _, h := range list {
		if h.Kind == s.Kind && h.Name == s.Name && h.Namespace == s.Namespace {
			return true
		}
	}
	return false
}
