// Package user is who a request comes from: kube's user.Info and the
// well-known users and groups of a cluster.
package user

import (
	"context"
	"slices"
)

// Info is an authenticated user: a name, an optional UID, the groups it is
// in and extra attributes an authenticator vouches for (a ServiceAccount
// token's pod name, for example).
type Info struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// InGroup reports whether u is in group.
func (u *Info) InGroup(group string) bool { return u != nil && slices.Contains(u.Groups, group) }

// Kubernetes' well-known users and groups.
const (
	// SystemPrivilegedGroup is allowed everything, whatever RBAC says.
	SystemPrivilegedGroup = "system:masters"
	NodesGroup            = "system:nodes"
	MonitoringGroup       = "system:monitoring"
	AllUnauthenticated    = "system:unauthenticated"
	AllAuthenticated      = "system:authenticated"

	Anonymous     = "system:anonymous"
	APIServerUser = "system:apiserver"

	KubeControllerManager = "system:kube-controller-manager"
	KubeScheduler         = "system:kube-scheduler"
	// CloudControllerManager is the cloud controller manager's user, as
	// cloud providers' manifests name it.
	CloudControllerManager = "system:cloud-controller-manager"

	// SimIngressController is the user minictl's simulated ingress
	// controller acts as, and the name of its ClusterRole and binding: a
	// third-party controller's own identity, outside system:.
	SimIngressController = "sim-ingress-controller"

	// ServiceAccountUsernamePrefix begins a ServiceAccount's user name:
	// system:serviceaccount:<namespace>:<name>.
	ServiceAccountUsernamePrefix = "system:serviceaccount:"
	// AllServiceAccountsGroup holds every ServiceAccount, and
	// ServiceAccountGroupPrefix + <namespace> those of one namespace.
	AllServiceAccountsGroup   = "system:serviceaccounts"
	ServiceAccountGroupPrefix = "system:serviceaccounts:"

	// NodeUserPrefix begins a kubelet's user name: system:node:<node>.
	NodeUserPrefix = "system:node:"
	// BootstrapGroup holds the users of bootstrap tokens, which may do
	// no more than ask for a kubelet's client certificate.
	BootstrapGroup      = "system:bootstrappers"
	BootstrapUserPrefix = "system:bootstrap:"

	// Admin is the user of minictl's admin kubeconfig and of every
	// request on the plain loopback listener, which is minictl's own
	// `kubectl proxy`.
	Admin = "minictl-admin"
)

// AdminInfo is the admin: minictl-admin in system:masters.
func AdminInfo() *Info {
	return &Info{Name: Admin, Groups: []string{SystemPrivilegedGroup, AllAuthenticated}}
}

// AnonymousInfo is a request that proved no identity.
func AnonymousInfo() *Info {
	return &Info{Name: Anonymous, Groups: []string{AllUnauthenticated}}
}

// ServiceAccountUsername is the user name of the ServiceAccount
// namespace/name.
func ServiceAccountUsername(namespace, name string) string {
	return ServiceAccountUsernamePrefix + namespace + ":" + name
}

// ServiceAccountGroups are the groups every ServiceAccount of namespace is in.
func ServiceAccountGroups(namespace string) []string {
	return []string{AllServiceAccountsGroup, ServiceAccountGroupPrefix + namespace, AllAuthenticated}
}

type contextKey struct{}

// WithUser returns ctx carrying u.
func WithUser(ctx context.Context, u *Info) context.Context {
	return context.WithValue(ctx, contextKey{}, u)
}

// From returns the user ctx carries.
func From(ctx context.Context) (*Info, bool) {
	u, ok := ctx.Value(contextKey{}).(*Info)
	return u, ok && u != nil
}
