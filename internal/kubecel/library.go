package kubecel

import (
	"net/url"
	"regexp"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// listsLibrary holds Kubernetes' list functions: isSorted, sum, min, max,
// indexOf and lastIndexOf on lists of comparable values.
var listsLibrary = cel.Lib(funcs{
	cel.Function("isSorted", cel.MemberOverload("list_is_sorted", []*cel.Type{cel.ListType(cel.DynType)}, cel.BoolType,
		cel.UnaryBinding(func(l ref.Val) ref.Val { return isSorted(l) }))),
	cel.Function("sum", cel.MemberOverload("list_sum", []*cel.Type{cel.ListType(cel.DynType)}, cel.DynType,
		cel.UnaryBinding(func(l ref.Val) ref.Val { return fold(l, add, types.IntZero) }))),
	cel.Function("min", cel.MemberOverload("list_min", []*cel.Type{cel.ListType(cel.DynType)}, cel.DynType,
		cel.UnaryBinding(func(l ref.Val) ref.Val { return extreme(l, -1) }))),
	cel.Function("max", cel.MemberOverload("list_max", []*cel.Type{cel.ListType(cel.DynType)}, cel.DynType,
		cel.UnaryBinding(func(l ref.Val) ref.Val { return extreme(l, 1) }))),
	cel.Function("indexOf", cel.MemberOverload("list_index_of", []*cel.Type{cel.ListType(cel.DynType), cel.DynType}, cel.IntType,
		cel.BinaryBinding(func(l, v ref.Val) ref.Val { return indexOf(l, v, false) }))),
	cel.Function("lastIndexOf", cel.MemberOverload("list_last_index_of", []*cel.Type{cel.ListType(cel.DynType), cel.DynType}, cel.IntType,
		cel.BinaryBinding(func(l, v ref.Val) ref.Val { return indexOf(l, v, true) }))),
})

// regexLibrary holds Kubernetes' regex functions: find and findAll.
var regexLibrary = cel.Lib(funcs{
	cel.Function("find", cel.MemberOverload("string_find_string", []*cel.Type{cel.StringType, cel.StringType}, cel.StringType,
		cel.BinaryBinding(func(s, re ref.Val) ref.Val {
			r, err := regexp.Compile(string(re.(types.String)))
			if err != nil {
				return types.WrapErr(err)
			}
			return types.String(r.FindString(string(s.(types.String))))
		}))),
	cel.Function("findAll",
		cel.MemberOverload("string_find_all_string", []*cel.Type{cel.StringType, cel.StringType}, cel.ListType(cel.StringType),
			cel.BinaryBinding(func(s, re ref.Val) ref.Val { return findAll(s, re, -1) })),
		cel.MemberOverload("string_find_all_string_int", []*cel.Type{cel.StringType, cel.StringType, cel.IntType}, cel.ListType(cel.StringType),
			cel.FunctionBinding(func(args ...ref.Val) ref.Val { return findAll(args[0], args[1], int(args[2].(types.Int))) }))),
})

// urlLibrary holds Kubernetes' URL functions: isURL, url, and the
// accessors of a URL (as a map-like value: getScheme, getHost,
// getHostname, getPort, getEscapedPath, getQuery).
var urlLibrary = cel.Lib(funcs{
	cel.Function("isURL", cel.Overload("is_url_string", []*cel.Type{cel.StringType}, cel.BoolType,
		cel.UnaryBinding(func(s ref.Val) ref.Val {
			_, err := url.ParseRequestURI(string(s.(types.String)))
			return types.Bool(err == nil)
		}))),
	cel.Function("url", cel.Overload("string_to_url", []*cel.Type{cel.StringType}, cel.DynType,
		cel.UnaryBinding(func(s ref.Val) ref.Val {
			u, err := url.ParseRequestURI(string(s.(types.String)))
			if err != nil {
				return types.NewErr("URL parse error during conversion from string: %v", err)
			}
			q := map[string]any{}
			for k, vs := range u.Query() {
				q[k] = vs
			}
			return types.DefaultTypeAdapter.NativeToValue(map[string]any{
				"scheme": u.Scheme, "host": u.Host, "hostname": u.Hostname(), "port": u.Port(),
				"escapedPath": u.EscapedPath(), "query": q,
			})
		}))),
	urlAccessor("getScheme", "scheme"), urlAccessor("getHost", "host"), urlAccessor("getHostname", "hostname"),
	urlAccessor("getPort", "port"), urlAccessor("getEscapedPath", "escapedPath"), urlAccessor("getQuery", "query"),
})

func urlAccessor(fn, key string) cel.EnvOption {
	return cel.Function(fn, cel.MemberOverload("url_"+fn, []*cel.Type{cel.DynType}, cel.DynType,
		cel.UnaryBinding(func(u ref.Val) ref.Val {
			m, ok := u.(traits.Mapper)
			if !ok {
				return types.NewErr("no such overload: %s", fn)
			}
			return m.Get(types.String(key))
		})))
}

// funcs is a cel.Library made of environment options.
type funcs []cel.EnvOption

func (f funcs) CompileOptions() []cel.EnvOption { return f }
func (f funcs) ProgramOptions() []cel.ProgramOption {
	return nil
}

func findAll(s, re ref.Val, n int) ref.Val {
	r, err := regexp.Compile(string(re.(types.String)))
	if err != nil {
		return types.WrapErr(err)
	}
	found := r.FindAllString(string(s.(types.String)), n)
	if found == nil {
		found = []string{}
	}
	return types.DefaultTypeAdapter.NativeToValue(found)
}

func items(l ref.Val) ([]ref.Val, ref.Val) {
	lister, ok := l.(traits.Lister)
	if !ok {
		return nil, types.NewErr("no such overload")
	}
	var out []ref.Val
	it := lister.Iterator()
	for it.HasNext() == types.True {
		out = append(out, it.Next())
	}
	return out, nil
}

func compare(a, b ref.Val) (int, ref.Val) {
	c, ok := a.(traits.Comparer)
	if !ok {
		return 0, types.NewErr("no such overload")
	}
	r := c.Compare(b)
	i, ok := r.(types.Int)
	if !ok {
		return 0, r
	}
	return int(i), nil
}

func isSorted(l ref.Val) ref.Val {
	vs, err := items(l)
	if err != nil {
		return err
	}
	for i := 1; i < len(vs); i++ {
		c, err := compare(vs[i-1], vs[i])
		if err != nil {
			return err
		}
		if c > 0 {
			return types.False
		}
	}
	return types.True
}

func add(a, b ref.Val) ref.Val {
	adder, ok := a.(traits.Adder)
	if !ok {
		return types.NewErr("no such overload")
	}
	return adder.Add(b)
}

func fold(l ref.Val, f func(a, b ref.Val) ref.Val, zero ref.Val) ref.Val {
	vs, err := items(l)
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		return zero
	}
	acc := vs[0]
	for _, v := range vs[1:] {
		acc = f(acc, v)
		if types.IsError(acc) {
			return acc
		}
	}
	return acc
}

func extreme(l ref.Val, sign int) ref.Val {
	vs, err := items(l)
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		return types.NewErr("%s called on empty list", map[int]string{-1: "min", 1: "max"}[sign])
	}
	best := vs[0]
	for _, v := range vs[1:] {
		c, err := compare(v, best)
		if err != nil {
			return err
		}
		if c*sign > 0 {
			best = v
		}
	}
	return best
}

func indexOf(l, v ref.Val, last bool) ref.Val {
	vs, err := items(l)
	if err != nil {
		return err
	}
	found := -1
	for i, e := range vs {
		if e.Equal(v) == types.True {
			found = i
			if !last {
				break
			}
		}
	}
	return types.Int(found)
}
