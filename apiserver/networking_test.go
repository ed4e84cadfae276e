package apiserver_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/internal/testenv"
)

func networkingPath(ns, resource, name string) string {
	p := "/apis/networking.k8s.io/v1/"
	if ns != "" {
		p += "namespaces/" + ns + "/"
	}
	p += resource
	if name != "" {
		p += "/" + name
	}
	return p
}

func ingress(name string) *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host: "web.example.com",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80},
					}},
				}},
			}},
		}}},
	}
}

func ingressClass(name, controller string, isDefault bool) *networkingv1.IngressClass {
	ic := &networkingv1.IngressClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IngressClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       networkingv1.IngressClassSpec{Controller: controller},
	}
	if isDefault {
		ic.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
	}
	return ic
}

func networkPolicy(name string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(5432))}},
				From:  []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}},
			}},
		},
	}
}

// wantInvalid checks a 422 Invalid whose causes name field and whose
// message says want, and that nothing was written.
func wantInvalid(t *testing.T, env *testenv.Env, method, path string, body any, field, want string) {
	t.Helper()
	before := revision(t, env)
	st := do(t, env, method, path, jsonType, body).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	var fields []string
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			fields = append(fields, c.Field)
		}
	}
	if !slices.Contains(fields, field) || !strings.Contains(st.Message, want) {
		t.Errorf("causes name %v, message %q; want %s and %q", fields, st.Message, field, want)
	}
	if after := revision(t, env); after != before {
		t.Errorf("etcd revision moved from %d to %d: something was written", before, after)
	}
}

// TestIngressValidation refuses, each with a 422 naming the field in
// kube-apiserver's words, the Ingresses kube-apiserver refuses.
func TestIngressValidation(t *testing.T) {
	env := testenv.Start(t)
	path := networkingPath("default", "ingresses", "")
	exact, custom := networkingv1.PathTypeExact, networkingv1.PathType("Regex")
	tests := []struct {
		name, field, message string
		mutate               func(ing *networkingv1.Ingress)
	}{
		{"no rules and no default backend", "spec", "either `defaultBackend` or `rules` must be specified",
			func(ing *networkingv1.Ingress) { ing.Spec.Rules = nil }},
		{"an IP address as host", "spec.rules[0].host", "must be a DNS name, not an IP address",
			func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "10.0.0.1" }},
		{"a wildcard in the middle of a host", "spec.rules[0].host", "a wildcard DNS-1123 subdomain must start with '*.'",
			func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "web.*.example.com" }},
		{"an upper-case host", "spec.rules[0].host", "a lowercase RFC 1123 subdomain",
			func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "Web.example.com" }},
		{"http without paths", "spec.rules[0].http.paths", "Required value",
			func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths = nil }},
		{"no pathType", "spec.rules[0].http.paths[0].pathType", "pathType must be specified",
			func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[0].PathType = nil }},
		{"an unknown pathType", "spec.rules[0].http.paths[0].pathType", `Unsupported value: "Regex"`,
			func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[0].PathType = &custom }},
		{"a relative Exact path", "spec.rules[0].http.paths[0].path", "must be an absolute path",
			func(ing *networkingv1.Ingress) {
				ing.Spec.Rules[0].HTTP.Paths[0].PathType = &exact
				ing.Spec.Rules[0].HTTP.Paths[0].Path = "api"
			}},
		{"a Prefix path with //", "spec.rules[0].http.paths[0].path", "must not contain '//'",
			func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[0].Path = "/api//v1" }},
		{"a Prefix path ending in /..", "spec.rules[0].http.paths[0].path", "cannot end with '/..'",
			func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[0].Path = "/api/.." }},
		{"a backend with neither service nor resource", "spec.rules[0].http.paths[0].backend", "resource or service backend is required",
			func(ing *networkingv1.Ingress) {
				ing.Spec.Rules[0].HTTP.Paths[0].Backend = networkingv1.IngressBackend{}
			}},
		{"a backend with both service and resource", "spec.rules[0].http.paths[0].backend", "cannot set both resource and service backends",
			func(ing *networkingv1.Ingress) {
				ing.Spec.Rules[0].HTTP.Paths[0].Backend.Resource = &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "static"}
			}},
		{"a service without a name", "spec.rules[0].http.paths[0].backend.service.name", "Required value",
			func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "" }},
		{"a service port by name and number", "spec.rules[0].http.paths[0].backend", "cannot set both port name & port number",
			func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Name = "http" }},
		{"a service without a port", "spec.rules[0].http.paths[0].backend", "port name or number is required",
			func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Number = 0 }},
		{"a port number out of range", "spec.rules[0].http.paths[0].backend.service.port.number", "must be between 1 and 65535, inclusive",
			func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Number = 70000 }},
		{"a resource backend without a kind", "spec.defaultBackend.resource.kind", "Required value",
			func(ing *networkingv1.Ingress) {
				ing.Spec.DefaultBackend = &networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Name: "static"}}
			}},
		{"an invalid TLS secret name", "spec.tls[0].secretName", "a lowercase RFC 1123 subdomain",
			func(ing *networkingv1.Ingress) { ing.Spec.TLS = []networkingv1.IngressTLS{{SecretName: "Web_TLS"}} }},
		{"an invalid ingressClassName", "spec.ingressClassName", "a lowercase RFC 1123 subdomain",
			func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = ptr("Nginx!") }},
		{"a class annotation that disagrees with ingressClassName", "annotations.kubernetes.io/ingress.class", "must match `ingressClassName` when both are specified",
			func(ing *networkingv1.Ingress) {
				ing.Spec.IngressClassName = ptr("sim")
				ing.Annotations = map[string]string{"kubernetes.io/ingress.class": "nginx"}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ing := ingress("web")
			tc.mutate(ing)
			wantInvalid(t, env, http.MethodPost, path, ing, tc.field, tc.message)
		})
	}

	t.Run("a wildcard host and a resource default backend are valid", func(t *testing.T) {
		ing := ingress("wild")
		ing.Spec.Rules[0].Host = "*.example.com"
		ing.Spec.DefaultBackend = &networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{
			APIGroup: ptr("storage.example.com"), Kind: "Bucket", Name: "static"}}
		create[networkingv1.Ingress](t, env, path, ing)
	})
}

