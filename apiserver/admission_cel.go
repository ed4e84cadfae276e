package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/internal/kubecel"
)

// errOutOfBudget is kube's error for the expressions of one request
// spending more than kubecel.RuntimeCostBudget together.
var errOutOfBudget = errors.New("validation failed due to running out of cost budget, no further validation rules will be run")

// celBudget is what the expressions of one request may still spend.
type celBudget struct{ left int64 }

func newCELBudget() *celBudget { return &celBudget{left: kubecel.RuntimeCostBudget} }

// eval evaluates p with vars and charges its cost to b (nil: no budget
// but each call's own limit). An evaluation error reads as kube's.
func (b *celBudget) eval(ctx context.Context, p *kubecel.Program, expr string, vars map[string]any) (ref.Val, error) {
	out, cost, err := p.Eval(ctx, vars)
	if b != nil {
		b.left -= int64(cost)
		if b.left < 0 {
			return nil, errOutOfBudget
		}
	}
	if err != nil {
		return nil, fmt.Errorf("expression '%s' resulted in error: %w", expr, err)
	}
	return out, nil
}

// celCondition is a compiled match condition.
type celCondition struct {
	admissionregistrationv1.MatchCondition
	prg *kubecel.Program
}

// celConditions are the match conditions of a webhook or a policy,
// compiled once when their configuration changes; err is why one does not
// compile (it did when written, so this is not expected).
type celConditions struct {
	conds []celCondition
	err   error
}

func compileConditions(env func() (*kubecel.Env, error), conds []admissionregistrationv1.MatchCondition) celConditions {
	if len(conds) == 0 {
		return celConditions{}
	}
	e, err := env()
	if err != nil {
		return celConditions{err: err}
	}
	out := celConditions{conds: make([]celCondition, len(conds))}
	for i, c := range conds {
		prg, err := e.Compile(c.Expression, cel.BoolType)
		if err != nil {
			return celConditions{err: fmt.Errorf("match condition %q: compilation failed: %w", c.Name, err)}
		}
		out.conds[i] = celCondition{MatchCondition: c, prg: prg}
	}
	return out
}

func (c celConditions) empty() bool { return len(c.conds) == 0 && c.err == nil }

// match is kube's matchconditions.Matcher: the request matches unless a
// condition is false; a condition that fails to evaluate, when none is
// false, is an error with failurePolicy Fail and no match with Ignore.
func (c celConditions) match(ctx context.Context, vars map[string]any, fp admissionregistrationv1.FailurePolicyType, budget *celBudget) (bool, error) {
	if c.err != nil {
		if fp == admissionregistrationv1.Ignore {
			return false, nil
		}
		return false, c.err
	}
	var errs []error
	for _, cond := range c.conds {
		out, err := budget.eval(ctx, cond.prg, cond.Expression, vars)
		if errors.Is(err, errOutOfBudget) {
			errs = append(errs, err)
			break
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if b, ok := out.(types.Bool); !ok {
			errs = append(errs, fmt.Errorf("expression '%s' resulted in a %s, want bool", cond.Expression, out.Type().TypeName()))
		} else if !b {
			return false, nil
		}
	}
	if len(errs) > 0 {
		if fp == admissionregistrationv1.Ignore {
			return false, nil
		}
		return false, utilerrors.NewAggregate(errs)
	}
	return true, nil
}

// celInput is the object, oldObject and request variables of a, seen as
// a request for res, as unstructured JSON values: kube's CEL activation
// for admission. object is null on delete, oldObject on create.
func (s *Server) celInput(res *api.Resource, a *attributes, hideName bool) (map[string]any, error) {
	req, err := admissionRequest(res, a, hideName)
	if err != nil {
		return nil, err
	}
	var obj, old any
	if err := unmarshalRaw(req.Object.Raw, &obj); err != nil {
		return nil, err
	}
	if err := unmarshalRaw(req.OldObject.Raw, &old); err != nil {
		return nil, err
	}
	req.Object.Raw, req.OldObject.Raw = nil, nil
	var request any
	if err := toUnstructured(req, &request); err != nil {
		return nil, err
	}
	// kube's request variable has no object nor oldObject: they are variables of their own.
	m := request.(map[string]any)
	delete(m, "object")
	delete(m, "oldObject")
	return map[string]any{"object": obj, "oldObject": old, "request": request}, nil
}

// unmarshalRaw decodes JSON as CEL should see it: whole numbers are
// ints, as in kube, not doubles.
func unmarshalRaw(raw []byte, into *any) error {
	if len(raw) == 0 {
		return nil
	}
	return utiljson.Unmarshal(raw, into)
}

// toUnstructured is v as JSON values (whole numbers as ints); a nil
// pointer is null.
func toUnstructured(v any, into *any) error {
	if v == nil || (reflect.ValueOf(v).Kind() == reflect.Pointer && reflect.ValueOf(v).IsNil()) {
		*into = nil
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return utiljson.Unmarshal(raw, into)
}

// lazyVariables is the variables of a policy as CEL sees them: a map from
// name to value whose values are evaluated when first read, at most once
// per evaluation of the policy, and may read earlier variables (kube's
// composition).
type lazyVariables struct {
	ctx    context.Context
	vars   []policyVariable
	act    map[string]any // the activation each variable is evaluated in; holds this map too
	budget *celBudget
	vals   map[string]ref.Val
}

func newLazyVariables(ctx context.Context, vars []policyVariable, act map[string]any, budget *celBudget) *lazyVariables {
	return &lazyVariables{ctx: ctx, vars: vars, act: act, budget: budget, vals: map[string]ref.Val{}}
}

var lazyVariablesType = types.NewObjectType("kubernetes.variables")

// Get evaluates the variable key names, or remembers the value it had.
// A variable that reads itself, through others or directly, is an error.
func (l *lazyVariables) Get(key ref.Val) ref.Val {
	name, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(key)
	}
	if v, done := l.vals[string(name)]; done {
		if v == nil {
			return types.NewErr("variable %q refers to itself", string(name))
		}
		return v
	}
	for _, v := range l.vars {
		if v.name != string(name) {
			continue
		}
		l.vals[v.name] = nil // being evaluated
		out, err := l.budget.eval(l.ctx, v.prg, v.expr, l.act)
		if err != nil {
			out = types.WrapErr(err)
		}
		l.vals[v.name] = out
		return out
	}
	return types.NewErr("no such key: %s", string(name))
}

// IsSet reports whether key names a variable, for has(variables.x).
func (l *lazyVariables) IsSet(key ref.Val) ref.Val {
	name, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(key)
	}
	for _, v := range l.vars {
		if v.name == string(name) {
			return types.True
		}
	}
	return types.False
}

func (l *lazyVariables) ConvertToNative(reflect.Type) (any, error) {
	return nil, errors.New("variables cannot be converted to a native value")
}
func (l *lazyVariables) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return lazyVariablesType
	}
	return types.NewErr("variables cannot be converted to %s", t.TypeName())
}
func (l *lazyVariables) Equal(other ref.Val) ref.Val { return types.Bool(l == other) }
func (l *lazyVariables) Type() ref.Type              { return lazyVariablesType }
func (l *lazyVariables) Value() any                  { return l }
