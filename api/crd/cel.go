package crd

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/minictl/minictl/internal/kubecel"
)

// The environments rules compile in: self and oldSelf, with oldSelf an
// optional value for rules that set optionalOldSelf.
var (
	envOnce                     sync.Once
	ruleEnv, optionalOldSelfEnv *kubecel.Env
	envErr                      error
	errNoRules                  = errors.New("no rules")
	errBudget                   = errors.New("out of cost budget")
)

func envs() (*kubecel.Env, *kubecel.Env, error) {
	envOnce.Do(func() {
		ruleEnv, envErr = kubecel.NewEnv(kubecel.Var{Name: "self"}, kubecel.Var{Name: "oldSelf"})
		if envErr == nil {
			optionalOldSelfEnv, envErr = kubecel.NewEnv(kubecel.Var{Name: "self"}, kubecel.Var{Name: "oldSelf", Optional: true})
		}
	})
	return ruleEnv, optionalOldSelfEnv, envErr
}

// celRules mirrors the parts of a schema that hold x-kubernetes-validations
// rules, compiled; a nil *celRules has no rules.
type celRules struct {
	schema     *structural
	rules      []compiledRule
	properties map[string]*celRules
	additional *celRules
	items      *celRules
}

type compiledRule struct {
	rule            apiextensionsv1.ValidationRule
	program         *kubecel.Program
	message         *kubecel.Program
	usesOldSelf     bool
	optionalOldSelf bool
}

// compileRules compiles every rule of the schema; it fails on the first
// rule that does not compile (Validate reports them all).
func compileRules(root *structural) (*celRules, error) {
	r, errs := compileTree(root, nil, nil)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return r, nil
}

// compileTree compiles the rules of s and below it; pth is the schema's
// path for error messages, uncorrelatable where oldSelf stops being usable
// (below the items of a list that is not a map, or an atomic map).
func compileTree(s *structural, pth, uncorrelatable *field.Path) (*celRules, field.ErrorList) {
	if s == nil {
		return nil, nil
	}
	var errs field.ErrorList
	r := &celRules{schema: s}
	for i, rule := range s.Validations {
		rp := pth.Child("x-kubernetes-validations").Index(i)
		c, e := compileRule(rule, rp)
		errs = append(errs, e...)
		if len(e) > 0 {
			continue
		}
		if c.usesOldSelf && uncorrelatable != nil {
			errs = append(errs, field.Invalid(rp.Child("rule"), rule.Rule, fmt.Sprintf("oldSelf cannot be used on the uncorrelatable portion of the schema within %v", uncorrelatable)))
		}
		r.rules = append(r.rules, c)
	}
	for _, k := range sortedKeys(s.Properties) {
		sub := uncorrelatable
		if sub == nil && s.MapType == "atomic" {
			sub = pth
		}
		child, e := compileTree(s.Properties[k], pth.Child("properties").Key(k), sub)
		errs = append(errs, e...)
		if child != nil {
			if r.properties == nil {
				r.properties = map[string]*celRules{}
			}
			r.properties[k] = child
		}
	}
	var e field.ErrorList
	r.additional, e = compileTree(s.AdditionalProperties, pth.Child("additionalProperties"), uncorrelatable)
	errs = append(errs, e...)
	itemsUncorrelatable := uncorrelatable
	if itemsUncorrelatable == nil && s.ListType != "map" {
		itemsUncorrelatable = pth
	}
	r.items, e = compileTree(s.Items, pth.Child("items"), itemsUncorrelatable)
	errs = append(errs, e...)
	if len(r.rules) == 0 && r.properties == nil && r.additional == nil && r.items == nil {
		return nil, errs
	}
	return r, errs
}