// TestIngressStatusAndGeneration: a client's create and update cannot set
// the status, only the status subresource can, which in turn cannot change
// the spec; the generation counts spec changes only; a bad address is a
// 422 at its index.
func TestIngressStatusAndGeneration(t *testing.T) {
	env := testenv.Start(t)
	ing := ingress("web")
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.9"}}
	got := create[networkingv1.Ingress](t, env, networkingPath("default", "ingresses", ""), ing)
	if got.Generation != 1 || len(got.Status.LoadBalancer.Ingress) != 0 {
		t.Fatalf("created with generation %d status %+v, want 1 and an empty status", got.Generation, got.Status)
	}
	objPath := networkingPath("default", "ingresses", "web")

	got.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}}
	got.Spec.Rules[0].Host = "changed.example.com"
	st := update[networkingv1.Ingress](t, env, objPath+"/status", got)
	if st.Spec.Rules[0].Host != "web.example.com" || st.Generation != 1 {
		t.Errorf("a status write changed the spec: host %q generation %d", st.Spec.Rules[0].Host, st.Generation)
	}
	if lb := st.Status.LoadBalancer.Ingress; len(lb) != 1 || lb[0].IP != "192.0.2.10" {
		t.Errorf("status %+v, want the address written", st.Status)
	}

	st.Status.LoadBalancer.Ingress = nil
	st.Spec.Rules[0].Host = "changed.example.com"
	up := update[networkingv1.Ingress](t, env, objPath, st)
	if up.Generation != 2 || len(up.Status.LoadBalancer.Ingress) != 1 {
		t.Errorf("spec update: generation %d status %+v, want 2 and the status kept", up.Generation, up.Status)
	}
	up.Labels = map[string]string{"tier": "edge"}
	if again := update[networkingv1.Ingress](t, env, objPath, up); again.Generation != 2 {
		t.Errorf("a metadata-only update moved the generation to %d", again.Generation)
	}

	bad := get[networkingv1.Ingress](t, env, objPath)
	bad.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}, {Hostname: "192.0.2.11"}}
	wantInvalid(t, env, http.MethodPut, objPath+"/status", bad, "status.loadBalancer.ingress[1].hostname", "must be a DNS name, not an IP address")
	bad.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "not-an-ip"}}
	wantInvalid(t, env, http.MethodPut, objPath+"/status", bad, "status.loadBalancer.ingress[0].ip", "must be a valid IP address")
}

