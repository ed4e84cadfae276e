package api

import (
	"net/netip"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var serviceFieldLabels = []string{"spec.clusterIP", "spec.type"}

var supportedServiceTypes = []corev1.ServiceType{
	corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName,
}

// defaultService sets a Service's defaults. minictl is a single-stack IPv4
// cluster, so a service that gets cluster IPs is SingleStack IPv4; the
// cluster IP itself is allocated by the server.
func defaultService(svc *corev1.Service) {
	spec := &svc.Spec
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	switch spec.SessionAffinity {
	case "":
		spec.SessionAffinity = corev1.ServiceAffinityNone
		spec.SessionAffinityConfig = nil
	case corev1.ServiceAffinityNone:
		spec.SessionAffinityConfig = nil
	case corev1.ServiceAffinityClientIP:
		c := spec.SessionAffinityConfig
		if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{
				ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptrTo(corev1.DefaultClientIPServiceAffinitySeconds)},
			}
		}
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	external := spec.Type == corev1.ServiceTypeNodePort || spec.Type == corev1.ServiceTypeLoadBalancer ||
		(spec.Type == corev1.ServiceTypeClusterIP && len(spec.ExternalIPs) > 0)
	if external && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		spec.AllocateLoadBalancerNodePorts = ptrTo(true)
	}
	if spec.Type != corev1.ServiceTypeExternalName {
		if spec.InternalTrafficPolicy == nil {
			spec.InternalTrafficPolicy = ptrTo(corev1.ServiceInternalTrafficPolicyCluster)
		}
		if spec.IPFamilyPolicy == nil {
			spec.IPFamilyPolicy = ptrTo(corev1.IPFamilyPolicySingleStack)
		}
		if len(spec.IPFamilies) == 0 {
			spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		}
	}
	// clusterIP is clusterIPs[0]; the API reads either and writes both.
	if spec.ClusterIP != "" && len(spec.ClusterIPs) == 0 {
		spec.ClusterIPs = []string{spec.ClusterIP}
	} else if spec.ClusterIP == "" && len(spec.ClusterIPs) > 0 {
		spec.ClusterIP = spec.ClusterIPs[0]
	}
}

func prepareServiceForCreate(svc *corev1.Service) {
	svc.Status = corev1.ServiceStatus{}
}

// prepareServiceForUpdate keeps the status and, like kube-apiserver, the
// cluster IP and node ports the server allocated when the client sends the
// service back without them (kubectl apply of the original manifest does).
func prepareServiceForUpdate(svc, old *corev1.Service) {
	svc.Status = old.Status
	dropTypeDependentFields(svc, old)
	if svc.Spec.Type == corev1.ServiceTypeExternalName || old.Spec.Type == corev1.ServiceTypeExternalName {
		return
	}
	if svc.Spec.ClusterIP == "" && len(svc.Spec.ClusterIPs) == 0 {
		svc.Spec.ClusterIP = old.Spec.ClusterIP
		svc.Spec.ClusterIPs = old.Spec.ClusterIPs
	}
	if ServiceNeedsHealthCheckNodePort(svc) && ServiceNeedsHealthCheckNodePort(old) && svc.Spec.HealthCheckNodePort == 0 {
		svc.Spec.HealthCheckNodePort = old.Spec.HealthCheckNodePort
	}
	if !ServiceNeedsNodePorts(svc) || !ServiceNeedsNodePorts(old) {
		return
	}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.NodePort != 0 {
			continue
		}
		for _, o := range old.Spec.Ports {
			if o.Port == p.Port && o.Protocol == p.Protocol {
				p.NodePort = o.NodePort
				break
			}
		}
	}
}

