package api

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// networking.k8s.io/v1: Ingresses, the IngressClasses that say which
// controller serves them, and NetworkPolicies. minictl stores and
// validates NetworkPolicies but has no data plane to enforce them.

// AnnotationIngressClass is the annotation that named an Ingress's class
// before spec.ingressClassName; kube-apiserver still reads it.
const AnnotationIngressClass = "kubernetes.io/ingress.class"

// maxIngressClassController is the longest spec.controller kube accepts.
const maxIngressClassController = 250

// kube's validation uses the lax CIDR and IP parsing of fields that
// predate strict validation (leading zeros, host bits set), which its
// StrictIPCIDRValidation gate, off by default, would refuse.
const strictIPValidation = false

// invalidPathSequences and invalidPathSuffixes are what an Exact or Prefix
// path may not contain or end with.
var (
	invalidPathSequences = []string{"//", "/./", "/../", "%2f", "%2F"}
	invalidPathSuffixes  = []string{"/..", "/."}
)

// Ingresses.

// A new Ingress starts at generation 1 with an empty status; an update
// keeps the status and moves the generation on a spec change, as kube's
// ingressStrategy does.

func prepareIngressForCreate(ing *networkingv1.Ingress) {
	ing.Generation = 1
	ing.Status = networkingv1.IngressStatus{}
}

func prepareIngressForUpdate(ing, old *networkingv1.Ingress) {
	ing.Status = old.Status
	ing.Generation = nextGeneration(old, ing.Spec, old.Spec)
}

// validateIngressObject is kube's ValidateIngressCreate (old nil) and
// ValidateIngressUpdate: the spec, the load balancer status, and on create
// an ingress.class annotation that agrees with ingressClassName. An
// update accepts the TLS secret names and wildcard rules the stored
// object already had, as kube's does for objects stored before it
// validated them.
func validateIngressObject(ing, old *networkingv1.Ingress) field.ErrorList {
	opts := ingressValidationOptions{}
	var oldStatus *networkingv1.IngressLoadBalancerStatus
	if old != nil {
		opts.allowInvalidSecretName = slices.ContainsFunc(old.Spec.TLS, func(t networkingv1.IngressTLS) bool {
			return len(validateTLSSecretName(t.SecretName)) > 0
		})
		opts.allowInvalidWildcardHostRule = slices.ContainsFunc(old.Spec.Rules, func(r networkingv1.IngressRule) bool {
			return strings.Contains(r.Host, "*") && len(validateIngressRuleValue(&r.IngressRuleValue, nil, ingressValidationOptions{})) > 0
		})
		oldStatus = &old.Status.LoadBalancer
	}
	errs := validateIngressSpec(&ing.Spec, field.NewPath("spec"), opts)
	errs = append(errs, validateIngressLoadBalancerStatus(&ing.Status.LoadBalancer, oldStatus, field.NewPath("status", "loadBalancer"))...)
	if old == nil {
		class, set := ing.Annotations[AnnotationIngressClass]
		if set && ing.Spec.IngressClassName != nil && class != *ing.Spec.IngressClassName {
			// kube's path, without "metadata.", is what clients see.
			errs = append(errs, field.Invalid(field.NewPath("annotations").Child(AnnotationIngressClass), class, "must match `ingressClassName` when both are specified"))
		}
	}
	return errs
}

type ingressValidationOptions struct {
	allowInvalidSecretName       bool
	allowInvalidWildcardHostRule bool
}