// TestIngressClasses: the controller is required, a domain-prefixed path
// and immutable; parameters need a kind, a name and a scope that fits
// (defaulted to Cluster).
func TestIngressClasses(t *testing.T) {
	env := testenv.Start(t)
	path := networkingPath("", "ingressclasses", "")
	tests := []struct {
		name, field, message string
		mutate               func(ic *networkingv1.IngressClass)
	}{
		{"no controller", "spec.controller", "Required value", func(ic *networkingv1.IngressClass) { ic.Spec.Controller = "" }},
		{"a controller without a domain", "spec.controller", "must be a domain-prefixed path",
			func(ic *networkingv1.IngressClass) { ic.Spec.Controller = "nginx" }},
		{"a controller too long", "spec.controller", "may not be more than 250 bytes",
			func(ic *networkingv1.IngressClass) { ic.Spec.Controller = "example.com/" + strings.Repeat("a", 250) }},
		{"parameters without a kind", "spec.parameters.kind", "Required value",
			func(ic *networkingv1.IngressClass) {
				ic.Spec.Parameters = &networkingv1.IngressClassParametersReference{Name: "p"}
			}},
		{"a namespaced parameter without a namespace", "spec.parameters.namespace", "`parameters.scope` is set to 'Namespace'",
			func(ic *networkingv1.IngressClass) {
				ic.Spec.Parameters = &networkingv1.IngressClassParametersReference{Kind: "Params", Name: "p", Scope: ptr("Namespace")}
			}},
		{"a cluster parameter with a namespace", "spec.parameters.namespace", "`parameters.scope` is set to 'Cluster'",
			func(ic *networkingv1.IngressClass) {
				ic.Spec.Parameters = &networkingv1.IngressClassParametersReference{Kind: "Params", Name: "p", Namespace: ptr("default")}
			}},
		{"an unknown scope", "spec.parameters.scope", `Unsupported value: "Galaxy"`,
			func(ic *networkingv1.IngressClass) {
				ic.Spec.Parameters = &networkingv1.IngressClassParametersReference{Kind: "Params", Name: "p", Scope: ptr("Galaxy")}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ic := ingressClass("bad", "example.com/ingress", false)
			tc.mutate(ic)
			wantInvalid(t, env, http.MethodPost, path, ic, tc.field, tc.message)
		})
	}

	ic := ingressClass("nginx", "k8s.io/ingress-nginx", false)
	ic.Spec.Parameters = &networkingv1.IngressClassParametersReference{APIGroup: ptr("k8s.example.com"), Kind: "Params", Name: "p"}
	got := create[networkingv1.IngressClass](t, env, path, ic)
	if s := got.Spec.Parameters.Scope; s == nil || *s != "Cluster" || got.Generation != 1 {
		t.Errorf("parameters scope %v generation %d, want Cluster and 1", s, got.Generation)
	}
	got.Spec.Controller = "example.com/other"
	wantInvalid(t, env, http.MethodPut, networkingPath("", "ingressclasses", "nginx"), got, "spec.controller", "field is immutable")

	table := getAccept(t, env, networkingPath("", "ingressclasses", ""), kubectlAccept).want(t, http.StatusOK)
	var tbl metav1.Table
	table.into(t, &tbl)
	if cols := columnNames(&tbl); !slices.Equal(cols, []string{"Name", "Controller", "Parameters", "Age"}) {
		t.Errorf("columns %v", cols)
	}
	if len(tbl.Rows) != 1 || tbl.Rows[0].Cells[1] != "k8s.io/ingress-nginx" || tbl.Rows[0].Cells[2] != "Params.k8s.example.com/p" {
		t.Errorf("rows %+v", tbl.Rows)
	}
}

