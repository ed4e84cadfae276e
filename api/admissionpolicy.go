package api

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/minictl/minictl/internal/kubecel"
)

// The CEL environments of admission, as kube-apiserver's: a
// ValidatingAdmissionPolicy's expressions see object, oldObject, request,
// params, namespaceObject and variables; a webhook's match conditions see
// object, oldObject and request.
var (
	celOnce                    sync.Once
	policyCEL, matchConditions *kubecel.Env
	celErr                     error
)

// PolicyCEL is the environment a ValidatingAdmissionPolicy's expressions
// compile in.
func PolicyCEL() (*kubecel.Env, error) {
	admissionCEL()
	return policyCEL, celErr
}

// MatchConditionCEL is the environment a webhook's match conditions
// compile in.
func MatchConditionCEL() (*kubecel.Env, error) {
	admissionCEL()
	return matchConditions, celErr
}

func admissionCEL() {
	celOnce.Do(func() {
		vars := []kubecel.Var{{Name: "object"}, {Name: "oldObject"}, {Name: "request"}}
		matchConditions, celErr = kubecel.NewEnv(vars...)
		if celErr == nil {
			policyCEL, celErr = kubecel.NewEnv(append(vars, kubecel.Var{Name: "params"},
				kubecel.Var{Name: "namespaceObject"}, kubecel.Var{Name: "variables"})...)
		}
	})
}

// compileCEL checks that expr compiles to want in env, as kube's
// validation of every admission expression: a field.Invalid at p naming
// the compile error.
func compileCEL(env func() (*kubecel.Env, error), expr string, want *cel.Type, p *field.Path) field.ErrorList {
	e, err := env()
	if err != nil {
		return field.ErrorList{field.InternalError(p, err)}
	}
	if _, err := e.Compile(expr, want); err != nil {
		return field.ErrorList{field.Invalid(p, expr, "compilation failed: "+err.Error())}
	}
	return nil
}

func defaultValidatingAdmissionPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	setDefault(&p.Spec.FailurePolicy, admissionregistrationv1.Fail)
	if p.Spec.MatchConstraints != nil {
		defaultMatchResources(p.Spec.MatchConstraints)
	}
}

func defaultValidatingAdmissionPolicyBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	if b.Spec.MatchResources != nil {
		defaultMatchResources(b.Spec.MatchResources)
	}
	if b.Spec.ParamRef != nil {
		setDefault(&b.Spec.ParamRef.ParameterNotFoundAction, admissionregistrationv1.DenyAction)
	}
}

// defaultMatchResources sets kube's defaults: match equivalent resources,
// every namespace and object, rules of every scope.
func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	setDefault(&m.MatchPolicy, admissionregistrationv1.Equivalent)
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			setDefault(&rules[i].Scope, admissionregistrationv1.AllScopes)
		}
	}
}

func prepareValidatingAdmissionPolicyForCreate(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	p.Generation = 1
	p.Status = admissionregistrationv1.ValidatingAdmissionPolicyStatus{}
}

func prepareValidatingAdmissionPolicyForUpdate(p, old *admissionregistrationv1.ValidatingAdmissionPolicy) {
	p.Status = old.Status
	p.Generation = nextGeneration(old, p.Spec, old.Spec)
}

// prepareValidatingAdmissionPolicyForStatusUpdate is kube's status
// strategy for a policy: unlike most built-ins', it lets a status write
// change no metadata (labels, annotations, finalizers, owners, generation).
func prepareValidatingAdmissionPolicyForStatusUpdate(p, old *admissionregistrationv1.ValidatingAdmissionPolicy) {
	metav1.ResetObjectMetaForStatus(p, old)
}

var (
	supportedValidationActions = []string{string(admissionregistrationv1.Deny), string(admissionregistrationv1.Warn), string(admissionregistrationv1.Audit)}
	supportedNotFoundActions   = []string{string(admissionregistrationv1.AllowAction), string(admissionregistrationv1.DenyAction)}
	supportedPolicyReasons     = []string{string(metav1.StatusReasonForbidden), string(metav1.StatusReasonInvalid), string(metav1.StatusReasonRequestEntityTooLarge), string(metav1.StatusReasonUnauthorized)}
)

