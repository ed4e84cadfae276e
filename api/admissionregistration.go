package api

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/minictl/minictl/internal/webhook"
)

// Webhook is what MutatingWebhook and ValidatingWebhook have in common:
// everything but the mutating one's reinvocationPolicy. The API server's
// admission dispatcher and these defaults and checks work on it, so that
// the two kinds are handled by one piece of code.
type Webhook struct {
	Name                    string
	ClientConfig            *admissionregistrationv1.WebhookClientConfig
	Rules                   *[]admissionregistrationv1.RuleWithOperations
	FailurePolicy           **admissionregistrationv1.FailurePolicyType
	MatchPolicy             **admissionregistrationv1.MatchPolicyType
	NamespaceSelector       **metav1.LabelSelector
	ObjectSelector          **metav1.LabelSelector
	SideEffects             **admissionregistrationv1.SideEffectClass
	TimeoutSeconds          **int32
	AdmissionReviewVersions []string
	MatchConditions         []admissionregistrationv1.MatchCondition
	// ReinvocationPolicy is nil for a validating webhook.
	ReinvocationPolicy **admissionregistrationv1.ReinvocationPolicyType
}

// MutatingWebhooks returns a view of each of c's webhooks; changing a
// view's fields changes c.
func MutatingWebhooks(c *admissionregistrationv1.MutatingWebhookConfiguration) []Webhook {
	out := make([]Webhook, len(c.Webhooks))
	for i := range c.Webhooks {
		h := &c.Webhooks[i]
		out[i] = Webhook{
			Name: h.Name, ClientConfig: &h.ClientConfig, Rules: &h.Rules,
			FailurePolicy: &h.FailurePolicy, MatchPolicy: &h.MatchPolicy,
			NamespaceSelector: &h.NamespaceSelector, ObjectSelector: &h.ObjectSelector,
			SideEffects: &h.SideEffects, TimeoutSeconds: &h.TimeoutSeconds,
			AdmissionReviewVersions: h.AdmissionReviewVersions, MatchConditions: h.MatchConditions,
			ReinvocationPolicy: &h.ReinvocationPolicy,
		}
	}
	return out
}

// ValidatingWebhooks returns a view of each of c's webhooks; changing a
// view's fields changes c.
func ValidatingWebhooks(c *admissionregistrationv1.ValidatingWebhookConfiguration) []Webhook {
	out := make([]Webhook, len(c.Webhooks))
	for i := range c.Webhooks {
		h := &c.Webhooks[i]
		out[i] = Webhook{
			Name: h.Name, ClientConfig: &h.ClientConfig, Rules: &h.Rules,
			FailurePolicy: &h.FailurePolicy, MatchPolicy: &h.MatchPolicy,
			NamespaceSelector: &h.NamespaceSelector, ObjectSelector: &h.ObjectSelector,
			SideEffects: &h.SideEffects, TimeoutSeconds: &h.TimeoutSeconds,
			AdmissionReviewVersions: h.AdmissionReviewVersions, MatchConditions: h.MatchConditions,
		}
	}
	return out
}

func defaultMutatingWebhookConfiguration(c *admissionregistrationv1.MutatingWebhookConfiguration) {
	for _, h := range MutatingWebhooks(c) {
		defaultWebhook(h)
	}
}

func defaultValidatingWebhookConfiguration(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
	for _, h := range ValidatingWebhooks(c) {
		defaultWebhook(h)
	}
}

// defaultWebhook sets kube's defaults of admissionregistration/v1: fail
// closed, match equivalent resources, every namespace and object, ten
// seconds, rules of every scope, services on port 443, and no
// reinvocation.
func defaultWebhook(h Webhook) {
	setDefault(h.FailurePolicy, admissionregistrationv1.Fail)
	setDefault(h.MatchPolicy, admissionregistrationv1.Equivalent)
	if *h.NamespaceSelector == nil {
		*h.NamespaceSelector = &metav1.LabelSelector{}
	}
	if *h.ObjectSelector == nil {
		*h.ObjectSelector = &metav1.LabelSelector{}
	}
	setDefault(h.TimeoutSeconds, int32(10))
	if h.ReinvocationPolicy != nil {
		setDefault(h.ReinvocationPolicy, admissionregistrationv1.NeverReinvocationPolicy)
	}
	for i := range *h.Rules {
		setDefault(&(*h.Rules)[i].Scope, admissionregistrationv1.AllScopes)
	}
	if svc := h.ClientConfig.Service; svc != nil {
		setDefault(&svc.Port, int32(443))
	}
}