// TestDefaultIngressClass: an Ingress that names no class gets the newest
// class annotated as the default; one that names a class, or carries the
// older annotation, keeps what it said; without a default class none is
// set.
func TestDefaultIngressClass(t *testing.T) {
	env := testenv.Start(t)
	ingPath := networkingPath("default", "ingresses", "")
	classPath := networkingPath("", "ingressclasses", "")

	if got := create[networkingv1.Ingress](t, env, ingPath, ingress("before")); got.Spec.IngressClassName != nil {
		t.Errorf("with no default class, ingressClassName = %q", *got.Spec.IngressClassName)
	}
	create[networkingv1.IngressClass](t, env, classPath, ingressClass("plain", "example.com/plain", false))
	create[networkingv1.IngressClass](t, env, classPath, ingressClass("sim", "sim.minictl.io/ingress", true))

	eventually(t, "the default class is used", func() (bool, string) {
		got := create[networkingv1.Ingress](t, env, ingPath, &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "defaulted-"}, Spec: ingress("x").Spec,
		})
		if got.Spec.IngressClassName == nil {
			return false, "no class"
		}
		return *got.Spec.IngressClassName == "sim", *got.Spec.IngressClassName
	})

	named := ingress("named")
	named.Spec.IngressClassName = ptr("plain")
	if got := create[networkingv1.Ingress](t, env, ingPath, named); *got.Spec.IngressClassName != "plain" {
		t.Errorf("a named class became %q", *got.Spec.IngressClassName)
	}
	annotated := ingress("annotated")
	annotated.Annotations = map[string]string{"kubernetes.io/ingress.class": "plain"}
	if got := create[networkingv1.Ingress](t, env, ingPath, annotated); got.Spec.IngressClassName != nil {
		t.Errorf("an Ingress with the class annotation got ingressClassName %q", *got.Spec.IngressClassName)
	}

	// With a second default, the newest wins; created within the same
	// second (creationTimestamp's precision), the first by name does.
	sim := get[networkingv1.IngressClass](t, env, networkingPath("", "ingressclasses", "sim"))
	newer := create[networkingv1.IngressClass](t, env, classPath, ingressClass("zz-newer", "example.com/newer", true))
	want := "zz-newer"
	if newer.CreationTimestamp.Equal(&sim.CreationTimestamp) {
		want = "sim"
	}
	eventually(t, "the newest default class is used", func() (bool, string) {
		got := create[networkingv1.Ingress](t, env, ingPath, &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "newest-"}, Spec: ingress("x").Spec,
		})
		if got.Spec.IngressClassName == nil {
			return false, "no class"
		}
		return *got.Spec.IngressClassName == want, *got.Spec.IngressClassName
	})

	table := getAccept(t, env, networkingPath("default", "ingresses", "named"), kubectlAccept).want(t, http.StatusOK)
	var tbl metav1.Table
	table.into(t, &tbl)
	if cols := columnNames(&tbl); !slices.Equal(cols, []string{"Name", "Class", "Hosts", "Address", "Ports", "Age"}) {
		t.Errorf("columns %v", cols)
	}
	if len(tbl.Rows) != 1 || tbl.Rows[0].Cells[1] != "plain" || tbl.Rows[0].Cells[2] != "web.example.com" || tbl.Rows[0].Cells[4] != "80" {
		t.Errorf("rows %+v", tbl.Rows)
	}
}