// dropTypeDependentFields clears, when an update changes a Service's
// type, what only its old type had and the client sent back unchanged:
// the cluster IPs of a Service turned ExternalName, the node ports of one
// that needs none, the health check port of one that is no longer a
// LoadBalancer with the Local policy. A client that edits the type of
// the object it read need not clear them itself, as in kube-apiserver;
// the server then gives back what they held.
func dropTypeDependentFields(svc, old *corev1.Service) {
	if svc.Spec.Type == old.Spec.Type {
		return
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName && slices.Equal(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) &&
		svc.Spec.ClusterIP == old.Spec.ClusterIP {
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
		if slices.Equal(svc.Spec.IPFamilies, old.Spec.IPFamilies) {
			svc.Spec.IPFamilies = nil
		}
		if reflect.DeepEqual(svc.Spec.IPFamilyPolicy, old.Spec.IPFamilyPolicy) {
			svc.Spec.IPFamilyPolicy = nil
		}
	}
	if !ServiceNeedsNodePorts(svc) {
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			for _, o := range old.Spec.Ports {
				if o.Port == p.Port && o.Protocol == p.Protocol && o.NodePort == p.NodePort {
					p.NodePort = 0
				}
			}
		}
	}
	if !ServiceNeedsHealthCheckNodePort(svc) && svc.Spec.HealthCheckNodePort == old.Spec.HealthCheckNodePort {
		svc.Spec.HealthCheckNodePort = 0
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer && reflect.DeepEqual(svc.Spec.AllocateLoadBalancerNodePorts, old.Spec.AllocateLoadBalancerNodePorts) {
		svc.Spec.AllocateLoadBalancerNodePorts = nil
	}
	external := svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer || len(svc.Spec.ExternalIPs) > 0
	if !external && svc.Spec.ExternalTrafficPolicy == old.Spec.ExternalTrafficPolicy {
		svc.Spec.ExternalTrafficPolicy = ""
	}
}

// ServiceNeedsHealthCheckNodePort: a LoadBalancer whose external traffic stays
// on the node it arrives at has a port for the load balancer to ask
// which nodes have endpoints.
func ServiceNeedsHealthCheckNodePort(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// ServiceNeedsNodePorts: a NodePort Service has node ports, and so does a
// LoadBalancer unless it says allocateLoadBalancerNodePorts: false.
func ServiceNeedsNodePorts(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeNodePort ||
		(svc.Spec.Type == corev1.ServiceTypeLoadBalancer && (svc.Spec.AllocateLoadBalancerNodePorts == nil || *svc.Spec.AllocateLoadBalancerNodePorts))
}

func isHeadless(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP == corev1.ClusterIPNone
}

func validateService(svc *corev1.Service) field.ErrorList {
	specPath := field.NewPath("spec")
	spec := &svc.Spec
	var errs field.ErrorList

	switch spec.Type {
	case "":
		// defaulting sets it
	case corev1.ServiceTypeExternalName:
		namePath := specPath.Child("externalName")
		if spec.ExternalName == "" {
			errs = append(errs, field.Required(namePath, ""))
		} else {
			for _, msg := range isDNS1123Subdomain(spec.ExternalName) {
				errs = append(errs, field.Invalid(namePath, spec.ExternalName, msg))
			}
		}
		if spec.ClusterIP != "" {
			errs = append(errs, field.Forbidden(specPath.Child("clusterIP"), "may not be set for ExternalName services"))
		}
	default:
		if !contains(supportedServiceTypes, spec.Type) {
			errs = append(errs, field.NotSupported(specPath.Child("type"), spec.Type, supportedServiceTypes))
		}
	}

	if len(spec.Ports) == 0 && !isHeadless(svc) && spec.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, field.Required(specPath.Child("ports"), ""))
	}
	errs = append(errs, validateServicePorts(svc, specPath.Child("ports"))...)

	if ip := spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		if _, err := netip.ParseAddr(ip); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("clusterIP"), ip, `must be a valid IP address or "None"`))
		}
	}
	errs = append(errs, validateServiceIPFamilies(svc, specPath)...)
	errs = append(errs, validateHealthCheckNodePort(svc, specPath.Child("healthCheckNodePort"))...)
	if a := spec.SessionAffinity; a != "" && a != corev1.ServiceAffinityNone && a != corev1.ServiceAffinityClientIP {
		errs = append(errs, field.NotSupported(specPath.Child("sessionAffinity"), a,
			[]corev1.ServiceAffinity{corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone}))
	}
	errs = append(errs, validateLabels(spec.Selector, specPath.Child("selector"))...)
	return errs
}

func validateServicePorts(svc *corev1.Service, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	type portKey struct {
		port     int32
		protocol corev1.Protocol
	}
	seen, seenNodePorts := sets.New[portKey](), sets.New[portKey]()
	nodePortsAllowed := svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	for i, p := range svc.Spec.Ports {
		idxPath := fldPath.Index(i)
		namePath := idxPath.Child("name")
		switch {
		case p.Name == "" && len(svc.Spec.Ports) > 1:
			errs = append(errs, field.Required(namePath, ""))
		case p.Name == "":
		case names.Has(p.Name):
			errs = append(errs, field.Duplicate(namePath, p.Name))
		default:
			for _, msg := range isDNS1123Label(p.Name) {
				errs = append(errs, field.Invalid(namePath, p.Name, msg))
			}
		}
		names.Insert(p.Name)

		errs = append(errs, validatePortNum(p.Port, idxPath.Child("port"))...)
		errs = append(errs, validateProtocol(p.Protocol, idxPath.Child("protocol"))...)
		if k := (portKey{p.Port, p.Protocol}); seen.Has(k) {
			errs = append(errs, field.Duplicate(idxPath, p))
		} else {
			seen.Insert(k)
		}
		errs = append(errs, validateTargetPort(p.TargetPort, idxPath.Child("targetPort"))...)
		if p.NodePort != 0 {
			if !nodePortsAllowed {
				errs = append(errs, field.Forbidden(idxPath.Child("nodePort"), "may not be used when `type` is '"+string(svc.Spec.Type)+"'"))
			} else {
				errs = append(errs, validatePortNum(p.NodePort, idxPath.Child("nodePort"))...)
			}
			if k := (portKey{p.NodePort, p.Protocol}); seenNodePorts.Has(k) {
				errs = append(errs, field.Duplicate(idxPath.Child("nodePort"), p.NodePort))
			} else {
				seenNodePorts.Insert(k)
			}
		}
	}
	return errs
}

