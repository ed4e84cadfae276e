package controllers

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minictl/minictl/client"
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

// TestBuildErrorStopsTheTerm: a controller that cannot be built (a bad
// --cluster-cidr) makes Run return its error rather than hang with the
// others half started.
func TestBuildErrorStopsTheTerm(t *testing.T) {
	rc, err := client.New(&client.Config{Server: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.LeaderElect = false
	cfg.Controllers = []string{"replicaset", "nodeipam"}
	cfg.Timings.ClusterCIDR = "not-a-cidr"
	m, err := NewManager(rc, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "nodeipam") {
			t.Errorf("Run returned %v, want the nodeipam build error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after a controller failed to build")
	}
}