func setDefault[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}

func validateMutatingWebhookConfiguration(c *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
	return validateWebhooks(MutatingWebhooks(c))
}

func validateValidatingWebhookConfiguration(c *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
	return validateWebhooks(ValidatingWebhooks(c))
}

// validateWebhooks is kube's validation of a webhook configuration's
// webhooks: unique, fully qualified names, and each webhook complete.
func validateWebhooks(hooks []Webhook) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, h := range hooks {
		p := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateWebhook(h, p)...)
		if names.Has(h.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), h.Name))
		}
		names.Insert(h.Name)
	}
	return errs
}

var (
	supportedFailurePolicies  = []string{string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore)}
	supportedMatchPolicies    = []string{string(admissionregistrationv1.Exact), string(admissionregistrationv1.Equivalent)}
	supportedSideEffects      = []string{string(admissionregistrationv1.SideEffectClassNone), string(admissionregistrationv1.SideEffectClassNoneOnDryRun)}
	supportedReinvocations    = []string{string(admissionregistrationv1.NeverReinvocationPolicy), string(admissionregistrationv1.IfNeededReinvocationPolicy)}
	supportedScopes           = []string{string(admissionregistrationv1.ClusterScope), string(admissionregistrationv1.NamespacedScope), string(admissionregistrationv1.AllScopes)}
	supportedOperations       = []string{"*", "CONNECT", "CREATE", "DELETE", "UPDATE"}
	supportedReviewVersions   = []string{"v1"}
	webhookLabelSelectorCheck = metav1validation.LabelSelectorValidationOptions{}
)

func validateWebhook(h Webhook, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range isDNS1123Subdomain(h.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), h.Name, msg))
	}
	if len(strings.Split(h.Name, ".")) < 3 {
		errs = append(errs, field.Invalid(p.Child("name"), h.Name, "should be a domain with at least three segments separated by dots"))
	}
	for i, r := range *h.Rules {
		errs = append(errs, validateRule(r, p.Child("rules").Index(i))...)
	}
	if fp := *h.FailurePolicy; fp != nil && !slices.Contains(supportedFailurePolicies, string(*fp)) {
		errs = append(errs, field.NotSupported(p.Child("failurePolicy"), *fp, supportedFailurePolicies))
	}
	if mp := *h.MatchPolicy; mp != nil && !slices.Contains(supportedMatchPolicies, string(*mp)) {
		errs = append(errs, field.NotSupported(p.Child("matchPolicy"), *mp, supportedMatchPolicies))
	}
	switch se := *h.SideEffects; {
	case se == nil:
		errs = append(errs, field.Required(p.Child("sideEffects"), fmt.Sprintf("must specify one of %v", strings.Join(supportedSideEffects, ", "))))
	case !slices.Contains(supportedSideEffects, string(*se)):
		errs = append(errs, field.NotSupported(p.Child("sideEffects"), *se, supportedSideEffects))
	}
	if t := *h.TimeoutSeconds; t != nil && (*t < 1 || *t > 30) {
		errs = append(errs, field.Invalid(p.Child("timeoutSeconds"), *t, "the timeout value must be between 1 and 30 seconds"))
	}
	if h.ReinvocationPolicy != nil {
		if rp := *h.ReinvocationPolicy; rp != nil && !slices.Contains(supportedReinvocations, string(*rp)) {
			errs = append(errs, field.NotSupported(p.Child("reinvocationPolicy"), *rp, supportedReinvocations))
		}
	}
	if sel := *h.NamespaceSelector; sel != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, webhookLabelSelectorCheck, p.Child("namespaceSelector"))...)
	}
	if sel := *h.ObjectSelector; sel != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, webhookLabelSelectorCheck, p.Child("objectSelector"))...)
	}
	errs = append(errs, validateReviewVersions(h.AdmissionReviewVersions, p.Child("admissionReviewVersions"))...)
	errs = append(errs, validateWebhookClientConfig(h.ClientConfig, p.Child("clientConfig"))...)
	errs = append(errs, validateMatchConditions(h.MatchConditions, MatchConditionCEL, p.Child("matchConditions"))...)
	return errs
}