// validateValidatingAdmissionPolicy is kube's validation of a policy:
// a failure policy, a paramKind that names a kind, match constraints with
// at least one rule, and expressions that compile.
func validateValidatingAdmissionPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if fp := p.Spec.FailurePolicy; fp == nil {
		errs = append(errs, field.Required(spec.Child("failurePolicy"), ""))
	} else if !slices.Contains(supportedFailurePolicies, string(*fp)) {
		errs = append(errs, field.NotSupported(spec.Child("failurePolicy"), *fp, supportedFailurePolicies))
	}
	if pk := p.Spec.ParamKind; pk != nil {
		errs = append(errs, validateParamKind(pk, spec.Child("paramKind"))...)
	}
	if mc := p.Spec.MatchConstraints; mc == nil {
		errs = append(errs, field.Required(spec.Child("matchConstraints"), ""))
	} else {
		if len(mc.ResourceRules) == 0 {
			errs = append(errs, field.Required(spec.Child("matchConstraints", "resourceRules"), ""))
		}
		errs = append(errs, validateMatchResources(mc, spec.Child("matchConstraints"))...)
	}
	if len(p.Spec.Validations) == 0 && len(p.Spec.AuditAnnotations) == 0 {
		errs = append(errs, field.Required(spec.Child("validations"), "validations or auditAnnotations must contain at least one item"))
	}
	errs = append(errs, validateMatchConditions(p.Spec.MatchConditions, PolicyCEL, spec.Child("matchConditions"))...)
	names := sets.New[string]()
	for i, v := range p.Spec.Variables {
		vp := spec.Child("variables").Index(i)
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(vp.Child("name"), "name is not specified"))
		case !celIdentifier(v.Name):
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, "name is not a valid CEL identifier"))
		case names.Has(v.Name):
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		names.Insert(v.Name)
		if v.Expression == "" {
			errs = append(errs, field.Required(vp.Child("expression"), "expression is not specified"))
		} else {
			errs = append(errs, compileCEL(PolicyCEL, v.Expression, nil, vp.Child("expression"))...)
		}
	}
	for i, v := range p.Spec.Validations {
		errs = append(errs, validatePolicyValidation(v, spec.Child("validations").Index(i))...)
	}
	for i, a := range p.Spec.AuditAnnotations {
		ap := spec.Child("auditAnnotations").Index(i)
		if a.Key == "" {
			errs = append(errs, field.Required(ap.Child("key"), ""))
		}
		if a.ValueExpression == "" {
			errs = append(errs, field.Required(ap.Child("valueExpression"), ""))
		} else {
			errs = append(errs, compileCEL(PolicyCEL, a.ValueExpression, cel.StringType, ap.Child("valueExpression"))...)
		}
	}
	return errs
}

func validatePolicyValidation(v admissionregistrationv1.Validation, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.TrimSpace(v.Expression) == "" {
		errs = append(errs, field.Required(p.Child("expression"), "expression is not specified"))
	} else {
		errs = append(errs, compileCEL(PolicyCEL, v.Expression, cel.BoolType, p.Child("expression"))...)
	}
	if strings.ContainsAny(v.Message, "\r\n") {
		errs = append(errs, field.Invalid(p.Child("message"), v.Message, "message must not contain line breaks"))
	}
	if v.MessageExpression != "" {
		errs = append(errs, compileCEL(PolicyCEL, v.MessageExpression, cel.StringType, p.Child("messageExpression"))...)
	}
	if v.Reason != nil && !slices.Contains(supportedPolicyReasons, string(*v.Reason)) {
		errs = append(errs, field.NotSupported(p.Child("reason"), *v.Reason, supportedPolicyReasons))
	}
	return errs
}

// validateMatchConditions is kube's check of match conditions, which
// policies and webhooks share: named, unique, and boolean expressions.
func validateMatchConditions(conds []admissionregistrationv1.MatchCondition, env func() (*kubecel.Env, error), p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(conds) > 64 {
		errs = append(errs, field.TooMany(p, len(conds), 64))
	}
	names := sets.New[string]()
	for i, c := range conds {
		cp := p.Index(i)
		if c.Name == "" {
			errs = append(errs, field.Required(cp.Child("name"), ""))
		} else {
			for _, msg := range validation.IsQualifiedName(c.Name) {
				errs = append(errs, field.Invalid(cp.Child("name"), c.Name, msg))
			}
			if names.Has(c.Name) {
				errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
			}
		}
		names.Insert(c.Name)
		if c.Expression == "" {
			errs = append(errs, field.Required(cp.Child("expression"), ""))
		} else {
			errs = append(errs, compileCEL(env, c.Expression, cel.BoolType, cp.Child("expression"))...)
		}
	}
	return errs
}

func validateParamKind(pk *admissionregistrationv1.ParamKind, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pk.APIVersion == "" {
		errs = append(errs, field.Required(p.Child("apiVersion"), ""))
	} else if gv, err := schema.ParseGroupVersion(pk.APIVersion); err != nil {
		errs = append(errs, field.Invalid(p.Child("apiVersion"), pk.APIVersion, err.Error()))
	} else if gv.Version == "" {
		errs = append(errs, field.Invalid(p.Child("apiVersion"), pk.APIVersion, "version must be specified"))
	}
	if pk.Kind == "" {
		errs = append(errs, field.Required(p.Child("kind"), ""))
	} else if msgs := validation.IsDNS1035Label(strings.ToLower(pk.Kind)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("kind"), pk.Kind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
	}
	return errs
}

