package api

import (
	"fmt"
	"slices"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ingresses, IngressClasses and NetworkPolicies, as kube-apiserver prints
// them.

var ingressTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Class", Type: "string", Description: "The name of the IngressClass resource that should be used for Ingress"},
	{Name: "Hosts", Type: "string", Description: "Hosts that incoming requests are matched against before the ingress rule"},
	{Name: "Address", Type: "string", Description: "Address is a list containing ingress points for the load-balancer"},
	{Name: "Ports", Type: "string", Description: "Ports of TLS configurations that open"},
	ageColumn,
}, func(ing *networkingv1.Ingress, now time.Time) []any {
	class := "<none>"
	if ing.Spec.IngressClassName != nil {
		class = *ing.Spec.IngressClassName
	}
	ports := "80"
	if len(ing.Spec.TLS) > 0 {
		ports = "80, 443"
	}
	return []any{ing.Name, class, ingressHosts(ing.Spec.Rules), ingressAddress(ing.Status.LoadBalancer), ports, age(ing.CreationTimestamp, now)}
})

// ingressHosts is kubectl's HOSTS: the first three hosts rules name, then
// how many rules more; "*" when no rule names a host.
func ingressHosts(rules []networkingv1.IngressRule) string {
	const shown = 3
	var hosts []string
	for _, r := range rules {
		if len(hosts) == shown {
			return fmt.Sprintf("%s + %d more...", strings.Join(hosts, ","), len(rules)-shown)
		}
		if r.Host != "" {
			hosts = append(hosts, r.Host)
		}
	}
	if len(hosts) == 0 {
		return "*"
	}
	return strings.Join(hosts, ",")
}

// ingressAddress is ADDRESS: the load balancer's IPs and hostnames,
// sorted and without repeats.
func ingressAddress(st networkingv1.IngressLoadBalancerStatus) string {
	var addrs []string
	for _, in := range st.Ingress {
		if in.IP != "" {
			addrs = append(addrs, in.IP)
		}
		if in.Hostname != "" {
			addrs = append(addrs, in.Hostname)
		}
	}
	slices.Sort(addrs)
	return strings.Join(slices.Compact(addrs), ",")
}

var ingressClassTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Controller", Type: "string", Description: "Controller that is responsible for handling this class"},
	{Name: "Parameters", Type: "string", Description: "A reference to a resource with additional parameters"},
	ageColumn,
}, func(ic *networkingv1.IngressClass, now time.Time) []any {
	params := "<none>"
	if p := ic.Spec.Parameters; p != nil {
		params = p.Kind
		if p.APIGroup != nil {
			params += "." + *p.APIGroup
		}
		params += "/" + p.Name
	}
	return []any{ic.Name, ic.Spec.Controller, params, age(ic.CreationTimestamp, now)}
})

var networkPolicyTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Pod-Selector", Type: "string", Description: networkingv1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"]},
	ageColumn,
}, func(np *networkingv1.NetworkPolicy, now time.Time) []any {
	return []any{np.Name, metav1.FormatLabelSelector(&np.Spec.PodSelector), age(np.CreationTimestamp, now)}
})
