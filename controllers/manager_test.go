package controllers

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controllertest"
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
	for _, elect := range []bool{false, true} {
		t.Run(fmt.Sprintf("leader election %v", elect), func(t *testing.T) {
			env := controllertest.Start(t)
			cfg := DefaultConfig()
			cfg.LeaderElect = elect
			cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = 2*time.Second, time.Second, 100*time.Millisecond
			cfg.Controllers = []string{"replicaset", "nodeipam"}
			cfg.Timings.ClusterCIDR = "not-a-cidr"
			m, err := NewManager(env.Client, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			// With leader election, a manager that kept the lease after its
			// controllers failed to build would run nothing and keep every
			// other manager waiting: Run must end, and let the lease go.
			done := make(chan error, 1)
			go func() { done <- m.Run(t.Context()) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "nodeipam") {
					t.Errorf("Run returned %v, want the nodeipam build error", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return after a controller failed to build")
			}
			if !elect {
				return
			}
			lease, err := client.For[*coordinationv1.Lease](env.Client).Get(t.Context(), cfg.LeaseNamespace, cfg.LeaseName)
			if err != nil {
				t.Fatal(err)
			}
			if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
				t.Errorf("the lease is still held by %q after the manager stopped", *h)
			}
		})
	}
}
