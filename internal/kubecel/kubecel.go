// Package kubecel is the CEL environment Kubernetes evaluates user rules
// in (x-kubernetes-validations of custom resources, and next
// ValidatingAdmissionPolicy), written on cel-go and its extension libraries.
//
// Properties:
//   - An Env is immutable and safe for concurrent use; so is a Program.
//   - Every evaluation is bounded: a Program stops at PerCallLimit cost
//     units, and Eval reports the cost it spent so that a caller can keep
//     a budget across many rules (RuntimeCostBudget per request).
//   - The libraries are the ones users meet in Kubernetes rules: cel-go's
//     standard functions, optional types, strings (v2), sets, two-variable
//     comprehensions and cel.bind, and Kubernetes' list and regex
//     functions (isSorted, sum, min, max, indexOf, lastIndexOf, find,
//     findAll), plus url parsing (isURL, url, getScheme, getHost, ...).
//   - Variables are dynamically typed: a rule that reads a field of the
//     wrong type fails when it is evaluated, not when it is compiled.
package kubecel

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
)

const (
	// PerCallLimit is the most cost one evaluation of one expression may
	// spend, kube-apiserver's limit.
	PerCallLimit = 1_000_000
	// RuntimeCostBudget is the most cost the rules of one request may
	// spend together, kube-apiserver's budget.
	RuntimeCostBudget = 10_000_000
	// MaxMessageLength bounds what a message expression may produce.
	MaxMessageLength = 5 * 1024
)

// Var declares a variable an expression may use. Optional variables hold
// an optional value (optional.of(x) or optional.none()).
type Var struct {
	Name     string
	Optional bool
}

// Env compiles expressions over a fixed set of variables.
type Env struct {
	env *cel.Env
}

// NewEnv returns an environment with the Kubernetes libraries and vars.
func NewEnv(vars ...Var) (*Env, error) {
	opts := []cel.EnvOption{
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(ext.StringsVersion(2)),
		ext.Sets(),
		ext.Bindings(),
		ext.TwoVarComprehensions(),
		listsLibrary,
		regexLibrary,
		urlLibrary,
	}
	for _, v := range vars {
		t := cel.DynType
		if v.Optional {
			t = cel.OptionalType(cel.DynType)
		}
		opts = append(opts, cel.Variable(v.Name, t))
	}
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, fmt.Errorf("cel environment: %w", err)
	}
	return &Env{env: env}, nil
}

// Program is a compiled expression.
type Program struct {
	prg  cel.Program
	vars map[string]bool
}

// ErrWrongType is wrapped by Compile's error when the expression cannot
// produce the type asked for.
var ErrWrongType = errors.New("wrong result type")

// Compile parses and checks expr. want is the type its result must have
// (cel.BoolType, cel.StringType); an expression of dynamic type is
// accepted and checked when it is evaluated. A compile error reads as
// cel-go words it ("ERROR: <input>:1:6: ...").
func (e *Env) Compile(expr string, want *cel.Type) (*Program, error) {
	ast, iss := e.env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if out := ast.OutputType(); want != nil && !out.IsExactType(want) && !out.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("%w: %s, want %s", ErrWrongType, out, want)
	}
	prg, err := e.env.Program(ast,
		cel.CostLimit(PerCallLimit),
		cel.CostTracking(nil),
		cel.EvalOptions(cel.OptOptimize),
		cel.InterruptCheckFrequency(100),
	)
	if err != nil {
		return nil, fmt.Errorf("program instantiation failed: %w", err)
	}
	vars := map[string]bool{}
	checked, err := cel.AstToCheckedExpr(ast)
	if err == nil {
		for _, r := range checked.GetReferenceMap() {
			if r.GetName() != "" {
				vars[r.GetName()] = true
			}
		}
	}
	return &Program{prg: prg, vars: vars}, nil
}

// Uses reports whether the expression reads the variable name.
func (p *Program) Uses(name string) bool { return p.vars[name] }

// Eval evaluates the program with the variables' values (unstructured
// JSON values, or ref.Val such as types.OptionalNone) and returns the
// result and the cost spent, also when evaluation fails.
func (p *Program) Eval(ctx context.Context, vars map[string]any) (ref.Val, uint64, error) {
	act := make(map[string]any, len(vars))
	for k, v := range vars {
		if _, ok := v.(ref.Val); ok {
			act[k] = v
			continue
		}
		act[k] = types.DefaultTypeAdapter.NativeToValue(v)
	}
	out, det, err := p.prg.ContextEval(ctx, act)
	var cost uint64
	if det != nil && det.ActualCost() != nil {
		cost = *det.ActualCost()
	}
	return out, cost, err
}

// Optional wraps v as the value of an optional variable; nil is none.
func Optional(v any) ref.Val {
	if v == nil {
		return types.OptionalNone
	}
	return types.OptionalOf(types.DefaultTypeAdapter.NativeToValue(v))
}