// validateIngressSpec: rules or a default backend, each backend valid,
// TLS hosts DNS names (wildcards allowed) and secret names valid, and
// ingressClassName a DNS subdomain.
func validateIngressSpec(spec *networkingv1.IngressSpec, fldPath *field.Path, opts ingressValidationOptions) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Rules) == 0 && spec.DefaultBackend == nil {
		errs = append(errs, field.Invalid(fldPath, spec.Rules, "either `defaultBackend` or `rules` must be specified"))
	}
	if spec.DefaultBackend != nil {
		errs = append(errs, validateIngressBackend(spec.DefaultBackend, fldPath.Child("defaultBackend"))...)
	}
	errs = append(errs, validateIngressRules(spec.Rules, fldPath.Child("rules"), opts)...)
	tlsPath := fldPath.Child("tls")
	for i, tls := range spec.TLS {
		for j, host := range tls.Hosts {
			errs = append(errs, validateHost(host, tlsPath.Index(i).Child("hosts").Index(j))...)
		}
		if !opts.allowInvalidSecretName {
			for _, msg := range validateTLSSecretName(tls.SecretName) {
				errs = append(errs, field.Invalid(tlsPath.Index(i).Child("secretName"), tls.SecretName, msg))
			}
		}
	}
	if spec.IngressClassName != nil {
		for _, msg := range nameIsDNSSubdomain(*spec.IngressClassName, false) {
			errs = append(errs, field.Invalid(fldPath.Child("ingressClassName"), *spec.IngressClassName, msg))
		}
	}
	return errs
}

// validateHost: a DNS subdomain, or a wildcard one ("*.example.com").
func validateHost(host string, fldPath *field.Path) field.ErrorList {
	check := validation.IsDNS1123Subdomain
	if strings.Contains(host, "*") {
		check = validation.IsWildcardDNS1123Subdomain
	}
	var errs field.ErrorList
	for _, msg := range check(host) {
		errs = append(errs, field.Invalid(fldPath, host, msg))
	}
	return errs
}

func validateTLSSecretName(name string) []string {
	if name == "" {
		return nil
	}
	return nameIsDNSSubdomain(name, false)
}

// validateIngressRules: a rule's host is a DNS name, not an IP address,
// and its HTTP paths are valid.
func validateIngressRules(rules []networkingv1.IngressRule, fldPath *field.Path, opts ingressValidationOptions) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range rules {
		wildcard := false
		if rule.Host != "" {
			hostPath := fldPath.Index(i).Child("host")
			if netutils.ParseIPSloppy(rule.Host) != nil {
				errs = append(errs, field.Invalid(hostPath, rule.Host, "must be a DNS name, not an IP address"))
			}
			wildcard = strings.Contains(rule.Host, "*")
			errs = append(errs, validateHost(rule.Host, hostPath)...)
		}
		if !wildcard || !opts.allowInvalidWildcardHostRule {
			errs = append(errs, validateIngressRuleValue(&rule.IngressRuleValue, fldPath.Index(i), opts)...)
		}
	}
	return errs
}

func validateIngressRuleValue(rule *networkingv1.IngressRuleValue, fldPath *field.Path, _ ingressValidationOptions) field.ErrorList {
	if rule.HTTP == nil {
		return nil
	}
	httpPath := fldPath.Child("http")
	var errs field.ErrorList
	if len(rule.HTTP.Paths) == 0 {
		errs = append(errs, field.Required(httpPath.Child("paths"), ""))
	}
	for i := range rule.HTTP.Paths {
		errs = append(errs, validateHTTPIngressPath(&rule.HTTP.Paths[i], httpPath.Child("paths").Index(i))...)
	}
	return errs
}

// validateHTTPIngressPath: pathType is required (networking/v1 has no
// default); Exact and Prefix paths are absolute and clean, an
// ImplementationSpecific path is absolute when given.
func validateHTTPIngressPath(p *networkingv1.HTTPIngressPath, fldPath *field.Path) field.ErrorList {
	if p.PathType == nil {
		return field.ErrorList{field.Required(fldPath.Child("pathType"), "pathType must be specified")}
	}
	pathPath := fldPath.Child("path")
	var errs field.ErrorList
	switch *p.PathType {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
		if !strings.HasPrefix(p.Path, "/") {
			errs = append(errs, field.Invalid(pathPath, p.Path, "must be an absolute path"))
		}
		for _, seq := range invalidPathSequences {
			if strings.Contains(p.Path, seq) {
				errs = append(errs, field.Invalid(pathPath, p.Path, fmt.Sprintf("must not contain '%s'", seq)))
			}
		}
		for _, suffix := range invalidPathSuffixes {
			if strings.HasSuffix(p.Path, suffix) {
				errs = append(errs, field.Invalid(pathPath, p.Path, fmt.Sprintf("cannot end with '%s'", suffix)))
			}
		}
	case networkingv1.PathTypeImplementationSpecific:
		if p.Path != "" && !strings.HasPrefix(p.Path, "/") {
			errs = append(errs, field.Invalid(pathPath, p.Path, "must be an absolute path"))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("pathType"), *p.PathType, []string{
			string(networkingv1.PathTypeExact), string(networkingv1.PathTypeImplementationSpecific), string(networkingv1.PathTypePrefix),
		}))
	}
	return append(errs, validateIngressBackend(&p.Backend, fldPath.Child("backend"))...)
}

