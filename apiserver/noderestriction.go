package apiserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/auth/node"
	"github.com/minictl/minictl/auth/user"
)

// NodeRestriction is kube's admission plugin of that name: it narrows
// what the Node authorizer lets every kubelet write to what concerns its
// own node. A kubelet may write only its own Node (and neither its taints
// nor labels outside the set kubelets may set), only its own Lease in
// kube-node-lease, only the status of pods bound to it, delete and evict
// only pods bound to it, and create only mirror pods bound to itself
// that reference nothing. It is off unless Config.EnableAdmissionPlugins
// names it, as in kube-apiserver.

// admitNodeRestriction is the plugin's step in the admission chain.
func (s *Server) admitNodeRestriction(ctx context.Context, a *attributes) error {
	if !s.nodeRestriction {
		return nil
	}
	nodeName, err := requestingNode(ctx)
	if nodeName == "" {
		return err
	}
	if err != nil {
		return nodeForbidden(a, err)
	}
	switch a.res {
	case api.Pods:
		switch a.subresource {
		case "":
			return admitNodePod(nodeName, a)
		case "status":
			return admitNodePodStatus(nodeName, a)
		}
		return nodeForbidden(a, fmt.Errorf("unexpected pod subresource %q, only 'status' and 'eviction' are allowed", a.subresource))
	case api.Nodes:
		return admitNodeNode(nodeName, a)
	case api.Leases:
		return admitNodeLease(nodeName, a)
	}
	return nil
}

// requestingNode is the node of the kubelet making the request: "" and
// no error for anyone else, "" and an error for a member of system:nodes
// whose node cannot be told.
func requestingNode(ctx context.Context) (string, error) {
	u, _ := user.From(ctx)
	name, isNode := node.Identity(u)
	if !isNode {
		return "", nil
	}
	if name == "" {
		return "", fmt.Errorf("could not determine node from user %q", u.Name)
	}
	return name, nil
}

// nodeForbidden is kube's admission.NewForbidden: `pods "web" is forbidden: <why>`.
func nodeForbidden(a *attributes, err error) error {
	name := a.name
	if name == "" && a.obj != nil {
		name = a.obj.GetName()
	}
	return apierrors.NewForbidden(a.res.GroupResource(), name, err)
}

func admitNodePod(nodeName string, a *attributes) error {
	switch a.op {
	case opCreate:
		return admitNodeMirrorPod(nodeName, a)
	case opDelete:
		if pod, ok := a.old.(*corev1.Pod); !ok || pod.Spec.NodeName != nodeName {
			return nodeForbidden(a, fmt.Errorf("node %q can only delete pods with spec.nodeName set to itself", nodeName))
		}
		return nil
	}
	return nodeForbidden(a, fmt.Errorf("unexpected operation %q, node %q can only create and delete mirror pods", a.op, nodeName))
}

