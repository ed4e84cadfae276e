package api

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// summarize turns errs into sorted "path: Type" strings, e.g.
// "spec.containers: Required value".
func summarize(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	slices.Sort(out)
	return out
}

// checkErrors fails t unless errs are exactly want (in any order).
func checkErrors(t *testing.T, errs field.ErrorList, want ...string) {
	t.Helper()
	got := summarize(errs)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("errors = %q, want %q\nfull: %v", got, want, errs.ToAggregate())
	}
}

// checkDetail fails t unless some error in errs mentions substr.
func checkDetail(t *testing.T, errs field.ErrorList, substr string) {
	t.Helper()
	for _, e := range errs {
		if strings.Contains(e.Error(), substr) {
			return
		}
	}
	t.Errorf("no error mentions %q: %v", substr, errs.ToAggregate())
}
