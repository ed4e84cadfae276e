package api

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// An EndpointSlice (discovery.k8s.io/v1) is one piece of a Service's
// endpoints: at most 1000 endpoints of one address type sharing one set of
// ports. The endpointslice controller writes them for Services with a
// selector, the endpointslicemirroring controller for Endpoints written by
// hand; anyone may write others. The rules are kube-apiserver's:
//
//   - addressType is IPv4, IPv6 or FQDN, and never changes;
//   - every endpoint has 1 to 100 addresses valid for the address type
//     (IPs neither unspecified, loopback nor link-local);
//   - hostname is a DNS label, nodeName a DNS subdomain, hints name at
//     most 8 zones and 8 nodes, each once;
//   - at most 100 ports, with unique names, each TCP, UDP or SCTP
//     (defaulted to TCP, the name to "");
//   - generation moves when anything but the metadata, or the labels,
//     change: the controllers use it to tell a stale cache.

const (
	maxEndpointSliceEndpoints = 1000
	maxEndpointSlicePorts     = 100
	maxEndpointAddresses      = 100
	maxEndpointHints          = 8
	maxDeprecatedTopology     = 16
)

var (
	endpointSliceAddressTypes = []string{
		string(discoveryv1.AddressTypeFQDN), string(discoveryv1.AddressTypeIPv4), string(discoveryv1.AddressTypeIPv6),
	}
)

func defaultEndpointSlice(s *discoveryv1.EndpointSlice) {
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Name == nil {
			p.Name = ptrTo("")
		}
		if p.Protocol == nil {
			p.Protocol = ptrTo(corev1.ProtocolTCP)
		}
	}
}

func prepareEndpointSliceForCreate(s *discoveryv1.EndpointSlice) {
	s.Generation = 1
}

func prepareEndpointSliceForUpdate(s, old *discoveryv1.EndpointSlice) {
	s.Generation = old.Generation
	if !apiequality.Semantic.DeepEqual(s.AddressType, old.AddressType) ||
		!apiequality.Semantic.DeepEqual(s.Endpoints, old.Endpoints) ||
		!apiequality.Semantic.DeepEqual(s.Ports, old.Ports) ||
		!apiequality.Semantic.DeepEqual(s.Labels, old.Labels) {
		s.Generation = old.Generation + 1
	}
}

func validateEndpointSliceUpdate(s, old *discoveryv1.EndpointSlice) field.ErrorList {
	var errs field.ErrorList
	if s.AddressType != old.AddressType {
		errs = append(errs, field.Invalid(field.NewPath("addressType"), s.AddressType, "field is immutable"))
	}
	return errs
}

func validateEndpointSlice(s *discoveryv1.EndpointSlice) field.ErrorList {
	types := endpointSliceAddressTypes
	var errs field.ErrorList
	typePath := field.NewPath("addressType")
	switch {
	case s.AddressType == "":
		errs = append(errs, field.Required(typePath, ""))
	case !contains(types, string(s.AddressType)):
		errs = append(errs, field.NotSupported(typePath, s.AddressType, types))
	}
	errs = append(errs, validateSliceEndpoints(s.Endpoints, s.AddressType, field.NewPath("endpoints"))...)
	errs = append(errs, validateSlicePorts(s.Ports, field.NewPath("ports"))...)
	return errs
}

func validateSliceEndpoints(endpoints []discoveryv1.Endpoint, addrType discoveryv1.AddressType, fldPath *field.Path) field.ErrorList {
	if len(endpoints) > maxEndpointSliceEndpoints {
		return field.ErrorList{field.TooMany(fldPath, len(endpoints), maxEndpointSliceEndpoints)}
	}
	var errs field.ErrorList
	for i, ep := range endpoints {
		idxPath := fldPath.Index(i)
		addrPath := idxPath.Child("addresses")
		switch {
		case len(ep.Addresses) == 0:
			errs = append(errs, field.Required(addrPath, "must contain at least 1 address"))
		case len(ep.Addresses) > maxEndpointAddresses:
			errs = append(errs, field.TooMany(addrPath, len(ep.Addresses), maxEndpointAddresses))
		}
		for j, a := range ep.Addresses {
			errs = append(errs, validateSliceAddress(a, addrType, addrPath.Index(j))...)
		}
		if ep.NodeName != nil {
			for _, msg := range isDNS1123Subdomain(*ep.NodeName) {
				errs = append(errs, field.Invalid(idxPath.Child("nodeName"), *ep.NodeName, msg))
			}
		}
		topoPath := idxPath.Child("deprecatedTopology")
		if len(ep.DeprecatedTopology) > maxDeprecatedTopology {
			errs = append(errs, field.TooMany(topoPath, len(ep.DeprecatedTopology), maxDeprecatedTopology))
		}
		errs = append(errs, validateLabels(ep.DeprecatedTopology, topoPath)...)
		if ep.Hostname != nil {
			errs = append(errs, validateDNSLabel(*ep.Hostname, idxPath.Child("hostname"))...)
		}
		if ep.Hints != nil {
			errs = append(errs, validateEndpointHints(ep.Hints, idxPath.Child("hints"))...)
		}
	}
	return errs
}

