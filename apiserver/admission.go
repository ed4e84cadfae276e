package apiserver

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/api"
)

// admissionChain is every admission step a write passes, in the order
// kube-apiserver runs the same plugins. Each step is a named plugin that
// may mutate the object (admit), check it (validate), or both, as a
// Kubernetes admission plugin implements MutationInterface,
// ValidationInterface or both. A write runs the chain twice:
//
//  1. every admit, in this order, once the object is defaulted and its
//     server-set fields prepared, and before it is validated: the built-in
//     plugins, then the mutating webhooks;
//  2. every validate, in this order, once the object is valid, just
//     before it is written: the built-in plugins, then the
//     ValidatingAdmissionPolicies, the validating webhooks, and
//     ResourceQuota last, which charges only what every other step let
//     through.
//
// The first plugin to refuse ends the write with its error. Each plugin
// decides for itself which writes it acts on (operation, kind,
// subresource, dry run). A delete has no new object: both halves see it
// with the object being deleted as the old one (the built-in plugins let
// it through, webhooks may refuse it). The binding and finalize
// subresources, which set one field only the server's callers own, skip
// the chain.
var admissionChain = []admissionPlugin{
	{name: "NamespaceLifecycle", admit: (*Server).admitNamespaceLifecycle},
	{name: "LimitRanger", admit: (*Server).admitLimitRanges, validate: (*Server).validateLimitRanges},
	{name: "ServiceAccount", admit: (*Server).admitServiceAccount},   // serviceaccount_admission.go
	{name: "NodeRestriction", admit: (*Server).admitNodeRestriction}, // only when enabled (noderestriction.go)
	{name: "DefaultTolerationSeconds", admit: (*Server).admitDefaultTolerationSeconds},
	{name: "DefaultStorageClass", admit: (*Server).admitDefaultStorageClass}, // storage_admission.go
	{name: "StorageObjectInUseProtection", admit: (*Server).admitStorageObjectInUseProtection},
	{name: "PersistentVolumeClaimResize", validate: (*Server).validatePersistentVolumeClaimResize},
	{name: "CertificateApproval", validate: (*Server).validateCertificateApproval},
	{name: "CertificateSigning", validate: (*Server).validateCertificateSigning},
	{name: "CertificateSubjectRestriction", validate: (*Server).validateCertificateSubjectRestriction},
	{name: "DefaultIngressClass", admit: (*Server).admitDefaultIngressClass},  // ingressclass_admission.go
	{name: "MutatingAdmissionWebhook", admit: (*Server).admitWebhooks},        // after the built-in mutating plugins
	{name: "ValidatingAdmissionPolicy", validate: (*Server).validatePolicies}, // after the built-in validating plugins
	{name: "ValidatingAdmissionWebhook", validate: (*Server).validateWebhooks},
	{name: "ResourceQuota", validate: (*Server).validateResourceQuota}, // last: it charges what the others let through
}

// enableAdmissionPlugins turns on the named plugins that are off unless
// asked for.
func (s *Server) enableAdmissionPlugins(names []string) error {
	for _, n := range names {
		switch {
		case n == "NodeRestriction":
			s.nodeRestriction = true
		case slices.ContainsFunc(admissionChain, func(p admissionPlugin) bool { return p.name == n }):
		default:
			return fmt.Errorf("apiserver: unknown admission plugin %q", n)
		}
	}
	return nil
}

// admissionPlugin is one step of the admission chain.
type admissionPlugin struct {
	name string
	// admit may change a.obj, or refuse the write; nil if the plugin does
	// not mutate.
	admit func(s *Server, ctx context.Context, a *attributes) error
	// validate may refuse the write but not change a.obj; nil if the
	// plugin does not validate. A plugin that reserves something for the
	// write (ResourceQuota charges the object's usage) returns release,
	// which gives it back if the write does not happen; others return nil.
	validate func(s *Server, ctx context.Context, a *attributes) (release func(), err error)
}

// admissionOp is what a write does, as admission.Operation in Kubernetes.
type admissionOp string

const (
	opCreate admissionOp = "CREATE"
	opUpdate admissionOp = "UPDATE"
	opDelete admissionOp = "DELETE"
)

// attributes are what admission sees of one write, as Kubernetes'
// admission.Attributes.
type attributes struct {
	op              admissionOp
	res             *api.Resource
	namespace, name string
	subresource     string     // "status" or "scale", or "" for the object itself
	obj             api.Object // the object to be written; nil on delete
	old             api.Object // the object before an update or a delete; nil on create
	mode            updateMode // the part of the object an update changes
	dryRun          bool
	generated       bool // a create whose name was generated from metadata.generateName
}

// admit runs the mutating half of the admission chain.
func (s *Server) admit(ctx context.Context, a *attributes) error {
	for _, p := range admissionChain {
		if p.admit == nil {
			continue
		}
		if err := p.admit(s, ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// validateAdmission runs the validating half of the admission chain. It
// returns release, which gives back what the plugins reserved for the
// write; the caller calls it if the write does not happen. On error,
// nothing stays reserved.
func (s *Server) validateAdmission(ctx context.Context, a *attributes) (release func(), err error) {
	release = func() {}
	for _, p := range admissionChain {
		if p.validate == nil {
			continue
		}
		r, err := p.validate(s, ctx, a)
		if err != nil {
			release()
			return func() {}, err
		}
		if r != nil {
			earlier := release
			release = func() { r(); earlier() }
		}
	}
	return release, nil
}

// admitNamespaceLifecycle is Kubernetes' NamespaceLifecycle: nothing is
// created in a namespace that does not exist or is being terminated, and
// the namespaces every cluster has may not be deleted.
func (s *Server) admitNamespaceLifecycle(ctx context.Context, a *attributes) error {
	if a.res == api.Namespaces {
		if a.op == opDelete && slices.Contains(protectedNamespaces, a.name) {
			return apierrors.NewForbidden(a.res.GroupResource(), a.name, errors.New("this namespace may not be deleted"))
		}
		return nil
	}
	if a.op != opCreate || !a.res.Namespaced {
		return nil
	}
	ns, err := s.namespace(ctx, a.namespace)
	if err != nil {
		return err
	}
	if ns.Status.Phase == corev1.NamespaceTerminating || ns.DeletionTimestamp != nil {
		return apierrors.NewForbidden(a.res.GroupResource(), a.name,
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns.Name))
	}
	return nil
}

// namespace finds a namespace in the watch cache, and in etcd when the
// cache has not seen it yet (it may have been created a moment ago).
func (s *Server) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	rs := s.serving().stores[api.Namespaces]
	if o, _ := s.serving().caches[api.Namespaces].get(rs.key("", name)); o != nil {
		return o.object().(*corev1.Namespace), nil
	}
	obj, err := rs.get(ctx, "", name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Namespace), nil
}

// admitDefaultTolerationSeconds is Kubernetes' DefaultTolerationSeconds: a
// new pod tolerates its node being not-ready or unreachable for the
// server's configured seconds, unless it says otherwise.
func (s *Server) admitDefaultTolerationSeconds(_ context.Context, a *attributes) error {
	pod, ok := a.obj.(*corev1.Pod)
	if a.op != opCreate || !ok {
		return nil
	}
	for _, taint := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		api.AddDefaultToleration(pod, taint, s.tolerations[taint])
	}
	return nil
}
