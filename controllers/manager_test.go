package controllers

import (
	"slices"
	"strings"
	"testing"
)

// TestEnabled follows kube-controller-manager's --controllers: "-name"
// wins over "name", which wins over "*".
func TestEnabled(t *testing.T) {
	all, err := Enabled([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(KnownControllers()) {
		t.Errorf("* enabled %v, want every default-on controller %v", all, KnownControllers())
	}
	for _, tc := range []struct {
		sel        []string
		has, hasnt []string
	}{
		{[]string{"*", "-podgc"}, []string{"replicaset", "deployment"}, []string{"podgc"}},
		{[]string{"replicaset"}, []string{"replicaset"}, []string{"deployment", "podgc"}},
		{[]string{"replicaset", "-replicaset"}, nil, []string{"replicaset"}},
		{nil, nil, []string{"replicaset"}},
	} {
		got, err := Enabled(tc.sel)
		if err != nil {
			t.Fatalf("%v: %v", tc.sel, err)
		}
		for _, n := range tc.has {
			if !slices.Contains(got, n) {
				t.Errorf("%v: %s not enabled (got %v)", tc.sel, n, got)
			}
		}
		for _, n := range tc.hasnt {
			if slices.Contains(got, n) {
				t.Errorf("%v: %s enabled (got %v)", tc.sel, n, got)
			}
		}
	}
}

// TestUnknownControllerListsKnownOnes: a typo is an error that says what
// the choices are.
func TestUnknownControllerListsKnownOnes(t *testing.T) {
	_, err := Enabled([]string{"*", "-replicaset", "replicaste"})
	if err == nil {
		t.Fatal("no error for an unknown controller")
	}
	for _, want := range append([]string{`"replicaste"`}, KnownControllers()...) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}
