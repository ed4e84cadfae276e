package quota

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/minictl/minictl/api"
)

// legacyCountNames are the names core kinds were counted under before
// count/<resource> existed; each counts every object, like count/ does.
// (pods and services have rules of their own.)
var legacyCountNames = map[string]corev1.ResourceName{
	"configmaps":             corev1.ResourceConfigMaps,
	"secrets":                corev1.ResourceSecrets,
	"resourcequotas":         corev1.ResourceQuotas,
	"replicationcontrollers": corev1.ResourceReplicationControllers,
	"persistentvolumeclaims": corev1.ResourcePersistentVolumeClaims,
}

// serviceResources are the names a service can be charged under.
var serviceResources = []corev1.ResourceName{
	"count/services", corev1.ResourceServices,
	corev1.ResourceServicesLoadBalancers, corev1.ResourceServicesNodePorts,
}

// ObjectCountName is the name that counts res's objects:
// "count/<plural>.<group>", or "count/<plural>" for the core group
// ("count/pods", "count/deployments.apps").
func ObjectCountName(res *api.Resource) corev1.ResourceName {
	if res.Group == "" {
		return corev1.ResourceName("count/" + res.Plural)
	}
	return corev1.ResourceName("count/" + res.Plural + "." + res.Group)
}

// Quotable reports whether res's objects can be charged to a quota: they
// live in namespaces, as quotas do, are kept (a review is answered and
// the resource metrics are read, not stored: nothing of them stays to
// count), and are not Events, which
// Kubernetes leaves out of quota by default.
func Quotable(res *api.Resource) bool {
	return res.Namespaced && !res.CreateOnly && !res.ReadOnly && !(res.Group == "" && res.Plural == "events")
}

func isCore(res *api.Resource, plural string) bool { return res.Group == "" && res.Plural == plural }

// ObjectUsage is ObjectUsageAt now.
func ObjectUsage(res *api.Resource, obj api.Object) corev1.ResourceList {
	return ObjectUsageAt(res, obj, time.Now())
}

// ObjectUsageAt returns what obj, an object of res, is charged for at time
// now (time matters only for pods; see PodUsageAt):
//
//   - every quotable kind: count/<plural>.<group>=1 (count/<plural> in the
//     core group);
//   - configmaps, secrets, resourcequotas, replicationcontrollers,
//     persistentvolumeclaims: also their legacy name =1;
//   - services: services=1, services.loadbalancers=1 for a LoadBalancer
//     (0 otherwise), services.nodeports = the node ports it takes (its
//     ports for NodePort and LoadBalancer services, 0 otherwise);
//   - pods: PodUsageAt.
//
// Objects of a kind that is not Quotable are charged for nothing.
func ObjectUsageAt(res *api.Resource, obj api.Object, now time.Time) corev1.ResourceList {
	if !Quotable(res) {
		return corev1.ResourceList{}
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		if isCore(res, "pods") {
			return PodUsageAt(o, now)
		}
	case *corev1.Service:
		if isCore(res, "services") {
			return serviceUsage(o)
		}
	case *corev1.PersistentVolumeClaim:
		if isCore(res, "persistentvolumeclaims") {
			return claimUsage(o)
		}
	}
	usage := corev1.ResourceList{ObjectCountName(res): one()}
	if legacy, ok := legacyCountNames[res.Plural]; ok && res.Group == "" {
		usage[legacy] = one()
	}
	return usage
}

func one() resource.Quantity { return *resource.NewQuantity(1, resource.DecimalSI) }

// serviceUsage is what a service is charged for.
func serviceUsage(svc *corev1.Service) corev1.ResourceList {
	usage := corev1.ResourceList{
		"count/services":                     one(),
		corev1.ResourceServices:              one(),
		corev1.ResourceServicesLoadBalancers: *resource.NewQuantity(0, resource.DecimalSI),
		corev1.ResourceServicesNodePorts:     *resource.NewQuantity(0, resource.DecimalSI),
	}
	ports := int64(len(svc.Spec.Ports))
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		usage[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(ports, resource.DecimalSI)
	case corev1.ServiceTypeLoadBalancer:
		usage[corev1.ResourceServicesLoadBalancers] = one()
		if a := svc.Spec.AllocateLoadBalancerNodePorts; a != nil && !*a {
			// Node ports are not allocated; only those asked for by
			// number are taken.
			ports = 0
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					ports++
				}
			}
		}
		usage[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(ports, resource.DecimalSI)
	}
	return usage
}

