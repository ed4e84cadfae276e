package endpointslice

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
)

// The reconciler turns a service's pods and its existing slices into
// creates, updates and deletes, the way upstream's does, so that churn
// stays low when a service of thousands of pods changes by one:
//
//  1. Endpoints are grouped by address type and by port set (pods whose
//     named ports resolve differently land in different slices).
//  2. Within a group, each existing slice keeps the endpoints still
//     wanted, updated in place; a slice left empty is deleted.
//  3. New endpoints go first into the slices being updated anyway,
//     fullest first; what is left goes into the one unchanged slice it
//     fits best, else into new slices, max per slice.
//  4. A create and a delete of the same address type become an update of
//     the slice to delete, and a service with no endpoint at all gets one
//     empty placeholder slice per address type.

// plan is what one reconcile of one address type writes.
type plan struct {
	create, update, delete []*discoveryv1.EndpointSlice
	added, removed         int
}

// reconcile brings svc's slices (existing, all managed by this controller)
// in line with pods, and writes the result.
func (c *Controller) reconcile(ctx context.Context, svc *corev1.Service, pods []*corev1.Pod, existing []*discoveryv1.EndpointSlice, triggerTime time.Time) error {
	types := addressTypes(svc)
	var errs []error
	byType := map[discoveryv1.AddressType][]*discoveryv1.EndpointSlice{}
	var stale []*discoveryv1.EndpointSlice // of an address type svc no longer has
	for _, s := range existing {
		if !slices.Contains(types, s.AddressType) {
			stale = append(stale, s)
			continue
		}
		byType[s.AddressType] = append(byType[s.AddressType], s)
	}
	var total plan
	for _, t := range types {
		p, err := c.planAddressType(svc, pods, byType[t], t)
		if err != nil {
			errs = append(errs, err)
		}
		total.create = append(total.create, p.create...)
		total.update = append(total.update, p.update...)
		total.delete = append(total.delete, p.delete...)
		total.added += p.added
		total.removed += p.removed
	}
	total.delete = append(total.delete, stale...)
	c.metrics.added.Observe(float64(total.added))
	c.metrics.removed.Observe(float64(total.removed))
	if err := c.write(ctx, svc, total, triggerTime); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// planAddressType plans the slices of one address type. A pod whose node
// is not in the cache is left out (and the service retried), unless the
// service publishes not-ready addresses: a pod pointing at a node that
// never comes must not hold the service's slices back.
func (c *Controller) planAddressType(svc *corev1.Service, pods []*corev1.Pod, existing []*discoveryv1.EndpointSlice, addrType discoveryv1.AddressType) (plan, error) {
	var errs []error
	desired := map[string]*endpointSet{}
	portsOf := map[string][]discoveryv1.EndpointPort{}
	var keys []string // in the order first seen, for a stable packing
	for _, pod := range pods {
		if !podIsEndpoint(pod) {
			continue
		}
		ports := endpointPorts(svc, pod)
		key := portsKey(ports)
		if _, ok := desired[key]; !ok {
			desired[key], portsOf[key] = newEndpointSet(), ports
			keys = append(keys, key)
		}
		node, err := c.nodeLister.Get("", pod.Spec.NodeName)
		if err != nil {
			if !apierrors.IsNotFound(err) {
				return plan{}, err
			}
			if !svc.Spec.PublishNotReadyAddresses {
				errs = append(errs, fmt.Errorf("skipping pod %s/%s: node %q not found", pod.Namespace, pod.Name, pod.Spec.NodeName))
				continue
			}
			node = nil
		}
		ep := podToEndpoint(pod, node, svc, addrType)
		if len(ep.Addresses) > 0 {
			desired[key].insert(&ep)
		}
	}

	existingByKey := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		k := portsKey(s.Ports)
		existingByKey[k] = append(existingByKey[k], s)
	}

	var p plan
	for _, key := range keys {
		kp := c.planPorts(svc, existingByKey[key], desired[key], portsOf[key], addrType)
		p.create = append(p.create, kp.create...)
		p.update = append(p.update, kp.update...)
		p.delete = append(p.delete, kp.delete...)
		p.added += kp.added
		p.removed += kp.removed
	}
	for _, key := range sortedKeys(existingByKey) {
		if _, ok := desired[key]; !ok {
			for _, s := range existingByKey[key] {
				p.delete = append(p.delete, s)
				p.removed += len(s.Endpoints)
			}
		}
	}

	// A service without endpoints keeps one empty slice, so that readers
	// can tell "no endpoints" from "not handled yet".
	if len(existing) == len(p.delete) && len(p.create) == 0 {
		placeholder := newSlice(svc, nil, addrType)
		if len(p.delete) == 1 && isPlaceholder(p.delete[0], placeholder) {
			p.delete = nil
		} else {
			p.create = append(p.create, placeholder)
		}
	}
	return p, errors.Join(errs...)
}