// validateRule is kube's check of one rule: each list given, "*" alone
// where it means all, and known operations and scopes.
func validateRule(r admissionregistrationv1.RuleWithOperations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	ops := make([]string, len(r.Operations))
	for i, op := range r.Operations {
		ops[i] = string(op)
	}
	errs = append(errs, validateRuleList(ops, p.Child("operations"))...)
	for i, op := range ops {
		if !slices.Contains(supportedOperations, op) {
			errs = append(errs, field.NotSupported(p.Child("operations").Index(i), op, supportedOperations))
		}
	}
	errs = append(errs, validateRuleList(r.APIGroups, p.Child("apiGroups"))...)
	errs = append(errs, validateRuleList(r.APIVersions, p.Child("apiVersions"))...)
	for i, v := range r.APIVersions {
		if v == "" {
			errs = append(errs, field.Required(p.Child("apiVersions").Index(i), ""))
		}
	}
	errs = append(errs, validateRuleResources(r.Resources, p.Child("resources"))...)
	if r.Scope != nil && !slices.Contains(supportedScopes, string(*r.Scope)) {
		errs = append(errs, field.NotSupported(p.Child("scope"), *r.Scope, supportedScopes))
	}
	return errs
}

func validateRuleList(items []string, p *field.Path) field.ErrorList {
	if len(items) == 0 {
		return field.ErrorList{field.Required(p, "")}
	}
	if len(items) > 1 && slices.Contains(items, "*") {
		return field.ErrorList{field.Invalid(p, items, "if '*' is present, must not specify other values")}
	}
	return nil
}

// validateRuleResources checks resources and their subresources: "*/*"
// alone, and a resource's "x/*" not beside its other subresources.
func validateRuleResources(resources []string, p *field.Path) field.ErrorList {
	if len(resources) == 0 {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	subsOf := map[string]sets.Set[string]{}
	for i, rs := range resources {
		if rs == "" {
			errs = append(errs, field.Required(p.Index(i), ""))
			continue
		}
		if rs == "*/*" && len(resources) > 1 {
			errs = append(errs, field.Invalid(p, resources, "if '*/*' is present, must not specify other resources"))
			return errs
		}
		res, sub, _ := strings.Cut(rs, "/")
		if subsOf[res] == nil {
			subsOf[res] = sets.New[string]()
		}
		subsOf[res].Insert(sub)
	}
	for res, subs := range subsOf {
		if subs.Has("*") && subs.Len() > 1 {
			errs = append(errs, field.Invalid(p, resources, fmt.Sprintf("if '%s/*' is present, must not specify %s", res, strings.Join(sets.List(subs.Delete("*")), ", "))))
		}
	}
	return errs
}

func validateReviewVersions(versions []string, p *field.Path) field.ErrorList {
	if len(versions) == 0 {
		return field.ErrorList{field.Required(p, fmt.Sprintf("must specify one of %v", strings.Join(supportedReviewVersions, ", ")))}
	}
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, v := range versions {
		for _, msg := range isDNS1123Label(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, msg))
		}
		if seen.Has(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, "duplicate version"))
		}
		seen.Insert(v)
	}
	if !slices.ContainsFunc(versions, func(v string) bool { return slices.Contains(supportedReviewVersions, v) }) {
		errs = append(errs, field.Invalid(p, versions, fmt.Sprintf("must include at least one of %v", strings.Join(supportedReviewVersions, ", "))))
	}
	return errs
}

// validateWebhookClientConfig checks where a webhook is called: a URL or
// a service, never both; HTTPS only; and a caBundle of PEM certificates.
func validateWebhookClientConfig(cc *admissionregistrationv1.WebhookClientConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case (cc.URL == nil) == (cc.Service == nil):
		errs = append(errs, field.Required(p, "exactly one of url or service is required"))
	case cc.URL != nil:
		errs = append(errs, webhook.ValidateURL(p.Child("url"), *cc.URL)...)
	default:
		errs = append(errs, webhook.ValidateService(p.Child("service"), cc.Service.Name, cc.Service.Namespace, cc.Service.Path, cc.Service.Port)...)
	}
	if len(cc.CABundle) > 0 && !pemCertificates(cc.CABundle) {
		errs = append(errs, field.Invalid(p.Child("caBundle"), "<bundle>", "must be PEM-encoded certificates"))
	}
	return errs
}

// pemCertificates reports whether b holds PEM blocks only, at least one,
// each an X.509 certificate.
func pemCertificates(b []byte) bool {
	n := 0
	for {
		block, rest := pem.Decode(b)
		if block == nil {
			return n > 0 && strings.TrimSpace(string(rest)) == ""
		}
		if block.Type != "CERTIFICATE" {
			return false
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return false
		}
		n++
		b = rest
	}
}