// validateServiceIPFamilies checks the cluster IPs and families of a
// Service on minictl's single-stack IPv4 cluster: clusterIPs[0] is
// clusterIP, and neither IPv6 nor a second family can be had, refused in
// kube-apiserver's words for a cluster without dual-stack.
func validateServiceIPFamilies(svc *corev1.Service, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	ipsPath := specPath.Child("clusterIPs")
	if len(spec.ClusterIPs) > 0 && spec.ClusterIP != spec.ClusterIPs[0] {
		errs = append(errs, field.Invalid(ipsPath.Index(0), spec.ClusterIPs[0], "must match `clusterIP` when both are specified"))
	}
	for i, ip := range spec.ClusterIPs {
		if i == 0 || ip == corev1.ClusterIPNone {
			continue
		}
		if _, err := netip.ParseAddr(ip); err != nil {
			errs = append(errs, field.Invalid(ipsPath.Index(i), ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
		} else {
			errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "this cluster is not configured for dual-stack services"))
			break
		}
	}
	if ip, err := netip.ParseAddr(spec.ClusterIP); err == nil && !ip.Unmap().Is4() {
		errs = append(errs, field.Invalid(ipsPath.Index(0), spec.ClusterIP, "not configured on this cluster"))
	}
	if p := spec.IPFamilyPolicy; p != nil {
		policyPath := specPath.Child("ipFamilyPolicy")
		switch *p {
		case corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack:
		case corev1.IPFamilyPolicyRequireDualStack:
			errs = append(errs, field.Invalid(policyPath, *p, "this cluster is not configured for dual-stack services"))
		default:
			errs = append(errs, field.NotSupported(policyPath, *p, []corev1.IPFamilyPolicy{
				corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack,
			}))
		}
	}
	famPath := specPath.Child("ipFamilies")
	for i, f := range spec.IPFamilies {
		switch {
		case f != corev1.IPv4Protocol && f != corev1.IPv6Protocol:
			errs = append(errs, field.NotSupported(famPath.Index(i), f, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}))
		case f == corev1.IPv6Protocol:
			errs = append(errs, field.Invalid(famPath.Index(i), f, "not configured on this cluster"))
		case i > 0:
			errs = append(errs, field.Duplicate(famPath.Index(i), f))
		}
	}
	return errs
}

// validateHealthCheckNodePort: only a LoadBalancer with the Local
// external traffic policy has one.
func validateHealthCheckNodePort(svc *corev1.Service, fldPath *field.Path) field.ErrorList {
	port := svc.Spec.HealthCheckNodePort
	if port == 0 {
		return nil
	}
	if !ServiceNeedsHealthCheckNodePort(svc) {
		return field.ErrorList{field.Invalid(fldPath, port, "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'")}
	}
	return validatePortNum(port, fldPath)
}

// validateTargetPort checks a port number or an IANA service name; zero or
// empty is left to defaulting.
func validateTargetPort(tp intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case tp.Type == intstr.Int && tp.IntVal != 0:
		errs = append(errs, validatePortNum(tp.IntVal, fldPath)...)
	case tp.Type == intstr.String && tp.StrVal != "":
		for _, msg := range isValidPortName(tp.StrVal) {
			errs = append(errs, field.Invalid(fldPath, tp.StrVal, msg))
		}
	}
	return errs
}

// validateServiceUpdate keeps an allocated cluster IP: it changes only
// with a change to or from type ExternalName.
func validateServiceUpdate(svc, old *corev1.Service) field.ErrorList {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || old.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	if old.Spec.ClusterIP != "" && svc.Spec.ClusterIP != old.Spec.ClusterIP {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIP"), svc.Spec.ClusterIP, "field is immutable")}
	}
	return nil
}

func serviceFields(svc *corev1.Service) fields.Set {
	return fields.Set{
		"spec.clusterIP": svc.Spec.ClusterIP,
		"spec.type":      string(svc.Spec.Type),
	}
}
