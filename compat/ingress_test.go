package compat

import (
	"strings"
	"testing"
	"time"
)

// TestKubectlIngress: kubectl creates an Ingress with no class, which the
// DefaultIngressClass admission gives the class sim; the simulated
// ingress controller gives it an address, and kubectl prints the columns
// it prints against kube-apiserver. A bad one is refused naming the field.
func TestKubectlIngress(t *testing.T) {
	kubectl(t, "create", "ingress", "compat-web", "--rule=web.example.com/*=web:80")
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "ingress", "compat-web", "--wait=false") })
	eventually(t, time.Minute, "the Ingress's address", func() (bool, string) {
		out := kubectl(t, "get", "ingress", "compat-web")
		tb := parseTable(t, out)
		wantHeader(t, tb, "NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE")
		row := tb.find(t, "NAME", "compat-web")
		return tb.col(t, row, "CLASS") == "sim" && tb.col(t, row, "HOSTS") == "web.example.com" &&
			strings.HasPrefix(tb.col(t, row, "ADDRESS"), "192.0.2.") && tb.col(t, row, "PORTS") == "80", out
	})
	tb := parseTable(t, kubectl(t, "get", "ingressclass", "sim"))
	wantHeader(t, tb, "NAME", "CONTROLLER", "PARAMETERS", "AGE")
	if row := tb.find(t, "NAME", "sim"); tb.col(t, row, "CONTROLLER") != "sim.minictl.io/ingress" {
		t.Errorf("ingressclass sim: %v", row)
	}

	r := kubectlRun(t, "", nil, "create", "ingress", "compat-bad", "--rule=10.0.0.1/*=web:80")
	if r.err == nil || !strings.Contains(r.stderr, "spec.rules[0].host") || !strings.Contains(r.stderr, "must be a DNS name, not an IP address") {
		t.Errorf("an IP host: err %v, stderr %q", r.err, r.stderr)
	}
}
