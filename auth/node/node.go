// Package node is kube's Node authorizer: what a kubelet, user
// system:node:<name> in group system:nodes, may read and write. The
// secrets, config maps, claims and service accounts it may reach are
// those of the pods bound to its node (the graph); for the rest every
// kubelet has the same rules (NodeRules), which the NodeRestriction
// admission plugin narrows to the kubelet's own Node, Lease and pods.
package node

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/minictl/minictl/auth/authorizer"
	"github.com/minictl/minictl/auth/user"
)

// Identity returns the node u is the kubelet of: a user named
// system:node:<name> in group system:nodes. isNode is false for anyone
// else; name is empty for a member of system:nodes named system:node:
// and nothing more, whom no node is known for.
func Identity(u *user.Info) (name string, isNode bool) {
	if u == nil || !strings.HasPrefix(u.Name, user.NodeUserPrefix) || !u.InGroup(user.NodesGroup) {
		return "", false
	}
	return strings.TrimPrefix(u.Name, user.NodeUserPrefix), true
}

// Authorizer is the Node authorization mode. It has no opinion on
// anyone but kubelets.
type Authorizer struct {
	graph Graph
	rules []rbacv1.PolicyRule
}

// New returns the Node authorizer deciding by graph and NodeRules.
func New(graph Graph) *Authorizer {
	return &Authorizer{graph: graph, rules: NodeRules()}
}

// Authorize decides a kubelet's request.
func (z *Authorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	node, isNode := Identity(a.User)
	if !isNode {
		return authorizer.NoOpinion, "", nil
	}
	if node == "" {
		return authorizer.NoOpinion, fmt.Sprintf("unknown node for user %q", a.User.Name), nil
	}
	if a.ResourceRequest {
		switch {
		case a.APIGroup == "" && a.Resource == "secrets":
			return z.readNamespaced(node, Secret, a)
		case a.APIGroup == "" && a.Resource == "configmaps":
			return z.readNamespaced(node, ConfigMap, a)
		case a.APIGroup == "" && a.Resource == "persistentvolumeclaims":
			if a.Subresource == "status" {
				return z.statusUpdate(node, PersistentVolumeClaim, a)
			}
			return z.get(node, PersistentVolumeClaim, a)
		case a.APIGroup == "" && a.Resource == "persistentvolumes":
			return z.get(node, PersistentVolume, a)
		case a.APIGroup == "storage.k8s.io" && a.Resource == "volumeattachments":
			return z.get(node, VolumeAttachment, a)
		case a.APIGroup == "" && a.Resource == "serviceaccounts":
			return z.createToken(node, a)
		case a.APIGroup == "coordination.k8s.io" && a.Resource == "leases":
			return z.lease(node, a)
		case a.APIGroup == "storage.k8s.io" && a.Resource == "csinodes":
			return z.csiNode(node, a)
		case a.APIGroup == "" && a.Resource == "nodes":
			return z.node(node, a)
		case a.APIGroup == "" && a.Resource == "pods":
			return z.pod(node, a)
		}
	}
	if rulesAllow(a, z.rules) {
		return authorizer.Allow, "", nil
	}
	return authorizer.NoOpinion, "", nil
}

// RulesFor says that a kubelet's rights cannot be listed: they depend on
// its pods. For anyone else the Node authorizer has none.
func (z *Authorizer) RulesFor(_ context.Context, u *user.Info, _ string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool, error) {
	if _, isNode := Identity(u); isNode {
		return nil, nil, true, errors.New("node authorizer does not support user rule resolution")
	}
	return nil, nil, false, nil
}

func (z *Authorizer) statusUpdate(node string, k Kind, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.Verb != "update" && a.Verb != "patch" {
		return authorizer.NoOpinion, "can only get/update/patch this type", nil
	}
	return z.related(node, k, a)
}

func (z *Authorizer) get(node string, k Kind, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.Verb != "get" {
		return authorizer.NoOpinion, "can only get individual resources of this type", nil
	}
	if a.Subresource != "" {
		return authorizer.NoOpinion, "cannot get subresource", nil
	}
	return z.related(node, k, a)
}