func compileRule(rule apiextensionsv1.ValidationRule, rp *field.Path) (compiledRule, field.ErrorList) {
	c := compiledRule{rule: rule, optionalOldSelf: rule.OptionalOldSelf != nil && *rule.OptionalOldSelf}
	env, optEnv, err := envs()
	if err != nil {
		return c, field.ErrorList{field.InternalError(rp, err)}
	}
	if c.optionalOldSelf {
		env = optEnv
	}
	var errs field.ErrorList
	if strings.TrimSpace(rule.Rule) == "" {
		return c, nil // reported by validateRuleFields
	}
	c.program, err = env.Compile(rule.Rule, cel.BoolType)
	switch {
	case errors.Is(err, kubecel.ErrWrongType):
		errs = append(errs, field.Invalid(rp.Child("rule"), rule, "cel expression must evaluate to a bool"))
	case err != nil:
		errs = append(errs, field.Invalid(rp.Child("rule"), rule, "compilation failed: "+err.Error()))
	default:
		c.usesOldSelf = c.program.Uses("oldSelf")
		if !c.usesOldSelf && rule.OptionalOldSelf != nil {
			errs = append(errs, field.Invalid(rp.Child("optionalOldSelf"), *rule.OptionalOldSelf, "may not be set if oldSelf is not used in rule"))
		}
	}
	if strings.TrimSpace(rule.MessageExpression) != "" {
		c.message, err = env.Compile(rule.MessageExpression, cel.StringType)
		switch {
		case errors.Is(err, kubecel.ErrWrongType):
			errs = append(errs, field.Invalid(rp.Child("messageExpression"), rule, "messageExpression must evaluate to a string"))
		case err != nil:
			errs = append(errs, field.Invalid(rp.Child("messageExpression"), rule, "messageExpression compilation failed: "+err.Error()))
		}
	}
	return c, errs
}

// validateRulesCompile reports every rule of a definition's schema that
// does not compile, or uses oldSelf where there is no old value to
// correlate, under the schema's path (sp).
func validateRulesCompile(_ *apiextensionsv1.JSONSchemaProps, root *structural, sp *field.Path) field.ErrorList {
	_, errs := compileTree(root, sp, nil)
	return errs
}

// validate evaluates the rules against a whole object (and the object it
// replaces, nil on create) within kube's runtime cost budget.
func (r *celRules) validate(obj, old map[string]any) field.ErrorList {
	var oldV any
	if old != nil {
		oldV = old
	}
	return r.validateAt(nil, obj, oldV)
}

// validateAt evaluates the rules of r and below against obj at pth.
func (r *celRules) validateAt(pth *field.Path, obj, old any) field.ErrorList {
	e := &evaluation{ctx: context.Background(), budget: kubecel.RuntimeCostBudget}
	e.walk(r, pth, obj, old, old != nil)
	return e.errs
}

type evaluation struct {
	ctx    context.Context
	budget int64
	errs   field.ErrorList
	done   bool // out of budget: no further rules run
}

func (e *evaluation) walk(r *celRules, pth *field.Path, obj, old any, hasOld bool) {
	if r == nil || e.done || obj == nil {
		return
	}
	e.evalRules(r, pth, obj, old, hasOld)
	switch x := obj.(type) {
	case map[string]any:
		oldMap, _ := old.(map[string]any)
		for _, k := range sortedKeys(x) {
			child, cp := r.properties[k], pth.Child(k)
			if child == nil && r.schema.Properties[k] == nil && r.additional != nil {
				child, cp = r.additional, pth.Key(k)
			}
			if child == nil {
				continue
			}
			ov, ok := oldMap[k]
			e.walk(child, cp, x[k], ov, hasOld && ok)
		}
	case []any:
		if r.items == nil {
			return
		}
		oldList, _ := old.([]any)
		for i, v := range x {
			ov, ok := correlatedItem(r.schema, v, oldList)
			e.walk(r.items, pth.Index(i), v, ov, hasOld && ok)
		}
	}
}

// correlatedItem finds the old item of a list-type map with the same keys
// as item; items of other lists have no old value.
func correlatedItem(s *structural, item any, old []any) (any, bool) {
	if s.ListType != "map" || len(s.ListMapKeys) == 0 {
		return nil, false
	}
	m, ok := item.(map[string]any)
	if !ok {
		return nil, false
	}
	for _, o := range old {
		om, ok := o.(map[string]any)
		if !ok {
			continue
		}
		same := true
		for _, k := range s.ListMapKeys {
			if !reflect.DeepEqual(m[k], om[k]) {
				same = false
				break
			}
		}
		if same {
			return o, true
		}
	}
	return nil, false
}