// validateMatchResources checks a policy's matchConstraints or a
// binding's matchResources: supported policy, valid selectors, and rules
// as a webhook's, each possibly naming resources.
func validateMatchResources(m *admissionregistrationv1.MatchResources, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if mp := m.MatchPolicy; mp != nil && !slices.Contains(supportedMatchPolicies, string(*mp)) {
		errs = append(errs, field.NotSupported(p.Child("matchPolicy"), *mp, supportedMatchPolicies))
	}
	if sel := m.NamespaceSelector; sel != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, webhookLabelSelectorCheck, p.Child("namespaceSelector"))...)
	}
	if sel := m.ObjectSelector; sel != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, webhookLabelSelectorCheck, p.Child("objectSelector"))...)
	}
	for _, set := range []struct {
		name  string
		rules []admissionregistrationv1.NamedRuleWithOperations
	}{{"resourceRules", m.ResourceRules}, {"excludeResourceRules", m.ExcludeResourceRules}} {
		for i, r := range set.rules {
			rp := p.Child(set.name).Index(i)
			errs = append(errs, validateRule(r.RuleWithOperations, rp)...)
			for j, n := range r.ResourceNames {
				for _, msg := range isDNS1123Subdomain(n) {
					errs = append(errs, field.Invalid(rp.Child("resourceNames").Index(j), n, msg))
				}
			}
		}
	}
	return errs
}

// validateValidatingAdmissionPolicyBinding is kube's validation of a
// binding: a policy name, a paramRef by name or by selector with an
// action for a missing one, and validation actions of which Deny and
// Warn are not both.
func validateValidatingAdmissionPolicyBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if b.Spec.PolicyName == "" {
		errs = append(errs, field.Required(spec.Child("policyName"), ""))
	} else {
		for _, msg := range isDNS1123Subdomain(b.Spec.PolicyName) {
			errs = append(errs, field.Invalid(spec.Child("policyName"), b.Spec.PolicyName, msg))
		}
	}
	if pr := b.Spec.ParamRef; pr != nil {
		pp := spec.Child("paramRef")
		switch {
		case pr.Name != "" && pr.Selector != nil:
			errs = append(errs, field.Forbidden(pp.Child("name"), `name and selector are mutually exclusive`))
		case pr.Name == "" && pr.Selector == nil:
			errs = append(errs, field.Required(pp, `one of name or selector must be specified`))
		case pr.Selector != nil:
			errs = append(errs, metav1validation.ValidateLabelSelector(pr.Selector, webhookLabelSelectorCheck, pp.Child("selector"))...)
		default:
			for _, msg := range isDNS1123Subdomain(pr.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), pr.Name, msg))
			}
		}
		if pr.Namespace != "" {
			for _, msg := range validation.IsDNS1123Label(pr.Namespace) {
				errs = append(errs, field.Invalid(pp.Child("namespace"), pr.Namespace, msg))
			}
		}
		if a := pr.ParameterNotFoundAction; a == nil {
			errs = append(errs, field.Required(pp.Child("parameterNotFoundAction"), ""))
		} else if !slices.Contains(supportedNotFoundActions, string(*a)) {
			errs = append(errs, field.NotSupported(pp.Child("parameterNotFoundAction"), *a, supportedNotFoundActions))
		}
	}
	if m := b.Spec.MatchResources; m != nil {
		errs = append(errs, validateMatchResources(m, spec.Child("matchResources"))...)
	}
	ap := spec.Child("validationActions")
	if len(b.Spec.ValidationActions) == 0 {
		errs = append(errs, field.Required(ap, "at least one validation action is required"))
	}
	actions := sets.New[admissionregistrationv1.ValidationAction]()
	for i, a := range b.Spec.ValidationActions {
		if !slices.Contains(supportedValidationActions, string(a)) {
			errs = append(errs, field.NotSupported(ap.Index(i), a, supportedValidationActions))
		}
		if actions.Has(a) {
			errs = append(errs, field.Duplicate(ap.Index(i), a))
		}
		actions.Insert(a)
	}
	if actions.Has(admissionregistrationv1.Deny) && actions.Has(admissionregistrationv1.Warn) {
		errs = append(errs, field.Invalid(ap, b.Spec.ValidationActions, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
	}
	return errs
}

// celIdentifier reports whether s may name a CEL variable.
func celIdentifier(s string) bool {
	for i, r := range s {
		letter := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return s != ""
}

// paramRefColumn is kube's PARAMREF: namespace/name, */name when the
// namespace is the request's, or the selector.
func paramRefColumn(pr *admissionregistrationv1.ParamRef) string {
	switch {
	case pr == nil:
		return "<unset>"
	case pr.Name != "" && pr.Namespace != "":
		return pr.Namespace + "/" + pr.Name
	case pr.Name != "":
		return "*/" + pr.Name
	case pr.Selector != nil:
		return metav1.FormatLabelSelector(pr.Selector)
	}
	return "<unset>"
}

func paramKindColumn(pk *admissionregistrationv1.ParamKind) string {
	if pk == nil {
		return "<unset>"
	}
	return fmt.Sprintf("%s/%s", pk.APIVersion, pk.Kind)
}
