package kubecel

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

func TestLibraries(t *testing.T) {
	env, err := NewEnv(Var{Name: "self"})
	if err != nil {
		t.Fatal(err)
	}
	self := map[string]any{
		"ints": []any{int64(3), int64(1), int64(2)}, "sorted": []any{"a", "b"},
		"s": "abc123def45", "u": "https://example.com:8443/a%20b?x=1",
	}
	tests := []string{
		"!self.ints.isSorted() && self.sorted.isSorted()",
		"self.ints.sum() == 6 && self.ints.min() == 1 && self.ints.max() == 3",
		"self.ints.indexOf(1) == 1 && self.ints.lastIndexOf(9) == -1",
		"self.s.find('[0-9]+') == '123' && self.s.findAll('[0-9]+') == ['123', '45'] && self.s.findAll('[0-9]', 2).size() == 2",
		"isURL(self.u) && !isURL('not a url') && url(self.u).getHost() == 'example.com:8443' && url(self.u).getPort() == '8443'",
		"url(self.u).getScheme() == 'https' && url(self.u).getEscapedPath() == '/a%20b' && url(self.u).getQuery()['x'] == ['1']",
		"self.s.upperAscii() == 'ABC123DEF45' && ['a', 'b'].join('-') == 'a-b'",
		"sets.contains(self.sorted, ['a']) && cel.bind(x, self.ints, x.size() == 3)",
		"self.ints.all(i, v, i >= 0 && v > 0) && optional.of(1).hasValue()",
		"1 < 1.5",
	}
	for _, expr := range tests {
		t.Run(expr, func(t *testing.T) {
			p, err := env.Compile(expr, cel.BoolType)
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			out, cost, err := p.Eval(context.Background(), map[string]any{"self": self})
			if err != nil || out != types.True {
				t.Fatalf("= %v, %v; want true", out, err)
			}
			if cost == 0 {
				t.Errorf("cost 0: evaluations must be metered")
			}
		})
	}
}

func TestCompile(t *testing.T) {
	env, err := NewEnv(Var{Name: "self"}, Var{Name: "oldSelf", Optional: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Compile("'x'", cel.BoolType); !errors.Is(err, ErrWrongType) {
		t.Errorf("string result for a bool rule: err = %v, want ErrWrongType", err)
	}
	if _, err := env.Compile("self >", cel.BoolType); err == nil || !strings.Contains(err.Error(), "Syntax error") {
		t.Errorf("syntax error: err = %v", err)
	}
	p, err := env.Compile("!oldSelf.hasValue() || oldSelf.value() == self", cel.BoolType)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Uses("oldSelf") || !p.Uses("self") {
		t.Errorf("Uses: oldSelf %v, self %v; want both", p.Uses("oldSelf"), p.Uses("self"))
	}
	for _, tc := range []struct {
		old  any
		want types.Bool
	}{{nil, true}, {int64(1), true}, {int64(2), false}} {
		out, _, err := p.Eval(context.Background(), map[string]any{"self": int64(1), "oldSelf": Optional(tc.old)})
		if err != nil || out != tc.want {
			t.Errorf("oldSelf %v: = %v, %v; want %v", tc.old, out, err, tc.want)
		}
	}
}

func TestPerCallLimit(t *testing.T) {
	env, err := NewEnv(Var{Name: "self"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := env.Compile("self.all(a, self.all(b, self.all(c, a + b + c >= 0)))", cel.BoolType)
	if err != nil {
		t.Fatal(err)
	}
	list := make([]any, 300)
	for i := range list {
		list[i] = int64(i)
	}
	_, cost, err := p.Eval(context.Background(), map[string]any{"self": list})
	if err == nil || !strings.Contains(err.Error(), "actual cost limit exceeded") {
		t.Fatalf("err = %v, want the cost limit", err)
	}
	if cost < PerCallLimit {
		t.Errorf("cost = %d, want at least %d", cost, PerCallLimit)
	}
}
