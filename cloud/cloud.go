// Package cloud is the interface between the cloud controllers and a cloud
// provider, shaped like k8s.io/cloud-provider's: the cloud controller
// manager (controllers, NewCloudManager) never talks to a cloud's API
// itself, it asks a provider for load balancers, routes and what it knows
// of a node's machine, and any cloud that answers these questions can run
// under it. minictl's own provider is the simulated cloud (cloud/sim),
// which answers them over the simulated cloud's HTTP API.
//
// The interface keeps the parts of kube's that a cloud controller calls
// today: LoadBalancer, Routes, InstancesV2 and Zones. Instances (the
// older, name-based form of InstancesV2) and Clusters are left out: no
// controller of kube's current cloud controller manager needs them when a
// provider has InstancesV2.
package cloud

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Interface is a cloud provider. Each accessor reports whether the cloud
// supports that part; a controller whose part is unsupported does not run.
type Interface interface {
	LoadBalancer() (LoadBalancer, bool)
	InstancesV2() (InstancesV2, bool)
	Zones() (Zones, bool)
	Routes() (Routes, bool)
	// ProviderName is the provider's name: the scheme of its nodes'
	// spec.providerID (sim://<zone>/<name>) and the --cloud-provider value
	// that selects it.
	ProviderName() string
}

// LoadBalancer is a cloud's load balancers for Services of type
// LoadBalancer. Implementations treat the Service and Nodes they are given
// as read-only.
type LoadBalancer interface {
	// GetLoadBalancer reports whether the Service's load balancer exists,
	// and if so its status.
	GetLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service) (status *corev1.LoadBalancerStatus, exists bool, err error)
	// GetLoadBalancerName is the name the cloud knows the Service's load
	// balancer by.
	GetLoadBalancerName(ctx context.Context, clusterName string, svc *corev1.Service) string
	// EnsureLoadBalancer creates the Service's load balancer or brings it
	// up to date: one listener per Service port, forwarding to the port's
	// nodePort on each of nodes. It returns the status to publish in the
	// Service's status.loadBalancer.
	EnsureLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error)
	// UpdateLoadBalancer changes only the backends of an existing load
	// balancer to nodes.
	UpdateLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error
	// EnsureLoadBalancerDeleted deletes the Service's load balancer; one
	// that does not exist is already deleted (nil).
	EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *corev1.Service) error
}

// InstancesV2 is what a cloud knows of the machine behind a Node. A
// provider finds the machine by node.Spec.ProviderID first, and by the
// node's name when the node has none yet.
type InstancesV2 interface {
	// InstanceExists reports whether the node's machine exists. A stopped
	// machine exists; false with no error means it is gone for good, and
	// the cloud-node-lifecycle controller deletes the Node.
	InstanceExists(ctx context.Context, node *corev1.Node) (bool, error)
	// InstanceShutdown reports whether the node's machine is shut down.
	InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error)
	// InstanceMetadata is what the cloud-node controller writes into a new
	// Node: its provider ID, type, addresses, zone and region.
	InstanceMetadata(ctx context.Context, node *corev1.Node) (*InstanceMetadata, error)
}

// InstanceMetadata describes one machine.
type InstanceMetadata struct {
	// ProviderID is the machine's ID in the provider's form,
	// <provider>://<...>; it becomes the Node's spec.providerID.
	ProviderID string
	// InstanceType becomes the node.kubernetes.io/instance-type label.
	InstanceType string
	// NodeAddresses become the Node's status.addresses.
	NodeAddresses []corev1.NodeAddress
	// Zone and Region become the topology.kubernetes.io/zone and
	// topology.kubernetes.io/region labels.
	Zone   string
	Region string
}

// Zones tells where a machine is. Kube has deprecated it in favour of
// InstancesV2's metadata; it remains for providers and callers that know
// only a provider ID or a node name.
type Zones interface {
	GetZoneByProviderID(ctx context.Context, providerID string) (Zone, error)
	GetZoneByNodeName(ctx context.Context, nodeName types.NodeName) (Zone, error)
}

// Zone is the location of a machine.
type Zone struct {
	FailureDomain string // the zone
	Region        string
}

// Route sends a node's pod CIDR to the node's machine.
type Route struct {
	// Name is the cloud's name for the route; Create ignores it (the
	// cloud may use the name hint instead).
	Name string
	// TargetNode is the Node whose machine the route leads to.
	TargetNode types.NodeName
	// DestinationCIDR is the node's pod CIDR.
	DestinationCIDR string
	// Blackhole is set on a route whose target machine is gone; the route
	// controller deletes such routes.
	Blackhole bool
}

// Routes is a cloud's route table, the routes of one cluster in it.
type Routes interface {
	ListRoutes(ctx context.Context, clusterName string) ([]*Route, error)
	CreateRoute(ctx context.Context, clusterName string, nameHint string, route *Route) error
	DeleteRoute(ctx context.Context, clusterName string, route *Route) error
}

// Errors a provider returns, under kube's meanings.
var (
	// InstanceNotFound: the machine does not exist (a stopped one does).
	InstanceNotFound = errors.New("instance not found")
	// NotImplemented: the provider does not do this.
	NotImplemented = errors.New("unimplemented")
)

// DefaultClusterName is the cloud controller manager's --cluster-name
// default, which names the cluster's routes and load balancers in the
// cloud.
const DefaultClusterName = "kubernetes"

// ProviderFactory makes a provider from its --cloud-config file ("" when
// none is given).
type ProviderFactory func(configFile string) (Interface, error)

var providers = map[string]ProviderFactory{}

// Register makes a provider available under name to New. Providers
// register themselves in an init function; registering a name twice is a
// programming error.
func Register(name string, f ProviderFactory) {
	if _, dup := providers[name]; dup {
		panic("cloud provider " + name + " registered twice")
	}
	providers[name] = f
}

// New is the provider --cloud-provider=name selects, made from its
// --cloud-config file.
func New(name, configFile string) (Interface, error) {
	f, ok := providers[name]
	if !ok {
		return nil, &UnknownProviderError{Name: name}
	}
	return f(configFile)
}

// UnknownProviderError is New's error for a name no provider registered.
type UnknownProviderError struct{ Name string }

func (e *UnknownProviderError) Error() string {
	return "unknown cloud provider \"" + e.Name + "\""
}
