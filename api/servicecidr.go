package api

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ServiceCIDRs and IPAddresses are how kube-apiserver (since its
// MultiCIDRServiceAllocator, GA in 1.33) keeps Services' cluster IPs: the
// ServiceCIDR named kubernetes is the range of --service-cluster-ip-range,
// and every allocated cluster IP is an IPAddress object named by the
// address, whose parentRef is the Service holding it. Creating the
// IPAddress is the allocation: etcd lets only one writer create a name.

// The labels the API server puts on the IPAddresses it allocates.
const (
	LabelIPAddressFamily    = "ipaddress.kubernetes.io/ip-family"
	LabelIPAddressManagedBy = "ipaddress.kubernetes.io/managed-by"
	// IPAllocatorManager is the managed-by value of the API server's
	// IPAddresses.
	IPAllocatorManager = "ipallocator.k8s.io"
	// DefaultServiceCIDRName names the ServiceCIDR the API server makes
	// from its flag.
	DefaultServiceCIDRName = "kubernetes"
)

// ipAddressNameValid: an IPAddress is named by its address, in canonical
// form (10.96.0.1, not 010.096.0.1).
func ipAddressNameValid(name string, prefix bool) []string {
	if prefix {
		return []string{"generateName is not supported"}
	}
	ip, err := netip.ParseAddr(name)
	if err != nil || ip.Zone() != "" {
		return []string{"must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"}
	}
	if ip.String() != name {
		return []string{fmt.Sprintf("must be in canonical form (%q)", ip.String())}
	}
	return nil
}

func validateIPAddress(ip *networkingv1.IPAddress) field.ErrorList {
	refPath := field.NewPath("spec", "parentRef")
	ref := ip.Spec.ParentRef
	if ref == nil {
		return field.ErrorList{field.Required(refPath, "")}
	}
	var errs field.ErrorList
	if ref.Resource == "" {
		errs = append(errs, field.Required(refPath.Child("resource"), ""))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(refPath.Child("name"), ""))
	}
	if ref.Namespace != "" {
		for _, msg := range isDNS1123Label(ref.Namespace) {
			errs = append(errs, field.Invalid(refPath.Child("namespace"), ref.Namespace, msg))
		}
	}
	return errs
}

// validateIPAddressUpdate: an IPAddress's parent is fixed, as kube's.
func validateIPAddressUpdate(ip, old *networkingv1.IPAddress) field.ErrorList {
	if old.Spec.ParentRef != nil && (ip.Spec.ParentRef == nil || *ip.Spec.ParentRef != *old.Spec.ParentRef) {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "parentRef"), ip.Spec.ParentRef, "field is immutable")}
	}
	return nil
}

func prepareServiceCIDRForCreate(c *networkingv1.ServiceCIDR) {
	c.Status = networkingv1.ServiceCIDRStatus{}
}

func prepareServiceCIDRForUpdate(c, old *networkingv1.ServiceCIDR) { c.Status = old.Status }

func prepareServiceCIDRForStatusUpdate(c, old *networkingv1.ServiceCIDR) { c.Spec = old.Spec }

func validateServiceCIDR(c *networkingv1.ServiceCIDR) field.ErrorList {
	path := field.NewPath("spec", "cidrs")
	cidrs := c.Spec.CIDRs
	switch {
	case len(cidrs) == 0:
		return field.ErrorList{field.Required(path, "at least one CIDR required")}
	case len(cidrs) > 2:
		return field.ErrorList{field.TooMany(path, len(cidrs), 2)}
	}
	var errs field.ErrorList
	for i, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Index(i), s, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"))
		case p.Masked() != p:
			errs = append(errs, field.Invalid(path.Index(i), s, fmt.Sprintf("must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64) (network address %s)", p.Masked())))
		}
	}
	if len(cidrs) == 2 && len(errs) == 0 {
		a, b := netip.MustParsePrefix(cidrs[0]), netip.MustParsePrefix(cidrs[1])
		if a.Addr().Is4() == b.Addr().Is4() {
			errs = append(errs, field.Invalid(path, cidrs, "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"))
		}
	}
	return errs
}

// validateServiceCIDRUpdate: a ServiceCIDR's ranges are fixed, as kube's
// (which only lets a single-stack one gain its second family).
func validateServiceCIDRUpdate(c, old *networkingv1.ServiceCIDR) field.ErrorList {
	if strings.Join(c.Spec.CIDRs, ",") != strings.Join(old.Spec.CIDRs, ",") {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "cidrs"), c.Spec.CIDRs, "field is immutable")}
	}
	return nil
}

var ipAddressTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "ParentRef", Type: "string", Description: networkingv1.IPAddressSpec{}.SwaggerDoc()["parentRef"]},
	ageColumn,
}, func(ip *networkingv1.IPAddress, now time.Time) []any {
	ref := "<none>"
	if r := ip.Spec.ParentRef; r != nil {
		ref = r.Resource
		if r.Group != "" {
			ref += "." + r.Group
		}
		ref += "/"
		if r.Namespace != "" {
			ref += r.Namespace + "/"
		}
		ref += r.Name
	}
	return []any{ip.Name, ref, age(ip.CreationTimestamp, now)}
})

var serviceCIDRTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "CIDRs", Type: "string", Description: networkingv1.ServiceCIDRSpec{}.SwaggerDoc()["cidrs"]},
	ageColumn,
}, func(c *networkingv1.ServiceCIDR, now time.Time) []any {
	return []any{c.Name, strings.Join(c.Spec.CIDRs, ","), age(c.CreationTimestamp, now)}
})