// admitNodeMirrorPod lets a kubelet create the mirror pod of a static pod
// it runs: bound to itself, owned by its Node, referencing no other
// object it could not read otherwise.
func admitNodeMirrorPod(nodeName string, a *attributes) error {
	pod, ok := a.obj.(*corev1.Pod)
	if !ok {
		return nodeForbidden(a, fmt.Errorf("unexpected type %T", a.obj))
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; !mirror {
		return nodeForbidden(a, fmt.Errorf("pod does not have %q annotation, node %q can only create mirror pods", corev1.MirrorPodAnnotationKey, nodeName))
	}
	if pod.Spec.NodeName != nodeName {
		return nodeForbidden(a, fmt.Errorf("node %q can only create pods with spec.nodeName set to itself", nodeName))
	}
	switch refs := pod.OwnerReferences; {
	case len(refs) > 1:
		return nodeForbidden(a, fmt.Errorf("node %q can only create pods with a single owner reference set to itself", nodeName))
	case len(refs) == 0 || refs[0].APIVersion != "v1" || refs[0].Kind != "Node" || refs[0].Name != nodeName:
		return nodeForbidden(a, fmt.Errorf("node %q can only create pods with an owner reference set to itself", nodeName))
	case refs[0].Controller == nil || !*refs[0].Controller:
		return nodeForbidden(a, fmt.Errorf("node %q can only create pods with a controller owner reference set to itself", nodeName))
	case refs[0].BlockOwnerDeletion != nil && *refs[0].BlockOwnerDeletion:
		return nodeForbidden(a, fmt.Errorf("node %q must not set blockOwnerDeletion on an owner reference", nodeName))
	}
	// The service account is a default of the Pod kind here (see
	// admissionChain): only one the pod names itself, other than the
	// default one, is a reference the kubelet made.
	if sa := pod.Spec.ServiceAccountName; sa != "" && sa != "default" {
		return nodeForbidden(a, fmt.Errorf("node %q can not create pods that reference a service account", nodeName))
	}
	for _, want := range []struct {
		kind node.Kind
		what string
	}{{node.Secret, "secrets"}, {node.ConfigMap, "configmaps"}, {node.PersistentVolumeClaim, "persistentvolumeclaims"}} {
		if slices.ContainsFunc(node.References(pod), func(r node.Ref) bool { return r.Kind == want.kind }) {
			return nodeForbidden(a, fmt.Errorf("node %q can not create pods that reference %s", nodeName, want.what))
		}
	}
	return nil
}

func admitNodePodStatus(nodeName string, a *attributes) error {
	if a.op != opUpdate {
		return nodeForbidden(a, fmt.Errorf("unexpected operation %q", a.op))
	}
	old, ok := a.old.(*corev1.Pod)
	if !ok {
		return nodeForbidden(a, fmt.Errorf("unexpected type %T", a.old))
	}
	if old.Spec.NodeName != nodeName {
		return nodeForbidden(a, fmt.Errorf("node %q can only update pod status for pods with spec.nodeName set to itself", nodeName))
	}
	pod, ok := a.obj.(*corev1.Pod)
	if !ok {
		return nodeForbidden(a, fmt.Errorf("unexpected type %T", a.obj))
	}
	if !labels.Equals(old.Labels, pod.Labels) {
		return nodeForbidden(a, fmt.Errorf("node %q cannot update labels through pod status", nodeName))
	}
	if !equality.Semantic.DeepEqual(old.Status.ResourceClaimStatuses, pod.Status.ResourceClaimStatuses) {
		return nodeForbidden(a, fmt.Errorf("node %q cannot update resource claim statues", nodeName))
	}
	return nil
}

// admitNodeEviction lets a kubelet evict only the pods bound to it: the
// eviction's create, which the eviction subresource admits before it
// looks at budgets or deletes anything. A pod that does not exist is
// NotFound, as the eviction would be.
func (s *Server) admitNodeEviction(ctx context.Context, namespace, name string) error {
	if !s.nodeRestriction {
		return nil
	}
	a := &attributes{op: opCreate, res: api.Pods, namespace: namespace, name: name, subresource: "eviction"}
	nodeName, err := requestingNode(ctx)
	if nodeName == "" {
		if err != nil {
			return nodeForbidden(a, err)
		}
		return nil
	}
	obj, err := s.serving().stores[api.Pods].get(ctx, namespace, name)
	if err != nil {
		return err
	}
	if obj.(*corev1.Pod).Spec.NodeName != nodeName {
		return nodeForbidden(a, fmt.Errorf("node %s can only evict pods with spec.nodeName set to itself", nodeName))
	}
	return nil
}

func admitNodeNode(nodeName string, a *attributes) error {
	if a.name != nodeName {
		return nodeForbidden(a, fmt.Errorf("node %q is not allowed to modify node %q", nodeName, a.name))
	}
	switch a.op {
	case opCreate:
		n, ok := a.obj.(*corev1.Node)
		if !ok {
			return nodeForbidden(a, fmt.Errorf("unexpected type %T", a.obj))
		}
		if n.Spec.ConfigSource != nil {
			return nodeForbidden(a, fmt.Errorf("node %q is not allowed to create pods with a non-nil configSource", nodeName))
		}
		if bad := forbiddenNodeLabels(n.Labels, nil); len(bad) > 0 {
			return nodeForbidden(a, fmt.Errorf("node %q is not allowed to set the following labels: %s", nodeName, strings.Join(bad, ", ")))
		}
	case opUpdate:
		n, ok := a.obj.(*corev1.Node)
		old, ok2 := a.old.(*corev1.Node)
		if !ok || !ok2 {
			return nodeForbidden(a, fmt.Errorf("unexpected type %T", a.obj))
		}
		if n.Spec.ConfigSource != nil && !equality.Semantic.DeepEqual(n.Spec.ConfigSource, old.Spec.ConfigSource) {
			return nodeForbidden(a, fmt.Errorf("node %q is not allowed to update configSource to a new non-nil configSource", nodeName))
		}
		if !equality.Semantic.DeepEqual(n.Spec.Taints, old.Spec.Taints) {
			return nodeForbidden(a, fmt.Errorf("node %q is not allowed to modify taints", nodeName))
		}
		if bad := forbiddenNodeLabels(n.Labels, old.Labels); len(bad) > 0 {
			return nodeForbidden(a, fmt.Errorf("is not allowed to modify labels: %s", strings.Join(bad, ", ")))
		}
	}
	return nil
}

// kubeletLabels are the kubernetes.io labels a kubelet may set on its
// Node, and kubeletLabelNamespaces the label prefixes it may use freely
// (kube's kubelet API IsKubeletLabel).
var (
	kubeletLabels = []string{
		corev1.LabelHostname, corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
		corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
		corev1.LabelInstanceType, corev1.LabelInstanceTypeStable,
		corev1.LabelOSStable, corev1.LabelArchStable,
		"beta.kubernetes.io/os", "beta.kubernetes.io/arch",
	}
	kubeletLabelNamespaces = []string{"kubelet.kubernetes.io", "node.kubernetes.io"}
)

// forbiddenNodeLabels are the labels added, removed or changed from old to
// now that a kubelet may not touch, sorted: those of the
// node-restriction.kubernetes.io prefix, which only an administrator sets
// so that workloads can trust them, and those of the kubernetes.io and
// k8s.io prefixes that are not kubelet labels.
func forbiddenNodeLabels(now, old map[string]string) []string {
	var bad []string
	for _, k := range modifiedLabels(now, old) {
		ns, _, _ := strings.Cut(k, "/")
		if !strings.Contains(k, "/") {
			ns = ""
		}
		if inDomain(ns, corev1.LabelNamespaceNodeRestriction) ||
			(inDomain(ns, "kubernetes.io") || inDomain(ns, "k8s.io")) && !isKubeletLabel(k, ns) {
			bad = append(bad, k)
		}
	}
	slices.Sort(bad)
	return bad
}

func modifiedLabels(a, b map[string]string) []string {
	var keys []string
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			keys = append(keys, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// inDomain reports whether the label prefix ns is domain or a subdomain
// of it.
func inDomain(ns, domain string) bool {
	return ns == domain || strings.HasSuffix(ns, "."+domain)
}

func isKubeletLabel(key, ns string) bool {
	return slices.Contains(kubeletLabels, key) ||
		slices.ContainsFunc(kubeletLabelNamespaces, func(d string) bool { return inDomain(ns, d) })
}

func admitNodeLease(nodeName string, a *attributes) error {
	if a.namespace != corev1.NamespaceNodeLease {
		return nodeForbidden(a, fmt.Errorf("can only access leases in the %q system namespace", corev1.NamespaceNodeLease))
	}
	name := a.name
	if a.op == opCreate {
		l, ok := a.obj.(*coordinationv1.Lease)
		if !ok {
			return nodeForbidden(a, fmt.Errorf("unexpected type %T", a.obj))
		}
		name = l.Name
	}
	if name != nodeName {
		return nodeForbidden(a, errors.New("can only access node lease with the same name as the requesting node"))
	}
	return nil
}