// planPorts plans the slices of one port set: steps 2 and 3 above.
func (c *Controller) planPorts(svc *corev1.Service, existing []*discoveryv1.EndpointSlice, want *endpointSet, ports []discoveryv1.EndpointPort, addrType discoveryv1.AddressType) plan {
	var p plan
	var toUpdate, unchanged []*discoveryv1.EndpointSlice

	// Keep what is still wanted, as it is wanted now.
	for _, s := range existing {
		var keep []discoveryv1.Endpoint
		changed := false
		for i := range s.Endpoints {
			got := want.get(&s.Endpoints[i])
			if got == nil {
				continue
			}
			keep = append(keep, *got)
			if !apiequality.Semantic.DeepEqual(*got, s.Endpoints[i]) {
				changed = true
			}
			want.remove(&s.Endpoints[i])
		}
		labels, labelsChanged := sliceLabels(s, svc)
		switch {
		case changed || len(keep) != len(s.Endpoints):
			p.removed += len(s.Endpoints) - len(keep)
			if len(keep) == 0 {
				p.delete = append(p.delete, s)
				continue
			}
			s = s.DeepCopy()
			s.Endpoints, s.Labels = keep, labels
			toUpdate = append(toUpdate, s)
		case labelsChanged:
			s = s.DeepCopy()
			s.Labels = labels
			toUpdate = append(toUpdate, s)
		default:
			unchanged = append(unchanged, s)
		}
	}
	p.added = want.len()

	// New endpoints fill the slices written anyway, fullest first.
	slices.SortStableFunc(toUpdate, func(a, b *discoveryv1.EndpointSlice) int {
		return cmp.Compare(len(b.Endpoints), len(a.Endpoints))
	})
	for _, s := range toUpdate {
		fill(s, want, c.maxPerSlice)
	}

	// Then the unchanged slice they fit best, else new slices.
	for want.len() > 0 {
		var s *discoveryv1.EndpointSlice
		if want.len() < c.maxPerSlice {
			if i := bestFit(unchanged, want.len(), c.maxPerSlice); i >= 0 {
				s = unchanged[i].DeepCopy()
				unchanged = slices.Delete(unchanged, i, i+1)
				toUpdate = append(toUpdate, s)
			}
		}
		if s == nil {
			s = newSlice(svc, ports, addrType)
			p.create = append(p.create, s)
		}
		fill(s, want, c.maxPerSlice)
	}
	p.update = toUpdate
	return p
}

// fill moves endpoints from want into s until s holds max.
func fill(s *discoveryv1.EndpointSlice, want *endpointSet, max int) {
	for len(s.Endpoints) < max {
		ep, ok := want.pop()
		if !ok {
			return
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
}

// bestFit is the index of the slice that n more endpoints fill most
// closely without passing max; -1 if none has room.
func bestFit(candidates []*discoveryv1.EndpointSlice, n, max int) int {
	best, bestRoom := -1, max
	for i, s := range candidates {
		room := max - (n + len(s.Endpoints))
		if room >= 0 && room < bestRoom {
			best, bestRoom = i, room
			if room == 0 {
				break
			}
		}
	}
	return best
}

// newSlice is a new slice of svc's, named after it, owned by it and
// labelled as its.
func newSlice(svc *corev1.Service, ports []discoveryv1.EndpointPort, addrType discoveryv1.AddressType) *discoveryv1.EndpointSlice {
	if ports == nil {
		ports = []discoveryv1.EndpointPort{}
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       svc.Namespace,
			GenerateName:    slicePrefix(svc.Name),
			OwnerReferences: []metav1.OwnerReference{serviceOwnerRef(svc)},
		},
		AddressType: addrType,
		Ports:       ports,
		Endpoints:   []discoveryv1.Endpoint{},
	}
	s.Labels, _ = sliceLabels(s, svc)
	return s
}

// slicePrefix is "<service>-", or "slice-" when that cannot begin a name.
func slicePrefix(service string) string {
	prefix := service + "-"
	if len(apivalidation.NameIsDNSSubdomain(prefix, true)) > 0 {
		return "slice-"
	}
	return prefix
}

func serviceOwnerRef(svc *corev1.Service) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
		Controller: &yes, BlockOwnerDeletion: &yes,
	}
}