// TestNetworkPolicies: policyTypes and port protocols are defaulted as
// kube does, and bad selectors, ports and peers are each a 422 at their
// field.
func TestNetworkPolicies(t *testing.T) {
	env := testenv.Start(t)
	path := networkingPath("default", "networkpolicies", "")

	np := networkPolicy("db")
	np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(53)), Protocol: ptr(corev1.ProtocolUDP)}}}}
	got := create[networkingv1.NetworkPolicy](t, env, path, np)
	if !slices.Equal(got.Spec.PolicyTypes, []networkingv1.PolicyType{"Ingress", "Egress"}) {
		t.Errorf("policyTypes %v, want [Ingress Egress]", got.Spec.PolicyTypes)
	}
	if p := got.Spec.Ingress[0].Ports[0].Protocol; p == nil || *p != corev1.ProtocolTCP {
		t.Errorf("ingress port protocol %v, want TCP", p)
	}
	if p := got.Spec.Egress[0].Ports[0].Protocol; *p != corev1.ProtocolUDP {
		t.Errorf("egress port protocol %v, want UDP kept", *p)
	}
	if got.Generation != 1 {
		t.Errorf("generation %d, want 1", got.Generation)
	}
	ingressOnly := create[networkingv1.NetworkPolicy](t, env, path, networkPolicy("ingress-only"))
	if !slices.Equal(ingressOnly.Spec.PolicyTypes, []networkingv1.PolicyType{"Ingress"}) {
		t.Errorf("policyTypes %v, want [Ingress]", ingressOnly.Spec.PolicyTypes)
	}

	tests := []struct {
		name, field, message string
		mutate               func(np *networkingv1.NetworkPolicy)
	}{
		{"a bad pod selector", "spec.podSelector.matchLabels", "name part must consist of alphanumeric characters",
			func(np *networkingv1.NetworkPolicy) {
				np.Spec.PodSelector.MatchLabels = map[string]string{"bad key!": "x"}
			}},
		{"an unknown protocol", "spec.ingress[0].ports[0].protocol", `Unsupported value: "ICMP"`,
			func(np *networkingv1.NetworkPolicy) {
				np.Spec.Ingress[0].Ports[0].Protocol = ptr(corev1.Protocol("ICMP"))
			}},
		{"a port out of range", "spec.ingress[0].ports[0].port", "must be between 1 and 65535, inclusive",
			func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].Ports[0].Port = ptr(intstr.FromInt32(0)) }},
		{"an endPort below the port", "spec.ingress[0].ports[0].endPort", "must be greater than or equal to `port`",
			func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].Ports[0].EndPort = ptr(int32(5000)) }},
		{"an endPort with a named port", "spec.ingress[0].ports[0].endPort", "may not be specified when `port` is non-numeric",
			func(np *networkingv1.NetworkPolicy) {
				np.Spec.Ingress[0].Ports[0].Port = ptr(intstr.FromString("postgres"))
				np.Spec.Ingress[0].Ports[0].EndPort = ptr(int32(6000))
			}},
		{"an endPort without a port", "spec.ingress[0].ports[0].endPort", "may not be specified when `port` is not specified",
			func(np *networkingv1.NetworkPolicy) {
				np.Spec.Ingress[0].Ports[0].Port = nil
				np.Spec.Ingress[0].Ports[0].EndPort = ptr(int32(6000))
			}},
		{"an empty peer", "spec.ingress[0].from[0]", "must specify a peer",
			func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].From[0] = networkingv1.NetworkPolicyPeer{} }},
		{"an ipBlock beside a selector", "spec.ingress[0].from[0]", "may not specify both ipBlock and another peer",
			func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].From[0].PodSelector = &metav1.LabelSelector{} }},
		{"an ipBlock without a cidr", "spec.ingress[0].from[0].ipBlock.cidr", "Required value",
			func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].From[0].IPBlock = &networkingv1.IPBlock{} }},
		{"an ipBlock with a bad cidr", "spec.ingress[0].from[0].ipBlock.cidr", "must be a valid CIDR value",
			func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].From[0].IPBlock.CIDR = "10.0.0.0/33" }},
		{"an except outside the cidr", "spec.ingress[0].from[0].ipBlock.except[0]", "must be a strict subset of `cidr`",
			func(np *networkingv1.NetworkPolicy) {
				np.Spec.Ingress[0].From[0].IPBlock.Except = []string{"192.168.0.0/16"}
			}},
		{"an except as wide as the cidr", "spec.ingress[0].from[0].ipBlock.except[0]", "must be a strict subset of `cidr`",
			func(np *networkingv1.NetworkPolicy) {
				np.Spec.Ingress[0].From[0].IPBlock.Except = []string{"10.0.0.0/8"}
			}},
		{"a bad egress peer selector", "spec.egress[0].to[0].namespaceSelector.matchExpressions[0].operator", "not a valid selector operator",
			func(np *networkingv1.NetworkPolicy) {
				np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}},
				}}}}}
			}},
		{"an unknown policy type", "spec.policyTypes[0]", `Unsupported value: "Sideways"`,
			func(np *networkingv1.NetworkPolicy) { np.Spec.PolicyTypes = []networkingv1.PolicyType{"Sideways"} }},
		{"three policy types", "spec.policyTypes", "may not specify more than two policyTypes",
			func(np *networkingv1.NetworkPolicy) {
				np.Spec.PolicyTypes = []networkingv1.PolicyType{"Ingress", "Egress", "Ingress"}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			np := networkPolicy("bad")
			tc.mutate(np)
			wantInvalid(t, env, http.MethodPost, path, np, tc.field, tc.message)
		})
	}

	got.Spec.Ingress[0].Ports[0].Port = ptr(intstr.FromInt32(5433))
	if up := update[networkingv1.NetworkPolicy](t, env, networkingPath("default", "networkpolicies", "db"), got); up.Generation != 2 {
		t.Errorf("after a spec change generation %d, want 2", up.Generation)
	}
	table := getAccept(t, env, networkingPath("default", "networkpolicies", "db"), kubectlAccept).want(t, http.StatusOK)
	var tbl metav1.Table
	table.into(t, &tbl)
	if cols := columnNames(&tbl); !slices.Equal(cols, []string{"Name", "Pod-Selector", "Age"}) {
		t.Errorf("columns %v", cols)
	}
	if len(tbl.Rows) != 1 || tbl.Rows[0].Cells[1] != "app=db" {
		t.Errorf("rows %+v", tbl.Rows)
	}
}