// readNamespaced allows get, and a list or watch of one object by name
// (fieldSelector metadata.name=x), of an object related to node.
func (z *Authorizer) readNamespaced(node string, k Kind, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.Verb {
	case "get", "list", "watch":
	default:
		return authorizer.NoOpinion, "can only read resources of this type", nil
	}
	if a.Subresource != "" {
		return authorizer.NoOpinion, "cannot read subresource", nil
	}
	if a.Namespace == "" {
		return authorizer.NoOpinion, "can only read namespaced object of this type", nil
	}
	return z.related(node, k, a)
}

func (z *Authorizer) related(node string, k Kind, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.Name == "" {
		return authorizer.NoOpinion, "No Object name found", nil
	}
	if !z.graph.HasPath(node, Ref{Kind: k, Namespace: a.Namespace, Name: a.Name}) {
		return authorizer.NoOpinion, noRelationship(node), nil
	}
	return authorizer.Allow, "", nil
}

func noRelationship(node string) string {
	return fmt.Sprintf("no relationship found between node '%s' and this object", node)
}

// createToken allows a token for a service account a pod of node runs as.
func (z *Authorizer) createToken(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.Verb != "create" || a.Name == "" {
		return authorizer.NoOpinion, "can only create tokens for individual service accounts", nil
	}
	if a.Subresource != "token" {
		return authorizer.NoOpinion, "can only create token subresource of serviceaccount", nil
	}
	return z.related(node, ServiceAccount, a)
}

// lease allows a kubelet its own Lease in kube-node-lease. A create names
// no lease in its path: NodeRestriction checks the name it brings.
func (z *Authorizer) lease(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return authorizer.NoOpinion, "can only get, create, update, patch, or delete a node lease", nil
	}
	if a.Namespace != corev1.NamespaceNodeLease {
		return authorizer.NoOpinion, fmt.Sprintf("can only access leases in the %q system namespace", corev1.NamespaceNodeLease), nil
	}
	if a.Verb != "create" && a.Name != node {
		return authorizer.NoOpinion, "can only access node lease with the same name as the requesting node", nil
	}
	return authorizer.Allow, "", nil
}

func (z *Authorizer) csiNode(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return authorizer.NoOpinion, "can only get, create, update, patch, or delete a CSINode", nil
	}
	if a.Subresource != "" {
		return authorizer.NoOpinion, "cannot authorize CSINode subresources", nil
	}
	if a.Verb != "create" && a.Name != node {
		return authorizer.NoOpinion, "can only access CSINode with the same name as the requesting node", nil
	}
	return authorizer.Allow, "", nil
}

// node allows a kubelet to read its own Node (by name, even before it
// exists) and to write Nodes, which NodeRestriction narrows to its own.
func (z *Authorizer) node(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "create", "update", "patch":
			return authorizer.Allow, "", nil
		case "get", "list", "watch":
			switch a.Name {
			case node:
				return authorizer.Allow, "", nil
			case "":
				return authorizer.NoOpinion, fmt.Sprintf("node '%s' cannot read all nodes, only its own Node object", node), nil
			default:
				return authorizer.NoOpinion, fmt.Sprintf("node '%s' cannot read '%s', only its own Node object", node, a.Name), nil
			}
		}
	case "status":
		if a.Verb == "update" || a.Verb == "patch" {
			return authorizer.Allow, "", nil
		}
	}
	return authorizer.NoOpinion, "", nil
}

// pod allows a kubelet to get its pods, to list and watch them scoped to
// its node (fieldSelector spec.nodeName=<node>), and the writes a kubelet
// makes, which NodeRestriction narrows to its own pods.
func (z *Authorizer) pod(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "get":
			return z.get(node, Pod, a)
		case "list", "watch":
			if sel, err := fields.ParseSelector(a.FieldSelector); err == nil {
				if v, ok := sel.RequiresExactMatch("spec.nodeName"); ok && v == node {
					return authorizer.Allow, "", nil
				}
			}
			if a.Name != "" {
				return z.related(node, Pod, a)
			}
			return authorizer.NoOpinion, "can only list/watch pods with spec.nodeName field selector", nil
		case "create", "delete":
			return authorizer.Allow, "", nil
		}
	case "status":
		if a.Verb == "update" || a.Verb == "patch" {
			return authorizer.Allow, "", nil
		}
	case "eviction":
		if a.Verb == "create" {
			return authorizer.Allow, "", nil
		}
	}
	return authorizer.NoOpinion, "", nil
}