// validateSliceAddress checks one address against the slice's type. An IP
// must be of the type's family and a usable endpoint: not unspecified,
// loopback or link-local, as kube-apiserver's ValidateEndpointIP. An
// unknown type (refused elsewhere) checks nothing.
func validateSliceAddress(a string, addrType discoveryv1.AddressType, fldPath *field.Path) field.ErrorList {
	switch addrType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
		if errs := validation.IsValidIPForLegacyField(fldPath, a, true, nil); len(errs) > 0 {
			return errs
		}
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return field.ErrorList{field.Invalid(fldPath, a, "must be a valid IP address")}
		}
		var errs field.ErrorList
		if addrType == discoveryv1.AddressTypeIPv4 && !ip.Is4() {
			errs = append(errs, field.Invalid(fldPath, a, "must be an IPv4 address"))
		}
		if addrType == discoveryv1.AddressTypeIPv6 && !ip.Is6() {
			errs = append(errs, field.Invalid(fldPath, a, "must be an IPv6 address"))
		}
		return append(errs, validateEndpointIP(ip, a, fldPath)...)
	case discoveryv1.AddressTypeFQDN:
		return validation.IsFullyQualifiedDomainName(fldPath, a)
	}
	return nil
}

// validateEndpointIP refuses the addresses that cannot be a pod's:
// unspecified and loopback make no sense as endpoints, and link-local ones
// belong to the node (a metadata service, say).
func validateEndpointIP(ip netip.Addr, s string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ip.IsUnspecified() {
		errs = append(errs, field.Invalid(fldPath, s, fmt.Sprintf("may not be unspecified (%s)", s)))
	}
	if ip.IsLoopback() {
		errs = append(errs, field.Invalid(fldPath, s, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	}
	if ip.IsLinkLocalUnicast() {
		errs = append(errs, field.Invalid(fldPath, s, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	}
	if ip.IsLinkLocalMulticast() {
		errs = append(errs, field.Invalid(fldPath, s, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return errs
}

func validateEndpointHints(h *discoveryv1.EndpointHints, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	zonesPath := fldPath.Child("forZones")
	if len(h.ForZones) > maxEndpointHints {
		errs = append(errs, field.TooMany(zonesPath, len(h.ForZones), maxEndpointHints))
	} else {
		seen := sets.New[string]()
		for i, z := range h.ForZones {
			p := zonesPath.Index(i).Child("name")
			if seen.Has(z.Name) {
				errs = append(errs, field.Duplicate(p, z.Name))
			}
			seen.Insert(z.Name)
			errs = append(errs, validateLabelValue(z.Name, p)...)
		}
	}
	nodesPath := fldPath.Child("forNodes")
	if len(h.ForNodes) > maxEndpointHints {
		errs = append(errs, field.TooMany(nodesPath, len(h.ForNodes), maxEndpointHints))
	} else {
		seen := sets.New[string]()
		for i, n := range h.ForNodes {
			p := nodesPath.Index(i).Child("name")
			if seen.Has(n.Name) {
				errs = append(errs, field.Duplicate(p, n.Name))
			}
			seen.Insert(n.Name)
			for _, msg := range isDNS1123Subdomain(n.Name) {
				errs = append(errs, field.Invalid(p, n.Name, msg))
			}
		}
	}
	return errs
}

func validateSlicePorts(ports []discoveryv1.EndpointPort, fldPath *field.Path) field.ErrorList {
	if len(ports) > maxEndpointSlicePorts {
		return field.ErrorList{field.TooMany(fldPath, len(ports), maxEndpointSlicePorts)}
	}
	var errs field.ErrorList
	names := sets.New[string]()
	for i, p := range ports {
		idxPath := fldPath.Index(i)
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if name != "" {
			errs = append(errs, validateDNSLabel(name, idxPath.Child("name"))...)
		}
		if names.Has(name) {
			errs = append(errs, field.Duplicate(idxPath.Child("name"), name))
		}
		names.Insert(name)
		switch {
		case p.Protocol == nil:
			errs = append(errs, field.Required(idxPath.Child("protocol"), ""))
		case !contains(supportedPortProtocols, *p.Protocol):
			errs = append(errs, field.NotSupported(idxPath.Child("protocol"), *p.Protocol, supportedPortProtocols))
		}
		if p.AppProtocol != nil {
			errs = append(errs, validateQualifiedName(*p.AppProtocol, idxPath.Child("appProtocol"))...)
		}
	}
	return errs
}

// endpointSliceTable is kubectl's: NAME, ADDRESSTYPE, PORTS (the first
// three port numbers), ENDPOINTS (the first three addresses), AGE.
var endpointSliceTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "AddressType", Type: "string", Description: discoveryv1.EndpointSlice{}.SwaggerDoc()["addressType"]},
	{Name: "Ports", Type: "string", Description: discoveryv1.EndpointSlice{}.SwaggerDoc()["ports"]},
	{Name: "Endpoints", Type: "string", Description: discoveryv1.EndpointSlice{}.SwaggerDoc()["endpoints"]},
	ageColumn,
}, func(s *discoveryv1.EndpointSlice, now time.Time) []any {
	return []any{s.Name, string(s.AddressType), formatSlicePorts(s.Ports), formatSliceEndpoints(s.Endpoints), age(s.CreationTimestamp, now)}
})

func formatSlicePorts(ports []discoveryv1.EndpointPort) string {
	list := make([]string, 0, len(ports))
	for _, p := range ports {
		switch {
		case p.Port != nil:
			list = append(list, strconv.Itoa(int(*p.Port)))
		case p.Name != nil:
			list = append(list, *p.Name)
		default:
			list = append(list, "*")
		}
	}
	return firstThree(list)
}

func formatSliceEndpoints(endpoints []discoveryv1.Endpoint) string {
	var list []string
	for _, ep := range endpoints {
		list = append(list, ep.Addresses...)
	}
	return firstThree(list)
}

// firstThree is kubectl's way with long lists: three items and how many
// more; "<unset>" for none.
func firstThree(list []string) string {
	const max = 3
	if len(list) == 0 {
		return "<unset>"
	}
	if len(list) > max {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:max], ","), len(list)-max)
	}
	return strings.Join(list, ",")
}
