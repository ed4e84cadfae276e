package api

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Namespaces, Nodes, Endpoints, ServiceAccounts and Events. Pods, Services,
// ConfigMaps and Secrets, and quotas and limit ranges have files of their
// own.

var (
	namespaceFieldLabels = []string{"status.phase"}
	nodeFieldLabels      = []string{"spec.unschedulable"}
	eventFieldLabels     = []string{
		"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
		"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
		"reason", "reportingComponent", "source", "type",
	}
)

// --- Namespace ---

// defaultNamespace labels a namespace with its own name
// (kubernetes.io/metadata.name), so that selectors can pick namespaces by
// name, and makes it Active.
func defaultNamespace(ns *corev1.Namespace) {
	labelNamespaceName(ns)
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
}

func labelNamespaceName(ns *corev1.Namespace) {
	if ns.Name == "" {
		return // generateName: the server labels it once the name is known
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

// prepareNamespaceForCreate makes a new namespace Active and gives it the
// "kubernetes" finalizer, which the namespace controller removes (through
// the finalize subresource) once the namespace is empty. It is not a
// default: a default would come back after the controller removed it.
func prepareNamespaceForCreate(ns *corev1.Namespace) {
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	if !contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
	}
	labelNamespaceName(ns)
}

// prepareNamespaceForUpdate keeps the status and spec.finalizers, which
// change only through the status and finalize subresources.
func prepareNamespaceForUpdate(ns, old *corev1.Namespace) {
	ns.Status = old.Status
	ns.Spec.Finalizers = old.Spec.Finalizers
	labelNamespaceName(ns)
}

func validateNamespace(ns *corev1.Namespace) field.ErrorList {
	var errs field.ErrorList
	for i, f := range ns.Spec.Finalizers {
		fldPath := field.NewPath("spec", "finalizers").Index(i)
		errs = append(errs, apivalidation.ValidateFinalizerName(string(f), fldPath)...)
		if !strings.Contains(string(f), "/") && f != corev1.FinalizerKubernetes {
			errs = append(errs, field.Invalid(fldPath, f, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	if p := ns.Status.Phase; p != "" && p != corev1.NamespaceActive && p != corev1.NamespaceTerminating {
		errs = append(errs, field.NotSupported(field.NewPath("status", "phase"), p,
			[]corev1.NamespacePhase{corev1.NamespaceActive, corev1.NamespaceTerminating}))
	}
	return errs
}

func namespaceFields(ns *corev1.Namespace) fields.Set {
	return fields.Set{"status.phase": string(ns.Status.Phase)}
}

// --- Node ---

// defaultNode sets allocatable to capacity when a node reports only its
// capacity, and keeps spec.podCIDR and spec.podCIDRs in step (podCIDR is
// podCIDRs[0]; the API reads either and writes both).
func defaultNode(node *corev1.Node) {
	if node.Status.Allocatable == nil && node.Status.Capacity != nil {
		node.Status.Allocatable = node.Status.Capacity.DeepCopy()
	}
	if node.Spec.PodCIDR != "" && len(node.Spec.PodCIDRs) == 0 {
		node.Spec.PodCIDRs = []string{node.Spec.PodCIDR}
	} else if node.Spec.PodCIDR == "" && len(node.Spec.PodCIDRs) > 0 {
		node.Spec.PodCIDR = node.Spec.PodCIDRs[0]
	}
}

// prepareNodeForUpdate keeps the status, which the kubelet writes through
// the status subresource. A node is created with whatever status its
// kubelet registers it with, so there is nothing to prepare on create.
func prepareNodeForUpdate(node, old *corev1.Node) {
	node.Status = old.Status
}

func validateNode(node *corev1.Node) field.ErrorList {
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	for i, cidr := range node.Spec.PodCIDRs {
		if _, err := netip.ParsePrefix(cidr); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("podCIDRs").Index(i), cidr, "must be a valid CIDR"))
		}
	}
	if len(node.Spec.PodCIDRs) > 0 && node.Spec.PodCIDR != node.Spec.PodCIDRs[0] {
		errs = append(errs, field.Invalid(specPath.Child("podCIDR"), node.Spec.PodCIDR, "must match the first element of podCIDRs"))
	}
	errs = append(errs, validateTaints(node.Spec.Taints, specPath.Child("taints"))...)
	return errs
}

func validateTaints(taints []corev1.Taint, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	type keyEffect struct {
		key    string
		effect corev1.TaintEffect
	}
	seen := sets.New[keyEffect]()
	for i, t := range taints {
		idxPath := fldPath.Index(i)
		if t.Key == "" {
			errs = append(errs, field.Required(idxPath.Child("key"), ""))
		} else {
			errs = append(errs, validateQualifiedName(t.Key, idxPath.Child("key"))...)
		}
		switch {
		case t.Effect == "":
			errs = append(errs, field.Required(idxPath.Child("effect"), ""))
		case !contains(supportedTaintEffects, t.Effect):
			errs = append(errs, field.NotSupported(idxPath.Child("effect"), t.Effect, supportedTaintEffects))
		}
		if t.Value != "" {
			errs = append(errs, validateLabelValue(t.Value, idxPath.Child("value"))...)
		}
		if k := (keyEffect{t.Key, t.Effect}); seen.Has(k) {
			errs = append(errs, field.Duplicate(idxPath, fmt.Sprintf("%s:%s", t.Key, t.Effect)))
		} else {
			seen.Insert(k)
		}
	}
	return errs
}

// validateNodeUpdate allows the pod CIDRs and the provider ID to be set
// once (by the node lifecycle controller and the cloud), never changed.
func validateNodeUpdate(node, old *corev1.Node) field.ErrorList {
	var errs field.ErrorList
	if len(old.Spec.PodCIDRs) > 0 && !equalStrings(node.Spec.PodCIDRs, old.Spec.PodCIDRs) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "podCIDRs"), `node updates may not change podCIDR except from "" to valid`))
	}
	if old.Spec.ProviderID != "" && node.Spec.ProviderID != old.Spec.ProviderID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "providerID"), `node updates may not change providerID except from "" to valid`))
	}
	return errs
}

