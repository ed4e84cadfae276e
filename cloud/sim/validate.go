package sim

import (
	"net"
	"net/http"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits on what the cloud accepts, so that no request can make it hold
// without bound.
const (
	maxNameLength   = 63
	maxListeners    = 100
	maxBackends     = 1000
	maxAddresses    = 10
	maxTags         = 50
	maxTagKey       = 128
	maxTagValue     = 256
	maxFaultWindow  = time.Hour
	maxFaultDelay   = time.Minute
	maxInstanceName = validation.DNS1123SubdomainMaxLength
)

var (
	addressTypes = []string{"InternalIP", "ExternalIP", "Hostname", "InternalDNS", "ExternalDNS"}
	protocols    = []string{"TCP", "UDP", "SCTP"}
)

// invalid is the 422 for errs, or nil when there are none.
func invalid(what, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return newError(http.StatusUnprocessableEntity, "%s %q is invalid: %s", what, name, errs.ToAggregate().Error())
}

// validateName checks a load balancer's or route's name: a DNS label, as
// most clouds' resource names are.
func validateName(name string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(field.NewPath("name"), name, msg))
	}
	return errs
}

func validateInstanceSpec(s *InstanceSpec) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(field.NewPath("name"), ""))
	}
	for _, msg := range validation.IsDNS1123Subdomain(s.Name) {
		if s.Name != "" {
			errs = append(errs, field.Invalid(field.NewPath("name"), s.Name, msg))
		}
	}
	for _, f := range []struct{ path, v string }{{"zone", s.Zone}, {"region", s.Region}} {
		for _, msg := range validation.IsDNS1123Label(f.v) {
			errs = append(errs, field.Invalid(field.NewPath(f.path), f.v, msg))
		}
	}
	if !slices.Contains(InstanceTypes, s.InstanceType) {
		errs = append(errs, field.NotSupported(field.NewPath("instanceType"), s.InstanceType, InstanceTypes))
	}
	ap := field.NewPath("addresses")
	if len(s.Addresses) > maxAddresses {
		errs = append(errs, field.TooMany(ap, len(s.Addresses), maxAddresses))
	}
	for i, a := range s.Addresses {
		p := ap.Index(i)
		if !slices.Contains(addressTypes, a.Type) {
			errs = append(errs, field.NotSupported(p.Child("type"), a.Type, addressTypes))
		}
		if a.Address == "" {
			errs = append(errs, field.Required(p.Child("address"), ""))
		} else if (a.Type == "InternalIP" || a.Type == "ExternalIP") && net.ParseIP(a.Address) == nil {
			errs = append(errs, field.Invalid(p.Child("address"), a.Address, "must be a valid IP address"))
		}
	}
	return errs
}

func validateLoadBalancerSpec(s *LoadBalancerSpec) field.ErrorList {
	var errs field.ErrorList
	if s.IP != "" && net.ParseIP(s.IP).To4() == nil {
		errs = append(errs, field.Invalid(field.NewPath("ip"), s.IP, "must be a valid IPv4 address"))
	}
	lp := field.NewPath("listeners")
	if len(s.Listeners) == 0 {
		errs = append(errs, field.Required(lp, "a load balancer needs at least one listener"))
	}
	if len(s.Listeners) > maxListeners {
		errs = append(errs, field.TooMany(lp, len(s.Listeners), maxListeners))
	}
	seen := map[Listener]bool{}
	for i, l := range s.Listeners {
		p := lp.Index(i)
		if !slices.Contains(protocols, l.Protocol) {
			errs = append(errs, field.NotSupported(p.Child("protocol"), l.Protocol, protocols))
		}
		if l.Port < 1 || l.Port > 65535 {
			errs = append(errs, field.Invalid(p.Child("port"), l.Port, validation.InclusiveRangeError(1, 65535)))
		}
		if l.NodePort < 0 || l.NodePort > 65535 {
			errs = append(errs, field.Invalid(p.Child("nodePort"), l.NodePort, validation.InclusiveRangeError(0, 65535)))
		}
		key := Listener{Protocol: l.Protocol, Port: l.Port}
		if seen[key] {
			errs = append(errs, field.Duplicate(p, l.Protocol+"/"+itoa(l.Port)))
		}
		seen[key] = true
	}
	bp := field.NewPath("backends")
	if len(s.Backends) > maxBackends {
		errs = append(errs, field.TooMany(bp, len(s.Backends), maxBackends))
	}
	names := map[string]bool{}
	for i, b := range s.Backends {
		if names[b] {
			errs = append(errs, field.Duplicate(bp.Index(i), b))
		}
		names[b] = true
	}
	return append(errs, validateTags(s.Tags)...)
}

func validateRouteSpec(s *RouteSpec) field.ErrorList {
	var errs field.ErrorList
	dp := field.NewPath("destinationCIDR")
	if s.DestinationCIDR == "" {
		errs = append(errs, field.Required(dp, ""))
	} else if ip, n, err := net.ParseCIDR(s.DestinationCIDR); err != nil {
		errs = append(errs, field.Invalid(dp, s.DestinationCIDR, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"))
	} else if !ip.Equal(n.IP) {
		errs = append(errs, field.Invalid(dp, s.DestinationCIDR, "must be a network address, e.g. "+n.String()))
	}
	if s.Target == "" {
		errs = append(errs, field.Required(field.NewPath("target"), "the name of the instance the route leads to"))
	}
	return append(errs, validateTags(s.Tags)...)
}

func validateTags(tags map[string]string) field.ErrorList {
	var errs field.ErrorList
	tp := field.NewPath("tags")
	if len(tags) > maxTags {
		errs = append(errs, field.TooMany(tp, len(tags), maxTags))
	}
	for k, v := range tags {
		if k == "" || len(k) > maxTagKey {
			errs = append(errs, field.Invalid(tp, k, "a tag key must be 1 to 128 characters"))
		}
		if len(v) > maxTagValue {
			errs = append(errs, field.TooLong(tp.Key(k), "", maxTagValue))
		}
	}
	return errs
}

// validateFaults checks the switch and returns its parsed window and delay.
func validateFaults(f *Faults) (window, delay time.Duration, errs field.ErrorList) {
	modes := []string{FaultUnavailable, FaultSlow}
	if !slices.Contains(modes, f.Mode) {
		errs = append(errs, field.NotSupported(field.NewPath("mode"), f.Mode, modes))
	}
	window, errs = parseDuration(errs, field.NewPath("duration"), f.Duration, true, maxFaultWindow)
	dp := field.NewPath("delay")
	switch {
	case f.Mode == FaultSlow:
		delay, errs = parseDuration(errs, dp, f.Delay, true, maxFaultDelay)
	case f.Delay != "":
		errs = append(errs, field.Forbidden(dp, "only with mode "+FaultSlow))
	}
	return window, delay, errs
}

func parseDuration(errs field.ErrorList, p *field.Path, s string, required bool, max time.Duration) (time.Duration, field.ErrorList) {
	if s == "" {
		if required {
			errs = append(errs, field.Required(p, "a duration such as 10s"))
		}
		return 0, errs
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		errs = append(errs, field.Invalid(p, s, "must be a duration such as 10s or 1m30s"))
	case d <= 0 || d > max:
		errs = append(errs, field.Invalid(p, s, "must be more than 0 and at most "+max.String()))
	}
	return d, errs
}
