// Package quota is the arithmetic of ResourceQuotas: what one object is
// charged for, which quotas it falls under, and whether a request fits. It
// is the part of Kubernetes' pkg/quota (the evaluators and the resource
// list helpers) that both the resource quota controller and the API
// server's quota admission need, so it lives here, beside the catalogue,
// where both can import it without importing each other.
//
// Design, one line per part:
//
//   - resources.go: ResourceList arithmetic: Add, Subtract, Mask,
//     LessThanOrEqual, Equals, ResourceNames, Format.
//   - pods.go: what a pod is charged for (PodUsage), when it stops being
//     charged (PodCharged), the pod scopes, and the cpu/memory constraints
//     on each container (Constraints).
//   - objects.go: what any served object is charged for (ObjectUsage), the
//     names a kind can be charged under (MatchingResources,
//     CoveredResources), and whether a quota applies to an object (Matches).
//   - check.go: admission's questions: Exceeded, with kube-apiserver's exact
//     message, and UsageKnown.
//
// Properties:
//
//   - Pure: no I/O, no goroutines, no package state that changes. The only
//     clock is the time a caller passes to the ...At functions; the others
//     read time.Now.
//   - Exact: quantities are resource.Quantity and are added, compared and
//     printed exactly ("100m" + "200m" is "300m", never 0.30000000000000004).
//   - Inputs are never modified; every ResourceList returned is new and
//     belongs to the caller.
//   - Upstream's names and rules: "count/<plural>.<group>" ("count/<plural>"
//     for core kinds) for every quotable kind, the legacy names of core
//     kinds (pods, services, configmaps, secrets, resourcequotas,
//     replicationcontrollers, persistentvolumeclaims, services.nodeports,
//     services.loadbalancers), requests.*/limits.* and the bare cpu/memory
//     aliases of requests.* for pods.
package quota