// validateIngressBackend: a service (a name, and a port by name or by
// number, not both) or a resource, exactly one of them. A Service's name
// is checked as minictl names Services: a DNS label (kube's
// RelaxedServiceNameValidation).
func validateIngressBackend(b *networkingv1.IngressBackend, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case b.Resource != nil && b.Service != nil:
		return field.ErrorList{field.Invalid(fldPath, "", "cannot set both resource and service backends")}
	case b.Resource != nil:
		return validateTypedLocalObjectReference(b.Resource, fldPath.Child("resource"))
	case b.Service != nil:
		svc := b.Service
		namePath := fldPath.Child("service", "name")
		if svc.Name == "" {
			errs = append(errs, field.Required(namePath, ""))
		}
		if svc.Name != "" {
			for _, msg := range nameIsDNSLabel(svc.Name, false) {
				errs = append(errs, field.Invalid(namePath, svc.Name, msg))
			}
		}
		portPath := fldPath.Child("service", "port")
		hasName, hasNumber := svc.Port.Name != "", svc.Port.Number != 0
		switch {
		case hasName && hasNumber:
			errs = append(errs, field.Invalid(fldPath, "", "cannot set both port name & port number"))
		case hasName:
			for _, msg := range validation.IsValidPortName(svc.Port.Name) {
				errs = append(errs, field.Invalid(portPath.Child("name"), svc.Port.Name, msg))
			}
		case hasNumber:
			for _, msg := range validation.IsValidPortNum(int(svc.Port.Number)) {
				errs = append(errs, field.Invalid(portPath.Child("number"), svc.Port.Number, msg))
			}
		default:
			errs = append(errs, field.Required(fldPath, "port name or number is required"))
		}
		return errs
	default:
		return field.ErrorList{field.Invalid(fldPath, "", "resource or service backend is required")}
	}
}

func validateTypedLocalObjectReference(ref *corev1.TypedLocalObjectReference, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.APIGroup != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*ref.APIGroup) {
			errs = append(errs, field.Invalid(fldPath.Child("apiGroup"), *ref.APIGroup, msg))
		}
	}
	errs = append(errs, requiredPathSegment(ref.Kind, fldPath.Child("kind"))...)
	return append(errs, requiredPathSegment(ref.Name, fldPath.Child("name"))...)
}

// requiredPathSegment: set, and usable as one segment of a URL path.
func requiredPathSegment(v string, fldPath *field.Path) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	for _, msg := range content.IsPathSegmentName(v) {
		errs = append(errs, field.Invalid(fldPath, v, msg))
	}
	return errs
}

// validateIngressLoadBalancerStatus: each entry's ip is an IP address
// (one the old status had is accepted as it is) and its hostname a DNS
// name, not an IP address.
func validateIngressLoadBalancerStatus(st, old *networkingv1.IngressLoadBalancerStatus, fldPath *field.Path) field.ErrorList {
	var oldIPs []string
	if old != nil {
		for _, in := range old.Ingress {
			if in.IP != "" {
				oldIPs = append(oldIPs, in.IP)
			}
		}
	}
	var errs field.ErrorList
	for i, in := range st.Ingress {
		p := fldPath.Child("ingress").Index(i)
		if in.IP != "" {
			errs = append(errs, validation.IsValidIPForLegacyField(p.Child("ip"), in.IP, strictIPValidation, oldIPs)...)
		}
		if in.Hostname != "" {
			for _, msg := range validation.IsDNS1123Subdomain(in.Hostname) {
				errs = append(errs, field.Invalid(p.Child("hostname"), in.Hostname, msg))
			}
			if netutils.ParseIPSloppy(in.Hostname) != nil {
				errs = append(errs, field.Invalid(p.Child("hostname"), in.Hostname, "must be a DNS name, not an IP address"))
			}
		}
	}
	return errs
}

