package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/internal/kubecel"
)

// validatePolicies is kube's ValidatingAdmissionPolicy plugin. For every
// policy whose matchConstraints match the write, and every binding of it
// whose matchResources match too, the policy is evaluated once per
// parameter object the binding names: its matchConditions, then its
// validations, which see object, oldObject, request, params,
// namespaceObject and variables (each evaluated at most once, when first
// read). A false validation is acted on as the binding's
// validationActions say: Deny refuses the write, Warn adds a Warning
// header, Audit only logs. An expression that cannot be evaluated (a
// runtime error, the cost budget spent) and a binding that cannot be
// configured (its params missing) refuse the write unless the policy's
// failurePolicy is Ignore. Of several refusals, the first is returned.
func (s *Server) validatePolicies(ctx context.Context, a *attributes) (func(), error) {
	if a.res == api.ValidatingAdmissionPolicies || a.res == api.ValidatingAdmissionPolicyBindings {
		return nil, nil // as kube: a policy cannot lock itself in
	}
	var denied []*policyDecision
	budget := newCELBudget()
	for _, p := range s.admissionPolicies() {
		res, err := s.matches(ctx, &p.matcher, a)
		if err != nil {
			denied = p.configError(denied, err, nil)
			continue
		}
		if res == nil {
			continue
		}
		if p.err != nil {
			denied = p.configError(denied, p.err, nil)
			continue
		}
		var in map[string]any // the variables every binding shares, made on first need
		for _, b := range p.bindings {
			if b.matcher != nil {
				ok, err := s.matches(ctx, b.matcher, a)
				if err != nil {
					denied = p.configError(denied, err, b.binding)
					continue
				}
				if ok == nil {
					continue
				}
			}
			params, err := s.policyParams(p, b, a)
			if err != nil {
				denied = p.configError(denied, err, b.binding)
				continue
			}
			if len(params) > 0 && in == nil {
				if in, err = s.policyInput(ctx, res, a); err != nil {
					return nil, err
				}
			}
			for _, param := range params {
				failed, annotationErrs := p.evaluate(ctx, s.log, in, param, budget)
				for _, d := range failed {
					denied = s.actOn(ctx, p, b, d, denied)
				}
				for _, d := range annotationErrs {
					d.policy, d.binding = p.policy.Name, b.binding.Name
					denied = append(denied, &d)
				}
			}
		}
	}
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, denied[0].statusError(a)
}

// policyDecision is one validation that refused a write, or an error that
// refuses it.
type policyDecision struct {
	policy  string
	binding string // "" for an error of the policy itself
	message string
	reason  metav1.StatusReason
}

// statusError is kube's refusal: the first decision's message, with the
// validation's reason (Invalid when it gives none) and its code.
func (d *policyDecision) statusError(a *attributes) error {
	msg := fmt.Sprintf("ValidatingAdmissionPolicy '%s' denied request: %s", d.policy, d.message)
	if d.binding != "" {
		msg = fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", d.policy, d.binding, d.message)
	}
	reason := d.reason
	if reason == "" {
		reason = metav1.StatusReasonInvalid
	}
	code := http.StatusUnprocessableEntity
	switch reason {
	case metav1.StatusReasonForbidden:
		code = http.StatusForbidden
	case metav1.StatusReasonUnauthorized:
		code = http.StatusUnauthorized
	case metav1.StatusReasonRequestEntityTooLarge:
		code = http.StatusRequestEntityTooLarge
	}
	se := apierrors.NewForbidden(a.res.GroupResource(), a.name, errors.New(msg))
	se.ErrStatus.Reason, se.ErrStatus.Code = reason, int32(code)
	se.ErrStatus.Details.Causes = append(se.ErrStatus.Details.Causes, metav1.StatusCause{Message: msg})
	return se
}

