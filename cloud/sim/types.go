package sim

import "time"

// Instance states.
const (
	StateRunning = "running"
	StateStopped = "stopped"
)

// Instance is one machine. Its addresses are records: nothing is ever
// sent to them.
type Instance struct {
	// ID is the cloud's name for the machine (i-00000001), assigned at
	// creation.
	ID string `json:"id"`
	// Name is unique in the cloud: a node's machine is named for the node.
	Name string `json:"name"`
	// ProviderID is sim://<zone>/<name>, what a Node's spec.providerID
	// holds.
	ProviderID   string    `json:"providerID"`
	Zone         string    `json:"zone"`
	Region       string    `json:"region"`
	InstanceType string    `json:"instanceType"`
	Addresses    []Address `json:"addresses"`
	// State is running or stopped.
	State     string    `json:"state"`
	CreatedAt time.Time `json:"createdAt"`
}

// Address is one of an instance's addresses; Type is a Node address type
// (InternalIP, ExternalIP, Hostname, InternalDNS, ExternalDNS).
type Address struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// InstanceSpec is what POST /v1/instances takes. Zone, Region and
// InstanceType default to DefaultZone, DefaultRegion and
// DefaultInstanceType.
type InstanceSpec struct {
	Name         string    `json:"name"`
	Zone         string    `json:"zone,omitempty"`
	Region       string    `json:"region,omitempty"`
	InstanceType string    `json:"instanceType,omitempty"`
	Addresses    []Address `json:"addresses,omitempty"`
}

// LoadBalancer is one load balancer: an IP from the cloud's pool that
// forwards each listener's port to its nodePort on every backend. Tags say
// whose it is (the cluster, and the Service or Ingress it serves).
type LoadBalancer struct {
	Name      string            `json:"name"`
	IP        string            `json:"ip"`
	Listeners []Listener        `json:"listeners"`
	Backends  []string          `json:"backends"`
	Tags      map[string]string `json:"tags,omitempty"`
	CreatedAt time.Time         `json:"createdAt"`
	UpdatedAt time.Time         `json:"updatedAt"`
}

// Listener forwards Protocol traffic on Port to NodePort on the backends.
type Listener struct {
	Protocol string `json:"protocol"`
	Port     int32  `json:"port"`
	NodePort int32  `json:"nodePort"`
}

// LoadBalancerSpec is what PUT /v1/loadbalancers/{name} takes. Backends
// are instance names. IP asks for a particular address of the pool; empty
// keeps the one the load balancer has, or allocates one.
type LoadBalancerSpec struct {
	IP        string            `json:"ip,omitempty"`
	Listeners []Listener        `json:"listeners"`
	Backends  []string          `json:"backends"`
	Tags      map[string]string `json:"tags,omitempty"`
}

// Route sends DestinationCIDR to the instance Target. Blackhole is set
// when that instance is gone: the route leads nowhere.
type Route struct {
	Name            string            `json:"name"`
	DestinationCIDR string            `json:"destinationCIDR"`
	Target          string            `json:"target"`
	TargetID        string            `json:"targetID"`
	Blackhole       bool              `json:"blackhole"`
	Tags            map[string]string `json:"tags,omitempty"`
	CreatedAt       time.Time         `json:"createdAt"`
}

// RouteSpec is what PUT /v1/routes/{name} takes; Target is an instance
// name.
type RouteSpec struct {
	DestinationCIDR string            `json:"destinationCIDR"`
	Target          string            `json:"target"`
	Tags            map[string]string `json:"tags,omitempty"`
}

// Fault modes.
const (
	FaultNone        = "none"
	FaultUnavailable = "unavailable"
	FaultSlow        = "slow"
)

// Faults is the fault switch: for Duration from when it was set, every
// call but /healthz and /v1/faults answers 503 (unavailable) or answers
// only after Delay (slow).
type Faults struct {
	Mode     string `json:"mode"`
	Duration string `json:"duration,omitempty"`
	Delay    string `json:"delay,omitempty"`
	// Until is when the fault ends (read only).
	Until *time.Time `json:"until,omitempty"`
}

// Tags the Provider puts on what it creates, so that a reader of the
// cloud sees whose each load balancer and route is.
const (
	TagCluster    = "kubernetes.io/cluster-name"
	TagService    = "kubernetes.io/service-name"
	TagServiceUID = "kubernetes.io/service-uid"
	// TagIngress is for load balancers that serve an Ingress
	// (namespace/name).
	TagIngress = "kubernetes.io/ingress-name"
)

// What an instance gets when its spec leaves it out.
const (
	DefaultRegion       = "sim"
	DefaultZone         = "sim-a"
	DefaultInstanceType = "sim.small"
)

// InstanceTypes are the machine types the cloud offers.
var InstanceTypes = []string{"sim.small", "sim.medium", "sim.large"}