// sliceLabels are the labels s should carry: the service's (but for the
// reserved ones), service.kubernetes.io/headless for a headless service,
// the service's name and this controller's. changed reports whether they
// differ from s's.
func sliceLabels(s *discoveryv1.EndpointSlice, svc *corev1.Service) (labels map[string]string, changed bool) {
	labels = map[string]string{}
	for k, v := range svc.Labels {
		if !reservedLabel(k) {
			labels[k] = v
		}
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		labels[corev1.IsHeadlessService] = ""
	}
	labels[discoveryv1.LabelServiceName] = svc.Name
	labels[discoveryv1.LabelManagedBy] = ControllerName
	return labels, !maps.Equal(labels, s.Labels)
}

func reservedLabel(k string) bool {
	return k == discoveryv1.LabelServiceName || k == discoveryv1.LabelManagedBy || k == corev1.IsHeadlessService
}

// isPlaceholder reports whether s is the placeholder p would be: same
// namespace, labels, address type, ports and no endpoints.
func isPlaceholder(s, p *discoveryv1.EndpointSlice) bool {
	return s.Namespace == p.Namespace && maps.Equal(s.Labels, p.Labels) &&
		s.AddressType == p.AddressType && len(s.Ports) == 0 && len(s.Endpoints) == 0
}

// write carries out p: creates that a delete of the same address type can
// absorb become updates of that slice; nothing is created for a service
// being deleted (the garbage collector is on its way); each write is
// recorded in the tracker, so that a sync can tell its cache is behind.
func (c *Controller) write(ctx context.Context, svc *corev1.Service, p plan, triggerTime time.Time) error {
	for i := 0; i < len(p.delete) && len(p.create) > 0; {
		del, cr := p.delete[i], p.create[len(p.create)-1]
		if del.AddressType == cr.AddressType && ownedBy(del, svc) {
			cr.Name = del.Name
			cr.ResourceVersion = del.ResourceVersion
			p.create = p.create[:len(p.create)-1]
			p.update = append(p.update, cr)
			p.delete = slices.Delete(p.delete, i, i+1)
			continue
		}
		i++
	}

	key := svc.Namespace + "/" + svc.Name
	if svc.DeletionTimestamp == nil {
		for _, s := range p.create {
			setTriggerTime(s, triggerTime)
			created, err := c.slices.Create(ctx, s)
			if err != nil {
				if client.IsForbidden(err) {
					return nil // the namespace is terminating: nothing may be created in it
				}
				return fmt.Errorf("create EndpointSlice for Service %s: %w", key, err)
			}
			c.tracker.Update(created)
			c.metrics.changes.WithLabelValues("create").Inc()
		}
	}
	for _, s := range p.update {
		setTriggerTime(s, triggerTime)
		updated, err := c.slices.Update(ctx, s)
		if err != nil {
			return fmt.Errorf("update EndpointSlice %s for Service %s: %w", s.Name, key, err)
		}
		c.tracker.Update(updated)
		c.metrics.changes.WithLabelValues("update").Inc()
	}
	for _, s := range p.delete {
		err := c.slices.Delete(ctx, s.Namespace, s.Name, metav1.DeleteOptions{})
		if err != nil && !client.IsNotFound(err) {
			return fmt.Errorf("delete EndpointSlice %s for Service %s: %w", s.Name, key, err)
		}
		c.tracker.ExpectDeletion(s)
		c.metrics.changes.WithLabelValues("delete").Inc()
	}
	c.metrics.changedPerSync.Observe(float64(len(p.create) + len(p.update) + len(p.delete)))
	if n := len(p.create) + len(p.update) + len(p.delete); n > 0 {
		c.log.Info(fmt.Sprintf("+%d -%d endpoints → create %d, update %d, delete %d slices", p.added, p.removed, len(p.create), len(p.update), len(p.delete)),
			"object", key)
	}
	return nil
}

func ownedBy(s *discoveryv1.EndpointSlice, svc *corev1.Service) bool {
	for _, ref := range s.OwnerReferences {
		if ref.UID == svc.UID && ref.Kind == "Service" && ref.APIVersion == "v1" {
			return true
		}
	}
	return false
}

// setTriggerTime records when the change being written happened, or
// clears an old time when none is known.
func setTriggerTime(s *discoveryv1.EndpointSlice, t time.Time) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	if t.IsZero() {
		delete(s.Annotations, corev1.EndpointsLastChangeTriggerTime)
		return
	}
	s.Annotations[corev1.EndpointsLastChangeTriggerTime] = t.UTC().Format(time.RFC3339Nano)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.Sort(keys)
	return keys
}
