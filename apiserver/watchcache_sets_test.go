package apiserver

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// TestPackedSetIsTheMap: a packed set answers every lookup, and every
// selector, as the map it was packed from does.
func TestPackedSetIsTheMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		m := map[string]string{}
		for range r.IntN(12) {
			m[fmt.Sprintf("k%d", r.IntN(20))] = fmt.Sprintf("v%d", r.IntN(3))
		}
		p := pack(m)
		if len(m) == 0 && p != "" {
			t.Fatalf("round %d: an empty map packs to %q, want the empty set", round, p)
		}
		for i := range 22 {
			k := fmt.Sprintf("k%d", i)
			want, wantOK := m[k]
			if got, ok := p.Lookup(k); got != want || ok != wantOK {
				t.Fatalf("round %d: Lookup(%q) = %q, %v; the map has %q, %v", round, k, got, ok, want, wantOK)
			}
			if p.Has(k) != wantOK || p.Get(k) != want {
				t.Fatalf("round %d: Has/Get(%q) disagree with the map %v", round, k, m)
			}
			for _, sel := range []string{k + "=v1", k + "!=v1", k, "!" + k, k + " in (v0,v2)", k + " notin (v0)"} {
				s, err := labels.Parse(sel)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := s.Matches(&p), s.Matches(labels.Set(m)); got != want {
					t.Fatalf("round %d: label selector %q matches %v: %v, the map: %v", round, sel, m, got, want)
				}
			}
			f := fields.OneTermEqualSelector(k, "v1")
			if got, want := f.Matches(&p), f.Matches(fields.Set(m)); got != want {
				t.Fatalf("round %d: field selector %s matches %v: %v, the map: %v", round, f, m, got, want)
			}
		}
	}
}
