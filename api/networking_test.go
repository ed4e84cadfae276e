package api

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// TestIngressColumns: HOSTS shows three hosts and counts the rest, "*" when
// no rule names one; ADDRESS lists every IP and hostname once, sorted.
func TestIngressColumns(t *testing.T) {
	rules := func(hosts ...string) []networkingv1.IngressRule {
		var rs []networkingv1.IngressRule
		for _, h := range hosts {
			rs = append(rs, networkingv1.IngressRule{Host: h})
		}
		return rs
	}
	for _, tc := range []struct {
		rules []networkingv1.IngressRule
		want  string
	}{
		{nil, "*"},
		{rules(""), "*"},
		{rules("a.example.com", "", "b.example.com"), "a.example.com,b.example.com"},
		{rules("a", "b", "c", "d", "e"), "a,b,c + 2 more..."},
	} {
		if got := ingressHosts(tc.rules); got != tc.want {
			t.Errorf("hosts of %v = %q, want %q", tc.rules, got, tc.want)
		}
	}
	st := networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{
		{IP: "192.0.2.9"}, {Hostname: "lb.example.com"}, {IP: "192.0.2.10"}, {IP: "192.0.2.9"},
	}}
	if got, want := ingressAddress(st), "192.0.2.10,192.0.2.9,lb.example.com"; got != want {
		t.Errorf("address = %q, want %q", got, want)
	}
}