func (e *evaluation) evalRules(r *celRules, pth *field.Path, obj, old any, hasOld bool) {
	typ := r.schema.Type
	unchanged := hasOld && reflect.DeepEqual(obj, old)
	for _, c := range r.rules {
		if e.done {
			return
		}
		if c.program == nil {
			continue
		}
		if c.usesOldSelf && !hasOld && !c.optionalOldSelf {
			continue // transition rules need an old value
		}
		if !c.usesOldSelf && unchanged {
			continue // ratcheting: an unchanged value keeps passing
		}
		vars := map[string]any{"self": obj}
		switch {
		case c.optionalOldSelf && hasOld:
			vars["oldSelf"] = kubecel.Optional(old)
		case c.optionalOldSelf:
			vars["oldSelf"] = types.OptionalNone
		case hasOld:
			vars["oldSelf"] = old
		}
		out, cost, err := c.program.Eval(e.ctx, vars)
		if e.spend(pth, typ, cost) {
			return
		}
		ruleText := ruleErrorString(c.rule)
		if err != nil {
			msg := err.Error()
			switch {
			case strings.HasPrefix(msg, "no such overload"):
				e.errs = append(e.errs, field.Invalid(pth, typ, fmt.Sprintf("'%v': call arguments did not match a supported operator, function or macro signature for rule: %v", err, ruleText)))
			case strings.HasPrefix(msg, "operation cancelled: actual cost limit exceeded"):
				e.errs = append(e.errs, field.Invalid(pth, typ, fmt.Sprintf("'%v': no further validation rules will be run due to call cost exceeds limit for rule: %v", err, ruleText)))
				e.done = true
			default:
				e.errs = append(e.errs, field.Invalid(pth, typ, fmt.Sprintf("%v evaluating rule: %v", err, ruleText)))
			}
			continue
		}
		if out == types.True {
			continue
		}
		if out.Type() != types.BoolType {
			e.errs = append(e.errs, field.Invalid(pth, typ, fmt.Sprintf("cel expression must evaluate to a bool, evaluating rule: %v", ruleText)))
			continue
		}
		fp := pth
		if c.rule.FieldPath != "" {
			if steps, _, err := resolveFieldPath(c.rule.FieldPath, r.schema, true); err == nil {
				for _, s := range steps {
					if i, err := strconv.Atoi(strings.Trim(s, "[]")); err == nil && strings.HasPrefix(s, "[") {
						fp = fp.Index(i)
					} else {
						fp = fp.Child(s)
					}
				}
			}
		}
		detail := ""
		if c.message != nil {
			detail = e.message(c, vars, fp, typ)
			if e.done {
				return
			}
		}
		if detail == "" {
			detail = ruleMessageOrDefault(c.rule)
		}
		var value any = obj
		if typ == "object" || typ == "array" {
			value = field.OmitValueType{}
		}
		e.errs = append(e.errs, fieldErrorForReason(fp, value, detail, c.rule.Reason))
	}
}

// spend charges cost to the budget; when it runs out it records kube's
// error and stops all further rules.
func (e *evaluation) spend(pth *field.Path, typ string, cost uint64) bool {
	if int64(cost) > e.budget || cost > uint64(kubecel.RuntimeCostBudget) {
		e.errs = append(e.errs, field.Invalid(pth, typ, "validation failed due to running out of cost budget, no further validation rules will be run"))
		e.done = true
		return true
	}
	e.budget -= int64(cost)
	return false
}

// message evaluates a rule's messageExpression; "" means fall back to the
// rule's message.
func (e *evaluation) message(c compiledRule, vars map[string]any, fp *field.Path, typ string) string {
	out, cost, err := c.message.Eval(e.ctx, vars)
	if e.spend(fp, typ, cost) {
		return ""
	}
	if err != nil {
		if strings.HasPrefix(err.Error(), "operation cancelled: actual cost limit exceeded") {
			e.errs = append(e.errs, field.Invalid(fp, typ, fmt.Sprintf("no further validation rules will be run due to call cost exceeds limit for messageExpression: %q", c.rule.MessageExpression)))
			e.done = true
		}
		return ""
	}
	s, ok := out.Value().(string)
	s = strings.TrimSpace(s)
	if !ok || s == "" || len(s) > kubecel.MaxMessageLength || strings.ContainsAny(s, "\n\r") {
		return ""
	}
	return s
}

func fieldErrorForReason(pth *field.Path, value any, detail string, reason *apiextensionsv1.FieldValueErrorReason) *field.Error {
	if reason == nil {
		return field.Invalid(pth, value, detail)
	}
	switch *reason {
	case apiextensionsv1.FieldValueForbidden:
		return field.Forbidden(pth, detail)
	case apiextensionsv1.FieldValueRequired:
		return field.Required(pth, detail)
	case apiextensionsv1.FieldValueDuplicate:
		return field.Duplicate(pth, value)
	}
	return field.Invalid(pth, value, detail)
}

func ruleMessageOrDefault(rule apiextensionsv1.ValidationRule) string {
	if rule.Message == "" {
		return "failed rule: " + ruleErrorString(rule)
	}
	return strings.TrimSpace(rule.Message)
}

func ruleErrorString(rule apiextensionsv1.ValidationRule) string {
	if rule.Message != "" {
		return strings.TrimSpace(rule.Message)
	}
	return strings.TrimSpace(rule.Rule)
}