func nodeFields(node *corev1.Node) fields.Set {
	return fields.Set{"spec.unschedulable": fmt.Sprint(node.Spec.Unschedulable)}
}

// --- Endpoints ---

func defaultEndpoints(ep *corev1.Endpoints) {
	for i := range ep.Subsets {
		for j := range ep.Subsets[i].Ports {
			if p := &ep.Subsets[i].Ports[j]; p.Protocol == "" {
				p.Protocol = corev1.ProtocolTCP
			}
		}
	}
}

func validateEndpoints(ep *corev1.Endpoints) field.ErrorList {
	var errs field.ErrorList
	for i, ss := range ep.Subsets {
		ssPath := field.NewPath("subsets").Index(i)
		for j, a := range ss.Addresses {
			errs = append(errs, validateEndpointAddress(a, ssPath.Child("addresses").Index(j))...)
		}
		for j, a := range ss.NotReadyAddresses {
			errs = append(errs, validateEndpointAddress(a, ssPath.Child("notReadyAddresses").Index(j))...)
		}
		names := sets.New[string]()
		for j, p := range ss.Ports {
			idxPath := ssPath.Child("ports").Index(j)
			switch {
			case p.Name == "" && len(ss.Ports) > 1:
				errs = append(errs, field.Required(idxPath.Child("name"), ""))
			case p.Name == "":
			case names.Has(p.Name):
				errs = append(errs, field.Duplicate(idxPath.Child("name"), p.Name))
			default:
				errs = append(errs, validateDNSLabel(p.Name, idxPath.Child("name"))...)
			}
			names.Insert(p.Name)
			errs = append(errs, validatePortNum(p.Port, idxPath.Child("port"))...)
			errs = append(errs, validateProtocol(p.Protocol, idxPath.Child("protocol"))...)
		}
	}
	return errs
}

func validateEndpointAddress(a corev1.EndpointAddress, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a.IP == "" {
		errs = append(errs, field.Required(fldPath.Child("ip"), ""))
	} else if _, err := netip.ParseAddr(a.IP); err != nil {
		errs = append(errs, field.Invalid(fldPath.Child("ip"), a.IP, "must be a valid IP address"))
	}
	if a.Hostname != "" {
		errs = append(errs, validateDNSLabel(a.Hostname, fldPath.Child("hostname"))...)
	}
	if a.NodeName != nil {
		errs = append(errs, validateNames(*a.NodeName, nameIsDNSSubdomain, fldPath.Child("nodeName"))...)
	}
	return errs
}

// --- Event ---

// validateEvent checks that an event about a namespaced object lives in
// that object's namespace. Unlike kube-apiserver it accepts an empty
// involvedObject.namespace in any namespace. Event has no defaults: count,
// timestamps and type are the recorder's to fill.
func validateEvent(ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if ns := ev.InvolvedObject.Namespace; ns != "" && ns != ev.Namespace {
		errs = append(errs, field.Invalid(field.NewPath("involvedObject", "namespace"), ns, "does not match event.namespace"))
	}
	if t := ev.Type; t != "" && t != corev1.EventTypeNormal && t != corev1.EventTypeWarning {
		errs = append(errs, field.NotSupported(field.NewPath("type"), t, []string{corev1.EventTypeNormal, corev1.EventTypeWarning}))
	}
	return errs
}

func eventFields(ev *corev1.Event) fields.Set {
	source := ev.Source.Component
	if source == "" {
		source = ev.ReportingController
	}
	return fields.Set{
		"involvedObject.kind":            ev.InvolvedObject.Kind,
		"involvedObject.namespace":       ev.InvolvedObject.Namespace,
		"involvedObject.name":            ev.InvolvedObject.Name,
		"involvedObject.uid":             string(ev.InvolvedObject.UID),
		"involvedObject.apiVersion":      ev.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": ev.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       ev.InvolvedObject.FieldPath,
		"reason":                         ev.Reason,
		"reportingComponent":             ev.ReportingController,
		"source":                         source,
		"type":                           ev.Type,
	}
}