// IngressClasses.

// defaultIngressClass is kube's SetDefaults_IngressClass: parameters
// without a scope are cluster-scoped.
func defaultIngressClass(ic *networkingv1.IngressClass) {
	if p := ic.Spec.Parameters; p != nil && p.Scope == nil {
		p.Scope = ptrTo(networkingv1.IngressClassParametersReferenceScopeCluster)
	}
}

func prepareIngressClassForCreate(ic *networkingv1.IngressClass) { ic.Generation = 1 }

func prepareIngressClassForUpdate(ic, old *networkingv1.IngressClass) {
	ic.Generation = nextGeneration(old, ic.Spec, old.Spec)
}

// validateIngressClass is kube's ValidateIngressClass: a controller that
// is a domain-prefixed path of at most 250 characters, and parameters
// that name a kind and an object in a scope that says where it is.
func validateIngressClass(ic *networkingv1.IngressClass) field.ErrorList {
	specPath := field.NewPath("spec")
	ctrlPath := specPath.Child("controller")
	var errs field.ErrorList
	if ic.Spec.Controller == "" {
		errs = append(errs, field.Required(ctrlPath, ""))
	} else {
		if len(ic.Spec.Controller) > maxIngressClassController {
			errs = append(errs, field.TooLong(ctrlPath, "", maxIngressClassController))
		}
		errs = append(errs, validation.IsDomainPrefixedPath(ctrlPath, ic.Spec.Controller)...)
	}
	return append(errs, validateIngressClassParameters(ic.Spec.Parameters, specPath.Child("parameters"))...)
}

func validateIngressClassParameters(p *networkingv1.IngressClassParametersReference, fldPath *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	if p.APIGroup != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*p.APIGroup) {
			errs = append(errs, field.Invalid(fldPath.Child("apiGroup"), *p.APIGroup, msg))
		}
	}
	errs = append(errs, requiredPathSegment(p.Kind, fldPath.Child("kind"))...)
	errs = append(errs, requiredPathSegment(p.Name, fldPath.Child("name"))...)
	if p.Scope == nil {
		return append(errs, field.Required(fldPath.Child("scope"), ""))
	}
	nsPath := fldPath.Child("namespace")
	switch *p.Scope {
	case networkingv1.IngressClassParametersReferenceScopeNamespace:
		if p.Namespace == nil {
			errs = append(errs, field.Required(nsPath, "`parameters.scope` is set to 'Namespace'"))
		} else {
			for _, msg := range nameIsDNSLabel(*p.Namespace, false) {
				errs = append(errs, field.Invalid(nsPath, *p.Namespace, msg))
			}
		}
	case networkingv1.IngressClassParametersReferenceScopeCluster:
		if p.Namespace != nil {
			errs = append(errs, field.Forbidden(nsPath, "`parameters.scope` is set to 'Cluster'"))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("scope"), *p.Scope, []string{
			networkingv1.IngressClassParametersReferenceScopeCluster, networkingv1.IngressClassParametersReferenceScopeNamespace,
		}))
	}
	return errs
}

// validateIngressClassUpdate: the controller of a class never changes.
func validateIngressClassUpdate(ic, old *networkingv1.IngressClass) field.ErrorList {
	if ic.Spec.Controller == old.Spec.Controller {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "controller"), ic.Spec.Controller, "field is immutable")}
}

// NetworkPolicies.