// actOn applies a binding's validationActions to a failed validation.
func (s *Server) actOn(ctx context.Context, p *policyHook, b *policyBinding, d policyDecision, denied []*policyDecision) []*policyDecision {
	d.policy, d.binding = p.policy.Name, b.binding.Name
	for _, act := range b.binding.Spec.ValidationActions {
		switch act {
		case admissionregistrationv1.Deny:
			denied = append(denied, &d)
		case admissionregistrationv1.Warn:
			addWarning(ctx, fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': %s", d.policy, d.binding, d.message))
		case admissionregistrationv1.Audit:
			s.log.Info("validating admission policy: audit", "policy", d.policy, "binding", d.binding, "message", d.message)
		}
	}
	return denied
}

// configError is kube's addConfigError: with failurePolicy Fail, a policy
// or binding that cannot be used refuses the write; with Ignore, it is
// skipped.
func (p *policyHook) configError(denied []*policyDecision, err error, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) []*policyDecision {
	if p.failurePolicy() == admissionregistrationv1.Ignore {
		return denied
	}
	d := &policyDecision{policy: p.policy.Name, message: fmt.Sprintf("failed to configure policy: %v", err)}
	if b != nil {
		d.binding, d.message = b.Name, fmt.Sprintf("failed to configure binding: %v", err)
	}
	return append(denied, d)
}

// evaluate runs p for one parameter object (nil: none) and returns its
// failed validations, and its audit annotations that failed to evaluate
// (which refuse the write whatever the binding's actions): kube's
// validator. Evaluation errors are failures with failurePolicy Fail and
// are dropped with Ignore. Audit annotations are logged: minictl has no
// audit log.
func (p *policyHook) evaluate(ctx context.Context, log *slog.Logger, in map[string]any, param any, budget *celBudget) (failed, annotationErrs []policyDecision) {
	vars := make(map[string]any, len(in)+2)
	for k, v := range in {
		vars[k] = v
	}
	vars["params"] = param
	vars["variables"] = newLazyVariables(ctx, p.variables, vars, budget)
	ignore := p.failurePolicy() == admissionregistrationv1.Ignore
	ok, err := p.conditions.match(ctx, vars, p.failurePolicy(), budget)
	if err != nil {
		return []policyDecision{{message: err.Error()}}, nil
	}
	if !ok {
		return nil, nil
	}
	var out []policyDecision
	for _, v := range p.validations {
		res, err := budget.eval(ctx, v.prg, v.Expression, vars)
		if err == nil {
			if _, isBool := res.(types.Bool); !isBool {
				err = fmt.Errorf("expression '%s' resulted in a %s, want bool", v.Expression, res.Type().TypeName())
			}
		}
		if err != nil {
			if !ignore {
				out = append(out, policyDecision{message: err.Error()})
			}
			if errors.Is(err, errOutOfBudget) {
				break
			}
			continue
		}
		if res == types.True {
			continue
		}
		d := policyDecision{reason: metav1.StatusReasonInvalid, message: v.message(ctx, vars, budget)}
		if v.Reason != nil {
			d.reason = *v.Reason
		}
		out = append(out, d)
	}
	for _, an := range p.annotations {
		res, err := budget.eval(ctx, an.prg, an.expr, vars)
		switch v := res.(type) {
		case types.String:
			if val := strings.TrimSpace(string(v)); val != "" {
				log.Info("validating admission policy: audit annotation", "policy", p.policy.Name, "key", p.policy.Name+"/"+an.name, "value", val)
			}
			continue
		case types.Null:
			continue
		}
		if err == nil {
			err = fmt.Errorf("valueExpression '%s' resulted in unsupported return type: %s. Return type must be either string or null.", an.expr, res.Type().TypeName())
		}
		if !ignore {
			annotationErrs = append(annotationErrs, policyDecision{message: err.Error()})
		}
	}
	return out, annotationErrs
}

// message is kube's message of a failed validation: its
// messageExpression's result when that is a one-line string of sensible
// length, else its message, else the expression itself.
func (v *policyValidation) message(ctx context.Context, vars map[string]any, budget *celBudget) string {
	if v.msg != nil {
		out, err := budget.eval(ctx, v.msg, v.MessageExpression, vars)
		if s, ok := out.(types.String); err == nil && ok {
			msg := strings.TrimSpace(string(s))
			if msg != "" && len(msg) <= kubecel.MaxMessageLength && !strings.Contains(msg, "\n") {
				return msg
			}
		}
	}
	if msg := strings.TrimSpace(v.Message); msg != "" {
		return msg
	}
	return "failed expression: " + strings.TrimSpace(v.Expression)
}

// policyInput is what every binding of a policy sees of a: object,
// oldObject, request, and the namespace the object is in.
func (s *Server) policyInput(ctx context.Context, res *api.Resource, a *attributes) (map[string]any, error) {
	in, err := s.celInput(res, a, false)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var nsObj any
	if a.namespace != "" && a.res != api.Namespaces {
		ns, err := s.namespace(ctx, a.namespace)
		if err != nil {
			return nil, err
		}
		if err := toUnstructured(ns, &nsObj); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	in["namespaceObject"] = nsObj
	return in, nil
}

// policyParams is kube's CollectParams: the parameter objects a binding
// names, from the watch cache of the policy's paramKind: one by name (in
// paramRef's namespace, or the request's), or all a selector matches.
// Without a paramKind or a paramRef, the policy runs once with null
// params. None found is an error if the binding's
// parameterNotFoundAction is Deny, and no evaluation at all if Allow.
func (s *Server) policyParams(p *policyHook, b *policyBinding, a *attributes) ([]any, error) {
	pk, ref := p.policy.Spec.ParamKind, b.binding.Spec.ParamRef
	if pk == nil || ref == nil {
		return []any{nil}, nil
	}
	res := s.paramResource(pk)
	if res == nil {
		return nil, fmt.Errorf("paramKind kind `%s` not known", paramKindString(pk))
	}
	v := s.serving()
	cache := v.caches[res]
	if cache == nil {
		return nil, fmt.Errorf("paramKind kind `%s` not known", paramKindString(pk))
	}
	ns := ""
	if res.Namespaced {
		ns = ref.Namespace
		if ns == "" {
			ns = a.namespace
		}
		if ns == "" {
			return nil, errors.New("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
		}
	} else if ref.Namespace != "" {
		return nil, errors.New("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
	}
	var objs []api.Object
	if ref.Name != "" {
		if o, _ := cache.get(v.stores[res].key(ns, ref.Name)); o != nil {
			objs = append(objs, o.object())
		}
	} else {
		items, _ := cache.list(&filter{namespace: ns, label: b.paramSel})
		for _, o := range items {
			objs = append(objs, o.object())
		}
	}
	if len(objs) == 0 {
		if act := ref.ParameterNotFoundAction; act != nil && *act == admissionregistrationv1.DenyAction {
			return nil, errors.New("no params found for policy binding with `Deny` parameterNotFoundAction")
		}
		return nil, nil
	}
	params := make([]any, len(objs))
	for i, o := range objs {
		cp := o.DeepCopyObject().(api.Object)
		cp.GetObjectKind().SetGroupVersionKind(kindOf(res))
		if err := toUnstructured(cp, &params[i]); err != nil {
			return nil, err
		}
	}
	return params, nil
}

// paramResource is the served resource of a paramKind, or nil.
func (s *Server) paramResource(pk *admissionregistrationv1.ParamKind) *api.Resource {
	gv, err := schema.ParseGroupVersion(pk.APIVersion)
	if err != nil {
		return nil
	}
	for _, r := range s.serving().resources {
		if r.Group == gv.Group && r.Version == gv.Version && r.Kind == pk.Kind {
			return r
		}
	}
	return nil
}

func paramKindString(pk *admissionregistrationv1.ParamKind) string {
	return fmt.Sprintf("%s, Kind=%s", pk.APIVersion, pk.Kind)
}

// policyHook is a policy compiled, with its bindings. Built from the
// watch caches when a policy or a binding changes and shared by every
// request; never modified.
type policyHook struct {
	policy      *admissionregistrationv1.ValidatingAdmissionPolicy
	matcher     matcher
	conditions  celConditions
	variables   []policyVariable
	validations []policyValidation
	annotations []policyVariable // auditAnnotations: key and valueExpression
	bindings    []*policyBinding
	// err is why an expression does not compile (they did when written,
	// so this is not expected): every request the policy matches gets it.
	err error
}

type policyVariable struct {
	name, expr string
	prg        *kubecel.Program
}

type policyValidation struct {
	admissionregistrationv1.Validation
	prg, msg *kubecel.Program
}

type policyBinding struct {
	binding  *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	matcher  *matcher // nil: every request the policy matches
	paramSel labels.Selector
}

func (p *policyHook) failurePolicy() admissionregistrationv1.FailurePolicyType {
	if fp := p.policy.Spec.FailurePolicy; fp != nil {
		return *fp
	}
	return admissionregistrationv1.Fail
}

// compilePolicy compiles every expression of a policy.
func compilePolicy(pol *admissionregistrationv1.ValidatingAdmissionPolicy) *policyHook {
	p := &policyHook{policy: pol}
	var rules, exclude []rule
	mc := pol.Spec.MatchConstraints
	if mc != nil {
		rules, exclude = namedRules(mc.ResourceRules), namedRules(mc.ExcludeResourceRules)
		p.matcher = newMatcher(rules, exclude, mc.MatchPolicy, mc.NamespaceSelector, mc.ObjectSelector)
	} else {
		p.matcher = newMatcher(nil, nil, nil, nil, nil)
	}
	env, err := api.PolicyCEL()
	if err != nil {
		p.err = err
		return p
	}
	p.conditions = compileConditions(api.PolicyCEL, pol.Spec.MatchConditions)
	if p.conditions.err != nil {
		p.err = p.conditions.err
		return p
	}
	for _, v := range pol.Spec.Variables {
		prg, err := env.Compile(v.Expression, nil)
		if err != nil {
			p.err = fmt.Errorf("variable %q: compilation failed: %w", v.Name, err)
			return p
		}
		p.variables = append(p.variables, policyVariable{name: v.Name, expr: v.Expression, prg: prg})
	}
	for _, v := range pol.Spec.Validations {
		pv := policyValidation{Validation: v}
		if pv.prg, err = env.Compile(v.Expression, cel.BoolType); err != nil {
			p.err = fmt.Errorf("compilation failed: %w", err)
			return p
		}
		if v.MessageExpression != "" {
			if pv.msg, err = env.Compile(v.MessageExpression, cel.StringType); err != nil {
				p.err = fmt.Errorf("messageExpression compilation failed: %w", err)
				return p
			}
		}
		p.validations = append(p.validations, pv)
	}
	for _, an := range pol.Spec.AuditAnnotations {
		prg, err := env.Compile(an.ValueExpression, nil)
		if err != nil {
			p.err = fmt.Errorf("auditAnnotations %q: compilation failed: %w", an.Key, err)
			return p
		}
		p.annotations = append(p.annotations, policyVariable{name: an.Key, expr: an.ValueExpression, prg: prg})
	}
	return p
}

func newPolicyBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) (*policyBinding, error) {
	pb := &policyBinding{binding: b, paramSel: labels.Everything()}
	if mr := b.Spec.MatchResources; mr != nil {
		m := newMatcher(namedRules(mr.ResourceRules), namedRules(mr.ExcludeResourceRules), mr.MatchPolicy, mr.NamespaceSelector, mr.ObjectSelector)
		m.anyResource = true
		pb.matcher = &m
	}
	if ref := b.Spec.ParamRef; ref != nil && ref.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
		if err != nil {
			return nil, err
		}
		pb.paramSel = sel
	}
	return pb, nil
}

// policySet is the policies and bindings as of a revision of their watch
// caches. A policy is compiled again only when it changed.
type policySet struct {
	mu                  sync.Mutex
	policyRV, bindingRV int64                  // guarded by mu
	compiled            map[string]*policyHook // guarded by mu: by name, for reuse while unchanged
	hooks               []*policyHook          // guarded by mu
}

// admissionPolicies returns the policies that have bindings, by name,
// each with its bindings by name, as kube orders them. They come from the
// watch caches; no request reads etcd for them.
func (s *Server) admissionPolicies() []*policyHook {
	v := s.serving()
	pc, bc := v.caches[api.ValidatingAdmissionPolicies], v.caches[api.ValidatingAdmissionPolicyBindings]
	if pc == nil || bc == nil {
		return nil
	}
	set := &s.policies
	set.mu.Lock()
	defer set.mu.Unlock()
	prv, brv := pc.currentRV(), bc.currentRV()
	if prv == set.policyRV && brv == set.bindingRV && prv != 0 {
		return set.hooks
	}
	policies, prv := pc.list(&filter{})
	bindings, brv := bc.list(&filter{})
	byPolicy := map[string][]*policyBinding{}
	for _, it := range bindings {
		b := it.object().(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		pb, err := newPolicyBinding(b)
		if err != nil {
			s.log.Error("validating admission policy binding: unusable selector", "binding", b.Name, "error", err)
			continue
		}
		byPolicy[b.Spec.PolicyName] = append(byPolicy[b.Spec.PolicyName], pb)
	}
	compiled := map[string]*policyHook{}
	var hooks []*policyHook
	for _, it := range policies {
		pol := it.object().(*admissionregistrationv1.ValidatingAdmissionPolicy)
		c := set.compiled[pol.Name]
		if c == nil || c.policy.ResourceVersion != pol.ResourceVersion {
			c = compilePolicy(pol)
		}
		compiled[pol.Name] = c
		if len(byPolicy[pol.Name]) == 0 {
			continue
		}
		h := *c
		h.bindings = byPolicy[pol.Name]
		hooks = append(hooks, &h)
	}
	set.policyRV, set.bindingRV, set.compiled, set.hooks = prv, brv, compiled, hooks
	return hooks
}
