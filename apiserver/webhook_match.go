package apiserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/internal/webhook"
)

// hook is one webhook of a configuration, with its selectors parsed.
// Hooks are built from the watch cache's configurations and shared by
// every request until a configuration changes; they are never modified.
type hook struct {
	api.Webhook
	config   string // the configuration's name
	uid      string // config/index: tells the webhooks apart for reinvocation
	mutating bool
	nsSel    labels.Selector
	objSel   labels.Selector
	// err is why the hook's selectors do not parse (they were valid when
	// written, so this is not expected); a request the hook matches fails
	// with it, as kube's does.
	err error
}

func (h *hook) failurePolicy() admissionregistrationv1.FailurePolicyType {
	if p := *h.FailurePolicy; p != nil {
		return *p
	}
	return admissionregistrationv1.Fail
}

// hookSet is the webhooks of one kind of configuration as of a revision of
// its watch cache.
type hookSet struct {
	mu    sync.Mutex
	rv    int64   // guarded by mu: the cache's revision hooks reflect
	hooks []*hook // guarded by mu
}

// webhookHooks returns the webhooks of every mutating (or validating)
// configuration, in the order kube calls them: configurations by name,
// then each configuration's webhooks in order. They come from the watch
// cache; no request reads etcd for them.
func (s *Server) webhookHooks(mutating bool) []*hook {
	res, set := api.ValidatingWebhookConfigurations, &s.validatingHooks
	if mutating {
		res, set = api.MutatingWebhookConfigurations, &s.mutatingHooks
	}
	cache := s.serving().caches[res]
	if cache == nil {
		return nil // not served: no webhooks
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	if rv := cache.currentRV(); rv == set.rv && rv != 0 {
		return set.hooks
	}
	items, rv := cache.list(&filter{})
	var hooks []*hook
	for _, it := range items {
		var views []api.Webhook
		switch c := it.obj.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			views = api.MutatingWebhooks(c)
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			views = api.ValidatingWebhooks(c)
		}
		for i, v := range views {
			h := &hook{Webhook: v, config: it.obj.GetName(), uid: fmt.Sprintf("%s/%d", it.obj.GetName(), i), mutating: mutating}
			h.nsSel, h.err = selectorOf(*v.NamespaceSelector)
			if h.err == nil {
				h.objSel, h.err = selectorOf(*v.ObjectSelector)
			}
			hooks = append(hooks, h)
		}
	}
	set.rv, set.hooks = rv, hooks
	return hooks
}

func selectorOf(ls *metav1.LabelSelector) (labels.Selector, error) {
	if ls == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(ls)
}

// exemptFromWebhooks: the configurations of admission are not sent to
// webhooks, so that a broken webhook can always be removed, as in kube.
func exemptFromWebhooks(res *api.Resource) bool {
	return res == api.MutatingWebhookConfigurations || res == api.ValidatingWebhookConfigurations
}

// invocation is a webhook matched to a request: the resource and kind it
// is called for, which differ from the request's when the webhook matched
// an equivalent resource (matchPolicy Equivalent).
type invocation struct {
	hook *hook
	res  *api.Resource
}

// shouldCall decides whether h is called for a, as kube's
// generic.Webhook.ShouldCallHook: namespaceSelector, objectSelector, then
// the rules, for the request's resource and, with matchPolicy Equivalent,
// for the same resource in another served version. A selector that
// cannot be evaluated is an error only for a webhook whose rules match.
func (s *Server) shouldCall(ctx context.Context, h *hook, a *attributes) (*invocation, error) {
	nsMatch, nsErr := s.matchNamespaceSelector(ctx, h, a)
	if !nsMatch && nsErr == nil {
		return nil, nil
	}
	if h.err == nil && !h.objSel.Empty() && !matchLabels(h.objSel, a.obj) && !matchLabels(h.objSel, a.old) {
		return nil, nil
	}
	inv := s.matchRules(h, a)
	if inv == nil {
		return nil, nil
	}
	if h.err != nil {
		return nil, apierrors.NewInternalError(h.err)
	}
	if nsErr != nil {
		return nil, nsErr
	}
	return inv, nil
}

func matchLabels(sel labels.Selector, obj api.Object) bool {
	return obj != nil && sel.Matches(labels.Set(obj.GetLabels()))
}

// matchNamespaceSelector is kube's namespace predicate: cluster-scoped
// objects other than namespaces always match; a namespace is matched by
// its own labels (the new ones when it is written); anything else by its
// namespace's labels. A namespace that does not exist is its 404.
func (s *Server) matchNamespaceSelector(ctx context.Context, h *hook, a *attributes) (bool, error) {
	if a.res != api.Namespaces && a.namespace == "" {
		return true, nil
	}
	if h.err != nil {
		return false, apierrors.NewInternalError(h.err)
	}
	if h.nsSel.Empty() {
		return true, nil
	}
	if a.res == api.Namespaces && a.subresource == "" && (a.op == opCreate || a.op == opUpdate) {
		return h.nsSel.Matches(labels.Set(a.obj.GetLabels())), nil
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
	return h.nsSel.Matches(labels.Set(ns.Labels)), nil
}

// matchRules finds the first rule of h that matches a's resource; with
// matchPolicy Equivalent, then the first that matches the same group and
// resource in another served version.
func (s *Server) matchRules(h *hook, a *attributes) *invocation {
	for _, r := range *h.Rules {
		if ruleMatches(r, a, a.res) {
			return &invocation{hook: h, res: a.res}
		}
	}
	if mp := *h.MatchPolicy; mp == nil || *mp != admissionregistrationv1.Equivalent {
		return nil
	}
	for _, r := range *h.Rules {
		for _, eq := range s.serving().resources {
			if eq != a.res && eq.Group == a.res.Group && eq.Plural == a.res.Plural && ruleMatches(r, a, eq) {
				return &invocation{hook: h, res: eq}
			}
		}
	}
	return nil
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

// resolveService finds where a Service's port is served from its
// Endpoints, as kube-apiserver's endpoint resolver: the service port
// numbered port, then a ready address of the endpoint port of the same
// name. It reads the watch caches.
func (s *Server) resolveService(_ context.Context, namespace, name string, port int32) (string, error) {
	v := s.serving()
	svcObj, _ := v.caches[api.Services].get(v.stores[api.Services].key(namespace, name))
	if svcObj == nil {
		return "", apierrors.NewNotFound(api.Services.GroupResource(), name)
	}
	svc := svcObj.obj.(*corev1.Service)
	var svcPort *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			svcPort = &svc.Spec.Ports[i]
		}
	}
	if svcPort == nil {
		return "", fmt.Errorf("service %s/%s has no port %d", namespace, name, port)
	}
	epObj, _ := v.caches[api.Endpoints].get(v.stores[api.Endpoints].key(namespace, name))
	if epObj == nil {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
	}
	for _, ss := range epObj.obj.(*corev1.Endpoints).Subsets {
		for _, p := range ss.Ports {
			if p.Name != svcPort.Name || len(ss.Addresses) == 0 {
				continue
			}
			addr := ss.Addresses[rand.N(len(ss.Addresses))]
			return webhook.JoinHostPort(addr.IP, p.Port), nil
		}
	}
	return "", apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
}

// kindOf is the group, version and kind of res's objects.
func kindOf(res *api.Resource) schema.GroupVersionKind { return res.GroupVersion().WithKind(res.Kind) }