// defaultNetworkPolicy is kube's SetDefaults_NetworkPolicy and
// SetDefaults_NetworkPolicyPort: a policy that names no policyTypes is an
// Ingress policy, and an Egress one too if it has egress rules; a port
// without a protocol is TCP.
func defaultNetworkPolicy(np *networkingv1.NetworkPolicy) {
	if len(np.Spec.PolicyTypes) == 0 {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) > 0 {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
	defaultPorts := func(ports []networkingv1.NetworkPolicyPort) {
		for i := range ports {
			if ports[i].Protocol == nil {
				ports[i].Protocol = ptrTo(corev1.ProtocolTCP)
			}
		}
	}
	for i := range np.Spec.Ingress {
		defaultPorts(np.Spec.Ingress[i].Ports)
	}
	for i := range np.Spec.Egress {
		defaultPorts(np.Spec.Egress[i].Ports)
	}
}

func prepareNetworkPolicyForCreate(np *networkingv1.NetworkPolicy) { np.Generation = 1 }

func prepareNetworkPolicyForUpdate(np, old *networkingv1.NetworkPolicy) {
	np.Generation = nextGeneration(old, np.Spec, old.Spec)
}

// validateNetworkPolicyObject is kube's ValidateNetworkPolicy (old nil)
// and ValidateNetworkPolicyUpdate: valid selectors, ports and peers in
// every rule, and at most the two policy types. An update accepts the
// CIDRs the stored policy already had, and a pod selector with label
// values kube no longer accepts if the stored one had them.
func validateNetworkPolicyObject(np, old *networkingv1.NetworkPolicy) field.ErrorList {
	var opts networkPolicyOptions
	if old != nil {
		opts.oldCIDRs = networkPolicyCIDRs(old)
		opts.selector.AllowInvalidLabelValueInSelector = len(metav1validation.ValidateLabelSelector(&old.Spec.PodSelector, opts.selector, nil)) > 0
	}
	specPath := field.NewPath("spec")
	spec := &np.Spec
	errs := metav1validation.ValidateLabelSelector(&spec.PodSelector, opts.selector, specPath.Child("podSelector"))
	for i, rule := range spec.Ingress {
		rulePath := specPath.Child("ingress").Index(i)
		for j := range rule.Ports {
			errs = append(errs, validateNetworkPolicyPort(&rule.Ports[j], rulePath.Child("ports").Index(j))...)
		}
		for j := range rule.From {
			errs = append(errs, validateNetworkPolicyPeer(&rule.From[j], opts, rulePath.Child("from").Index(j))...)
		}
	}
	for i, rule := range spec.Egress {
		rulePath := specPath.Child("egress").Index(i)
		for j := range rule.Ports {
			errs = append(errs, validateNetworkPolicyPort(&rule.Ports[j], rulePath.Child("ports").Index(j))...)
		}
		for j := range rule.To {
			errs = append(errs, validateNetworkPolicyPeer(&rule.To[j], opts, rulePath.Child("to").Index(j))...)
		}
	}
	typesPath := specPath.Child("policyTypes")
	allowed := []string{string(networkingv1.PolicyTypeIngress), string(networkingv1.PolicyTypeEgress)}
	if len(spec.PolicyTypes) > len(allowed) {
		return append(errs, field.Invalid(typesPath, &spec.PolicyTypes, "may not specify more than two policyTypes"))
	}
	for i, t := range spec.PolicyTypes {
		if !slices.Contains(allowed, string(t)) {
			errs = append(errs, field.NotSupported(typesPath.Index(i), t, allowed))
		}
	}
	return errs
}

type networkPolicyOptions struct {
	selector metav1validation.LabelSelectorValidationOptions
	oldCIDRs []string
}

// networkPolicyCIDRs lists every CIDR np's ipBlocks name.
func networkPolicyCIDRs(np *networkingv1.NetworkPolicy) []string {
	var cidrs []string
	add := func(peers []networkingv1.NetworkPolicyPeer) {
		for _, p := range peers {
			if p.IPBlock != nil {
				cidrs = append(cidrs, p.IPBlock.CIDR)
				cidrs = append(cidrs, p.IPBlock.Except...)
			}
		}
	}
	for _, r := range np.Spec.Ingress {
		add(r.From)
	}
	for _, r := range np.Spec.Egress {
		add(r.To)
	}
	return cidrs
}

// validateNetworkPolicyPort: TCP, UDP or SCTP; a port by number (with an
// endPort not below it) or by name (with no endPort).
func validateNetworkPolicyPort(port *networkingv1.NetworkPolicyPort, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p := port.Protocol; p != nil && *p != corev1.ProtocolTCP && *p != corev1.ProtocolUDP && *p != corev1.ProtocolSCTP {
		errs = append(errs, field.NotSupported(fldPath.Child("protocol"), *p, []string{string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP)}))
	}
	portPath, endPath := fldPath.Child("port"), fldPath.Child("endPort")
	switch {
	case port.Port == nil:
		if port.EndPort != nil {
			errs = append(errs, field.Invalid(endPath, *port.EndPort, "may not be specified when `port` is not specified"))
		}
	case port.Port.Type == intstr.Int:
		for _, msg := range validation.IsValidPortNum(int(port.Port.IntVal)) {
			errs = append(errs, field.Invalid(portPath, port.Port.IntVal, msg))
		}
		if port.EndPort != nil {
			if *port.EndPort < port.Port.IntVal {
				errs = append(errs, field.Invalid(endPath, *port.EndPort, "must be greater than or equal to `port`"))
			}
			for _, msg := range validation.IsValidPortNum(int(*port.EndPort)) {
				errs = append(errs, field.Invalid(endPath, *port.EndPort, msg))
			}
		}
	default:
		if port.EndPort != nil {
			errs = append(errs, field.Invalid(endPath, *port.EndPort, "may not be specified when `port` is non-numeric"))
		}
		for _, msg := range validation.IsValidPortName(port.Port.StrVal) {
			errs = append(errs, field.Invalid(portPath, port.Port.StrVal, msg))
		}
	}
	return errs
}

