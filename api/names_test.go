package api

import (
	"math/rand/v2"
	"strings"
	"testing"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestNameChecksAgree holds the checks of names.go to apimachinery's: on
// every short string over an alphabet of the characters the rules care
// about, and on random longer ones around the length limits, each must
// answer exactly what apimachinery answers.
func TestNameChecksAgree(t *testing.T) {
	// Each fast check must accept exactly what apimachinery accepts: more
	// would let bad input in, less would only be slow, but both are bugs.
	label := func(f func(map[string]string, *field.Path) field.ErrorList, k, v string) bool {
		return len(f(map[string]string{k: v}, field.NewPath("l"))) == 0
	}
	checks := []struct {
		name string
		fast func(string) bool
		kube func(string) bool
	}{
		{"DNS1123Label", dns1123Label, func(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }},
		{"DNS1123Subdomain", dns1123Subdomain, func(s string) bool { return len(validation.IsDNS1123Subdomain(s)) == 0 }},
		{"QualifiedName", qualifiedName, func(s string) bool { return len(validation.IsQualifiedName(s)) == 0 }},
		{"LabelValue", labelValue, func(s string) bool { return len(validation.IsValidLabelValue(s)) == 0 }},
		{"PortName", portName, func(s string) bool { return len(validation.IsValidPortName(s)) == 0 }},
		{"NameIsDNSSubdomain prefix", func(s string) bool { return dns1123Subdomain(maskTrailingDash(s, true)) },
			func(s string) bool { return len(apivalidation.NameIsDNSSubdomain(s, true)) == 0 }},
		{"NameIsDNSLabel prefix", func(s string) bool { return dns1123Label(maskTrailingDash(s, true)) },
			func(s string) bool { return len(apivalidation.NameIsDNSLabel(s, true)) == 0 }},
		{"ValidateLabels key", func(s string) bool { return label(validateLabels, s, "v") },
			func(s string) bool { return label(metav1validation.ValidateLabels, s, "v") }},
		{"ValidateLabels value", func(s string) bool { return label(validateLabels, "k", s) },
			func(s string) bool { return label(metav1validation.ValidateLabels, "k", s) }},
		{"ValidateAnnotations", func(s string) bool { return label(validateAnnotations, s, "v") },
			func(s string) bool { return label(apivalidation.ValidateAnnotations, s, "v") }},
	}
	const alphabet = "a0Z-_./é"
	var inputs []string
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		inputs = append(inputs, prefix)
		if n == 0 {
			return
		}
		for _, c := range strings.Split(alphabet, "") {
			gen(prefix+c, n-1)
		}
	}
	gen("", 5)
	rnd := rand.New(rand.NewPCG(7, 8))
	for range 3000 {
		n := []int{14, 15, 16, 62, 63, 64, 252, 253, 254, 300}[rnd.IntN(10)]
		b := make([]byte, n)
		for i := range b {
			b[i] = "abz09-."[rnd.IntN(7)]
			if rnd.IntN(40) == 0 {
				b[i] = "A_/"[rnd.IntN(3)]
			}
		}
		inputs = append(inputs, string(b), "a"+string(b[1:n-1])+"z", "p.io/"+string(b))
	}
	for _, c := range checks {
		accepted := 0
		for _, in := range inputs {
			if fast, kube := c.fast(in), c.kube(in); fast != kube {
				t.Fatalf("%s(%q): names.go says %v, apimachinery %v", c.name, in, fast, kube)
			}
			if c.fast(in) {
				accepted++
			}
		}
		if accepted == 0 || accepted == len(inputs) {
			t.Errorf("%s accepted %d of %d inputs: the inputs do not exercise it", c.name, accepted, len(inputs))
		}
	}
}
