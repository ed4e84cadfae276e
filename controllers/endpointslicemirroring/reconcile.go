package endpointslicemirroring

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
)

// group is the endpoints of one slice: one set of ports, one address type.
type group struct {
	ports     []discoveryv1.EndpointPort
	addrType  discoveryv1.AddressType
	endpoints []discoveryv1.Endpoint
}

// reconcile makes the slices mirroring ep match it: one slice per group,
// the first existing slice of a group rewritten when anything in it
// differs, the others, and those of groups gone, deleted (or reused for a
// new group of the same address type).
func (c *Controller) reconcile(ctx context.Context, ep *corev1.Endpoints, existing []*discoveryv1.EndpointSlice) error {
	key := ep.Namespace + "/" + ep.Name
	groups, invalid, skipped := c.desired(ep)
	c.metrics.skipped.Observe(float64(skipped))
	if invalid > 0 {
		c.recorder.Eventf(ep, corev1.EventTypeWarning, "InvalidIPAddress",
			"Skipped %d invalid IP addresses when mirroring to EndpointSlices", invalid)
	}
	if skipped > invalid {
		c.recorder.Eventf(ep, corev1.EventTypeWarning, "TooManyAddressesToMirror",
			"A max of %d addresses can be mirrored to EndpointSlices per Endpoints subset. %d addresses were skipped", c.maxPerSubset, skipped)
	}

	existingByKey := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		k := groupKey(s.Ports, s.AddressType)
		existingByKey[k] = append(existingByKey[k], s)
	}
	var create, update, del []*discoveryv1.EndpointSlice
	for _, k := range sortedKeys(groups) {
		g := groups[k]
		have := existingByKey[k]
		if len(have) > 1 {
			del = append(del, have[1:]...)
		}
		if len(have) > 0 && mirrors(have[0], ep, g) {
			continue
		}
		s := newSlice(ep, g)
		if len(have) > 0 {
			s.Name, s.GenerateName, s.ResourceVersion = have[0].Name, have[0].GenerateName, have[0].ResourceVersion
			update = append(update, s)
		} else {
			create = append(create, s)
		}
	}
	for _, k := range sortedKeys(existingByKey) {
		if _, ok := groups[k]; !ok {
			del = append(del, existingByKey[k]...)
		}
	}
	// A slice to delete becomes a slice to create, if its address type
	// allows: one write instead of two.
	for i := 0; i < len(del) && len(create) > 0; {
		cr := create[len(create)-1]
		if del[i].AddressType != cr.AddressType {
			i++
			continue
		}
		cr.Name, cr.ResourceVersion = del[i].Name, del[i].ResourceVersion
		create, update = create[:len(create)-1], append(update, cr)
		del = slices.Delete(del, i, i+1)
	}

	for _, s := range create {
		created, err := c.slices.Create(ctx, s)
		if err != nil {
			if client.IsForbidden(err) {
				return nil // the namespace is terminating
			}
			return fmt.Errorf("create mirrored EndpointSlice for %s: %w", key, err)
		}
		c.tracker.Update(created)
		c.metrics.changes.WithLabelValues("create").Inc()
	}
	for _, s := range update {
		updated, err := c.slices.Update(ctx, s)
		if err != nil {
			return fmt.Errorf("update mirrored EndpointSlice %s for %s: %w", s.Name, key, err)
		}
		c.tracker.Update(updated)
		c.metrics.changes.WithLabelValues("update").Inc()
	}
	for _, s := range del {
		if err := c.slices.Delete(ctx, s.Namespace, s.Name, metav1.DeleteOptions{}); err != nil && !client.IsNotFound(err) {
			return fmt.Errorf("delete mirrored EndpointSlice %s for %s: %w", s.Name, key, err)
		}
		c.tracker.ExpectDeletion(s)
		c.metrics.changes.WithLabelValues("delete").Inc()
	}
	if n := len(create) + len(update) + len(del); n > 0 {
		c.log.Info(fmt.Sprintf("%d groups → create %d, update %d, delete %d slices", len(groups), len(create), len(update), len(del)), "object", key)
	}
	return nil
}