// MatchingResources returns the names among names that objects of res can
// be charged under, in names' order: what a quota limiting names tracks of
// res.
func MatchingResources(res *api.Resource, names []corev1.ResourceName) []corev1.ResourceName {
	if !Quotable(res) {
		return nil
	}
	switch {
	case isCore(res, "pods"):
		var out []corev1.ResourceName
		for _, name := range names {
			if slices.Contains(out, name) {
				continue
			}
			if slices.Contains(podResources, name) ||
				strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) ||
				strings.HasPrefix(string(name), corev1.ResourceRequestsHugePagesPrefix) ||
				isExtendedQuotaName(name) {
				out = append(out, name)
			}
		}
		return out
	case isCore(res, "services"):
		return intersect(names, serviceResources)
	case isCore(res, "persistentvolumeclaims"):
		var out []corev1.ResourceName
		for _, name := range names {
			if !slices.Contains(out, name) && isClaimResource(name) {
				out = append(out, name)
			}
		}
		return out
	}
	own := []corev1.ResourceName{ObjectCountName(res)}
	if legacy, ok := legacyCountNames[res.Plural]; ok && res.Group == "" {
		own = append(own, legacy)
	}
	return intersect(names, own)
}

// CoveredResources returns the names in hard that some kind of the
// catalogue served can be charged under, sorted: the part of a quota whose
// usage can be measured. Others ("requests.storage" with no volume claims
// served, or "count/widgets.example.com" with no such kind) are limits
// nothing here counts.
func CoveredResources(served api.Catalogue, hard corev1.ResourceList) []corev1.ResourceName {
	names := ResourceNames(hard)
	var out []corev1.ResourceName
	for _, res := range served {
		for _, name := range MatchingResources(res, names) {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// ScopeSelectors returns the scopes a quota selects, spec.scopes (each as
// an Exists requirement) followed by spec.scopeSelector's expressions. An
// object falls under the quota only when it is in all of them.
func ScopeSelectors(q *corev1.ResourceQuota) []corev1.ScopedResourceSelectorRequirement {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, s := range q.Spec.Scopes {
		out = append(out, corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists})
	}
	if q.Spec.ScopeSelector != nil {
		out = append(out, q.Spec.ScopeSelector.MatchExpressions...)
	}
	return out
}

// MatchesScopes reports whether obj, an object of res, is in every scope
// quota q selects. Scopes are about pods: an object of any other kind is in
// no scope, so a scoped quota never counts it. The error reports a scope
// selector that cannot be evaluated (an unknown operator, bad values).
func MatchesScopes(q *corev1.ResourceQuota, res *api.Resource, obj api.Object) (bool, error) {
	selectors := ScopeSelectors(q)
	if len(selectors) == 0 {
		return true, nil
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || !isCore(res, "pods") {
		return false, nil
	}
	for _, sel := range selectors {
		match, err := podMatchesScope(pod, sel)
		if err != nil || !match {
			return false, err
		}
	}
	return true, nil
}

// Matches reports whether quota q applies to obj, an object of res, as
// admission asks it: q's status.hard (the limits the controller has
// observed) names something obj can be charged under, and obj is in q's
// scopes.
func Matches(q *corev1.ResourceQuota, res *api.Resource, obj api.Object) (bool, error) {
	if len(MatchingResources(res, ResourceNames(q.Status.Hard))) == 0 {
		return false, nil
	}
	return MatchesScopes(q, res, obj)
}

// Constraints checks what a quota limiting required demands of obj beyond
// fitting: for pods, that every container states the cpu and memory
// requests and limits required names (see kube-apiserver's "must specify
// requests.cpu for: app"). Other kinds have no constraints.
// Admission reports a failure as "failed quota: <name>: <err>".
func Constraints(res *api.Resource, obj api.Object, required []corev1.ResourceName) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !isCore(res, "pods") {
		return nil
	}
	return podConstraints(pod, required)
}

// storageClassSuffix ends the names that charge claims of one class:
// "<class>.storageclass.storage.k8s.io/requests.storage" and
// "<class>.storageclass.storage.k8s.io/persistentvolumeclaims".
const storageClassSuffix = ".storageclass.storage.k8s.io/"

// claimUsage is what a claim is charged for, as kube's claim evaluator
// charges it: one claim and the storage it asks for, overall and under
// its class.
func claimUsage(pvc *corev1.PersistentVolumeClaim) corev1.ResourceList {
	usage := corev1.ResourceList{
		"count/persistentvolumeclaims":        one(),
		corev1.ResourcePersistentVolumeClaims: one(),
	}
	storage, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if ok {
		usage[corev1.ResourceRequestsStorage] = storage.DeepCopy()
	}
	if class := api.ClaimClass(pvc); class != "" {
		usage[corev1.ResourceName(class+storageClassSuffix+string(corev1.ResourcePersistentVolumeClaims))] = one()
		if ok {
			usage[corev1.ResourceName(class+storageClassSuffix+string(corev1.ResourceRequestsStorage))] = storage.DeepCopy()
		}
	}
	return usage
}

// isClaimResource reports whether claims can be charged under name.
func isClaimResource(name corev1.ResourceName) bool {
	switch name {
	case "count/persistentvolumeclaims", corev1.ResourcePersistentVolumeClaims, corev1.ResourceRequestsStorage:
		return true
	}
	_, rest, ok := strings.Cut(string(name), storageClassSuffix)
	return ok && (rest == string(corev1.ResourceRequestsStorage) || rest == string(corev1.ResourcePersistentVolumeClaims))
}