// validateNetworkPolicyPeer: at least one of podSelector,
// namespaceSelector and ipBlock, and an ipBlock alone.
func validateNetworkPolicyPeer(peer *networkingv1.NetworkPolicyPeer, opts networkPolicyOptions, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	if peer.PodSelector != nil {
		n++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.PodSelector, opts.selector, fldPath.Child("podSelector"))...)
	}
	if peer.NamespaceSelector != nil {
		n++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.NamespaceSelector, opts.selector, fldPath.Child("namespaceSelector"))...)
	}
	if peer.IPBlock != nil {
		n++
		errs = append(errs, validateIPBlock(peer.IPBlock, opts.oldCIDRs, fldPath.Child("ipBlock"))...)
	}
	switch {
	case n == 0:
		errs = append(errs, field.Required(fldPath, "must specify a peer"))
	case n > 1 && peer.IPBlock != nil:
		errs = append(errs, field.Forbidden(fldPath, "may not specify both ipBlock and another peer"))
	}
	return errs
}

// validateIPBlock: a CIDR, and exceptions each strictly inside it.
func validateIPBlock(b *networkingv1.IPBlock, oldCIDRs []string, fldPath *field.Path) field.ErrorList {
	cidrPath := fldPath.Child("cidr")
	if b.CIDR == "" {
		return field.ErrorList{field.Required(cidrPath, "")}
	}
	errs := validation.IsValidCIDRForLegacyField(cidrPath, b.CIDR, strictIPValidation, oldCIDRs)
	_, outer, err := netutils.ParseCIDRSloppy(b.CIDR)
	if err != nil {
		return errs
	}
	outerLen, _ := outer.Mask.Size()
	for i, except := range b.Except {
		p := fldPath.Child("except").Index(i)
		errs = append(errs, validation.IsValidCIDRForLegacyField(p, except, strictIPValidation, oldCIDRs)...)
		_, inner, err := netutils.ParseCIDRSloppy(except)
		if err != nil {
			continue
		}
		innerLen, _ := inner.Mask.Size()
		if !outer.Contains(inner.IP) || outerLen >= innerLen {
			errs = append(errs, field.Invalid(p, except, "must be a strict subset of `cidr`"))
		}
	}
	return errs
}