// desired groups ep's addresses by ports and address type. It also
// returns how many addresses were not IPs, and how many were skipped in
// all (those, and those past the maximum per subset).
func (c *Controller) desired(ep *corev1.Endpoints) (groups map[string]*group, invalid, skipped int) {
	groups = map[string]*group{}
	seen := map[string]map[string]bool{} // group key → endpoint identities
	for _, ss := range ep.Subsets {
		ports := mirrorPorts(ss.Ports)
		added := 0
		add := func(a corev1.EndpointAddress, ready bool) {
			if added >= c.maxPerSubset {
				return
			}
			addrType, ok := addressType(a.IP)
			if !ok {
				invalid++
				return
			}
			added++
			k := groupKey(ports, addrType)
			g := groups[k]
			if g == nil {
				g = &group{ports: ports, addrType: addrType}
				groups[k], seen[k] = g, map[string]bool{}
			}
			id := a.IP + "|" + a.Hostname
			if a.TargetRef != nil {
				id += "|" + a.TargetRef.Namespace + "/" + a.TargetRef.Name
			}
			if seen[k][id] {
				return
			}
			seen[k][id] = true
			g.endpoints = append(g.endpoints, addressToEndpoint(a, ready))
		}
		for _, a := range ss.Addresses {
			add(a, true)
		}
		for _, a := range ss.NotReadyAddresses {
			add(a, false)
		}
		skipped += len(ss.Addresses) + len(ss.NotReadyAddresses) - added
	}
	return groups, invalid, skipped
}

func addressType(ip string) (discoveryv1.AddressType, bool) {
	a, err := netip.ParseAddr(ip)
	switch {
	case err != nil:
		return "", false
	case a.Is4():
		return discoveryv1.AddressTypeIPv4, true
	default:
		return discoveryv1.AddressTypeIPv6, true
	}
}

func addressToEndpoint(a corev1.EndpointAddress, ready bool) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{
		Addresses:  []string{a.IP},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		TargetRef:  a.TargetRef,
		NodeName:   a.NodeName,
	}
	if a.Hostname != "" {
		ep.Hostname = &a.Hostname
	}
	return ep
}

func mirrorPorts(ports []corev1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, 0, len(ports))
	for _, p := range ports {
		name, port, protocol := p.Name, p.Port, cmp.Or(p.Protocol, corev1.ProtocolTCP)
		out = append(out, discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &protocol, AppProtocol: p.AppProtocol})
	}
	return out
}

// groupKey names a set of ports, whatever their order, and an address type.
func groupKey(ports []discoveryv1.EndpointPort, addrType discoveryv1.AddressType) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		parts = append(parts, fmt.Sprintf("%s/%d/%s/%s", deref(p.Name), deref(p.Port), deref(p.Protocol), deref(p.AppProtocol)))
	}
	slices.Sort(parts)
	return string(addrType) + ":" + strings.Join(parts, ",")
}

// newSlice is the slice mirroring group g of ep.
func newSlice(ep *corev1.Endpoints, g *group) *discoveryv1.EndpointSlice {
	yes := true
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    ep.Namespace,
			GenerateName: ep.Name + "-",
			Labels:       sliceLabels(ep),
			Annotations:  sliceAnnotations(ep),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Endpoints", Name: ep.Name, UID: ep.UID, Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		AddressType: g.addrType,
		Ports:       g.ports,
		Endpoints:   g.endpoints,
	}
	if s.Endpoints == nil {
		s.Endpoints = []discoveryv1.Endpoint{}
	}
	return s
}

// sliceLabels are ep's labels, plus the service's name and this
// controller's.
func sliceLabels(ep *corev1.Endpoints) map[string]string {
	out := maps.Clone(ep.Labels)
	if out == nil {
		out = map[string]string{}
	}
	out[discoveryv1.LabelServiceName] = ep.Name
	out[discoveryv1.LabelManagedBy] = ControllerName
	return out
}

// sliceAnnotations are ep's, but for those that describe the Endpoints
// object itself rather than what it lists.
func sliceAnnotations(ep *corev1.Endpoints) map[string]string {
	out := maps.Clone(ep.Annotations)
	if out == nil {
		out = map[string]string{}
	}
	delete(out, corev1.EndpointsLastChangeTriggerTime)
	delete(out, corev1.LastAppliedConfigAnnotation)
	return out
}

// mirrors reports whether s already mirrors group g of ep: same
// endpoints, labels, annotations and owner.
func mirrors(s *discoveryv1.EndpointSlice, ep *corev1.Endpoints, g *group) bool {
	owned := false
	for _, ref := range s.OwnerReferences {
		owned = owned || (ref.UID == ep.UID && ref.Kind == "Endpoints")
	}
	return owned &&
		maps.Equal(s.Labels, sliceLabels(ep)) &&
		apiequality.Semantic.DeepEqual(s.Annotations, sliceAnnotations(ep)) &&
		apiequality.Semantic.DeepEqual(s.Endpoints, g.endpoints)
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func sortedKeys[V any](m map[string]V) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.Sort(keys)
	return keys
}
