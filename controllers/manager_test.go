package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/internal/minitest"
)

// TestEnabled follows kube-controller-manager's --controllers: "-name"
// wins over "name", which wins over "*".
func TestEnabled(t *testing.T) {
	all, err := Enabled([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	// Every controller but kube's off-by-default bootstrapsigner and
	// tokencleaner.
	offByDefault := []string{"bootstrapsigner", "tokencleaner"}
	if len(all) != len(KnownControllers())-len(offByDefault) {
		t.Errorf("* enabled %v, want every default-on controller of %v", all, KnownControllers())
	}
	for _, tc := range []struct {
		sel        []string
		has, hasnt []string
	}{
		{[]string{"*", "-podgc"}, []string{"replicaset", "deployment"}, []string{"podgc"}},
		{[]string{"*"}, []string{"csrsigning", "csrapproving", "csrcleaner"}, offByDefault},
		{[]string{"*", "bootstrapsigner", "tokencleaner"}, append([]string{"replicaset"}, offByDefault...), nil},
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

// TestJSONLogCarriesEachKeyOnce runs every controller with a JSON log and
// checks that no line carries a key twice, and that a controller's lines
// say which controller it is, under its kube-controller-manager name:
// "endpoint" for the endpoints controller.
func TestJSONLogCarriesEachKeyOnce(t *testing.T) {
	env := controllertest.Start(t)
	var buf minitest.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := DefaultConfig()
	cfg.LeaderElect = false
	m, err := NewManager(env.Client, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stop := sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { _ = stop() })

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if _, err := client.For[*corev1.Service](env.Client).Create(t.Context(), svc); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the endpoint controller's line about default/web", func() (bool, string) {
		return strings.Contains(buf.String(), `"controller":"endpoint"`) && strings.Contains(buf.String(), "default/web"), ""
	})
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}

	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if dup := duplicateKey(t, line); dup != "" {
			t.Errorf("key %q twice in %s", dup, line)
		}
		var rec struct {
			Controller string `json:"controller"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err == nil && rec.Controller != "" {
			seen[rec.Controller] = true
		}
	}
	for name := range seen {
		if !slices.Contains(KnownControllers(), name) {
			t.Errorf("a line says controller=%q, which is no --controllers name (%v)", name, KnownControllers())
		}
	}
	if !seen["endpoint"] {
		t.Error("no line says controller=endpoint")
	}
}

// duplicateKey returns a key that appears twice in one object of the JSON
// line, or "".
func duplicateKey(t *testing.T, line string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	var walk func() string
	walk = func() string {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		switch tok {
		case json.Delim('{'):
			keys := map[string]bool{}
			for dec.More() {
				k, _ := dec.Token()
				key := k.(string)
				if keys[key] {
					return key
				}
				keys[key] = true
				if dup := walk(); dup != "" {
					return dup
				}
			}
			_, _ = dec.Token() // }
		case json.Delim('['):
			for dec.More() {
				if dup := walk(); dup != "" {
					return dup
				}
			}
			_, _ = dec.Token() // ]
		}
		return ""
	}
	return walk()
}
