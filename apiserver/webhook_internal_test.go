package apiserver

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/internal/webhook"
)

// TestWebhookDryRunSideEffects: a dry run is refused with kube's 400 by a
// webhook that may have side effects (Unknown, Some: only older
// configurations have them, v1 refuses them), and not by one that has
// none; the webhook is not called.
func TestWebhookDryRunSideEffects(t *testing.T) {
	s := &Server{webhooks: webhook.NewClient(webhook.Options{})}
	url := "https://127.0.0.1:1/never"
	for _, se := range []admissionregistrationv1.SideEffectClass{
		admissionregistrationv1.SideEffectClassSome, admissionregistrationv1.SideEffectClassUnknown,
		admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.SideEffectClassNoneOnDryRun,
	} {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "side.minictl.test", SideEffects: &se, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
		}}}
		h := &hook{Webhook: api.ValidatingWebhooks(cfg)[0]}
		a := &attributes{op: opCreate, res: api.ConfigMaps, namespace: "default", name: "x", obj: api.ConfigMaps.NewObject(), dryRun: true}
		_, err := s.callWebhook(context.Background(), &invocation{hook: h, res: api.ConfigMaps}, a)
		refused := apierrors.IsBadRequest(err) && strings.Contains(err.Error(), `admission webhook "side.minictl.test" does not support dry run`)
		mayHave := se == admissionregistrationv1.SideEffectClassSome || se == admissionregistrationv1.SideEffectClassUnknown
		if refused != mayHave {
			t.Errorf("sideEffects %s, dry run: got %v, want refused %v", se, err, mayHave)
		}
	}
}

// TestWebhookRules: kube's rule predicate, for resources, subresources
// and scope.
func TestWebhookRules(t *testing.T) {
	ns := admissionregistrationv1.NamespacedScope
	cluster := admissionregistrationv1.ClusterScope
	rule := func(resources []string, scope *admissionregistrationv1.ScopeType) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: resources, Scope: scope},
		}
	}
	pod := &attributes{op: opUpdate, res: api.Pods, namespace: "default", name: "p"}
	podStatus := &attributes{op: opUpdate, res: api.Pods, namespace: "default", name: "p", subresource: "status"}
	node := &attributes{op: opUpdate, res: api.Nodes, name: "n"}
	nsObj := &attributes{op: opUpdate, res: api.Namespaces, name: "default"}
	for _, tc := range []struct {
		rule admissionregistrationv1.RuleWithOperations
		a    *attributes
		want bool
	}{
		{rule([]string{"pods"}, nil), pod, true},
		{rule([]string{"pods"}, nil), podStatus, false},
		{rule([]string{"pods/status"}, nil), podStatus, true},
		{rule([]string{"pods/status"}, nil), pod, false},
		{rule([]string{"*"}, nil), podStatus, false},
		{rule([]string{"*/*"}, nil), podStatus, true},
		{rule([]string{"*/status"}, nil), podStatus, true},
		{rule([]string{"pods/*"}, nil), pod, true},
		{rule([]string{"*"}, &ns), pod, true},
		{rule([]string{"*"}, &ns), node, false},
		{rule([]string{"*"}, &ns), nsObj, false},
		{rule([]string{"*"}, &cluster), nsObj, true},
		{rule([]string{"*"}, &cluster), node, true},
		{rule([]string{"*"}, &cluster), pod, false},
	} {
		if got := ruleMatches(tc.rule, tc.a, tc.a.res); got != tc.want {
			t.Errorf("rule %v scope %v, %s %q: got %v, want %v", tc.rule.Resources, tc.rule.Scope, tc.a.res.Plural, tc.a.subresource, got, tc.want)
		}
	}
}
