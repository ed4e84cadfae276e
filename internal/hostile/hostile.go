// Package hostile builds request bodies that cost far more to decode or
// apply than their size, for the tests that show minictl refuses them:
// the API server's request-limit tests and the end-to-end test that throws
// them at a real `minictl up`.
package hostile

import (
	"fmt"
	"strings"
)

// Nested is a JSON value depth levels deep: {"a":{"a":...1...}}.
func Nested(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
}

// YAMLAliasBomb is the "billion laughs", a ConfigMap named name: nine
// levels of nine aliases of the level below, a few hundred bytes that
// expand to 9^9 strings.
func YAMLAliasBomb(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n", name)
	b.WriteString(`l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	for i := 1; i < 9; i++ {
		a := fmt.Sprintf("*l%d", i-1)
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.Repeat(a+",", 8)+a)
	}
	return b.String()
}

// JSONPatchCopyBomb adds an array of one 1,000-byte string and copies it
// into itself copies times, which would double it each time.
func JSONPatchCopyBomb(copies int) string {
	ops := []string{`{"op":"add","path":"/bomb","value":["` + strings.Repeat("x", 1000) + `"]}`}
	for range copies {
		ops = append(ops, `{"op":"copy","from":"/bomb","path":"/bomb/-"}`)
	}
	return "[" + strings.Join(ops, ",") + "]"
}

// YAMLLongList is a ConfigMap of about size bytes of YAML whose x is a flow
// list of one-character items: half a node per byte, each a microsecond or
// more to parse.
func YAMLLongList(size int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: long\nx: [")
	for b.Len() < size-3 {
		b.WriteString("1,")
	}
	b.WriteString("1]\n")
	return b.String()
}
