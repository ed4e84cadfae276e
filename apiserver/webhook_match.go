package apiserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/internal/webhook"
)

// hook is one webhook of a configuration, with its matcher and match
// conditions compiled. Hooks are built from the watch cache's
// configurations and shared by every request until a configuration
// changes; they are never modified.
type hook struct {
	api.Webhook
	config     string // the configuration's name
	uid        string // config/index: tells the webhooks apart for reinvocation
	mutating   bool
	matcher    matcher
	conditions celConditions
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
		switch c := it.object().(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			views = api.MutatingWebhooks(c)
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			views = api.ValidatingWebhooks(c)
		}
		for i, v := range views {
			rules := make([]rule, len(*v.Rules))
			for i, r := range *v.Rules {
				rules[i] = rule{RuleWithOperations: r}
			}
			hooks = append(hooks, &hook{
				Webhook: v, config: it.object().GetName(), uid: fmt.Sprintf("%s/%d", it.object().GetName(), i), mutating: mutating,
				matcher:    newMatcher(rules, nil, *v.MatchPolicy, *v.NamespaceSelector, *v.ObjectSelector),
				conditions: compileConditions(api.MatchConditionCEL, v.MatchConditions),
			})
		}
	}
	set.rv, set.hooks = rv, hooks
	return hooks
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
// generic.Webhook.ShouldCallHook: the matcher, then the match conditions.
// A condition that cannot be evaluated refuses the request unless the
// webhook's failurePolicy is Ignore.
func (s *Server) shouldCall(ctx context.Context, h *hook, a *attributes) (*invocation, error) {
	res, err := s.matches(ctx, &h.matcher, a)
	if res == nil || err != nil {
		return nil, err
	}
	inv := &invocation{hook: h, res: res}
	if h.conditions.empty() {
		return inv, nil
	}
	in, err := s.celInput(inv.res, a, h.mutating && a.op == opCreate && a.generated)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	ok, err := h.conditions.match(ctx, in, h.failurePolicy(), nil)
	if err != nil {
		s.log.Warn("admission webhook: failed evaluating match conditions, failing closed", "webhook", h.Name, "error", err)
		return nil, apierrors.NewForbidden(a.res.GroupResource(), a.name, err)
	}
	if !ok {
		return nil, nil
	}
	return inv, nil
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
	svc := svcObj.object().(*corev1.Service)
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
	for _, ss := range epObj.object().(*corev1.Endpoints).Subsets {
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
