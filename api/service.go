package api

import (
	"net/netip"

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
	if svc.Spec.Type == corev1.ServiceTypeExternalName || old.Spec.Type == corev1.ServiceTypeExternalName {
		return
	}
	if svc.Spec.ClusterIP == "" && len(svc.Spec.ClusterIPs) == 0 {
		svc.Spec.ClusterIP = old.Spec.ClusterIP
		svc.Spec.ClusterIPs = old.Spec.ClusterIPs
	}
	if !needsNodePorts(svc) || !needsNodePorts(old) {
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

func needsNodePorts(svc *corev1.Service) bool {
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
	seen := sets.New[portKey]()
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
		}
	}
	return errs
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
