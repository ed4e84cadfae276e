package controllers

import (
	"errors"
	"flag"
	"log/slog"
	"time"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/cloud"
	"github.com/minictl/minictl/controllers/cloudnode"
	"github.com/minictl/minictl/controllers/cloudnodelifecycle"
	"github.com/minictl/minictl/controllers/route"
	"github.com/minictl/minictl/controllers/service"
)

// The cloud controller manager is the controller manager's twin for the
// controllers that talk to a cloud (the seeds' "Service and Route through a
// cloud provider"): the same Manager, leader election, /healthz and
// /metrics, run over its own table of controllers, cloudControllers, under
// its own Lease (kube-system/cloud-controller-manager), with a
// cloud.Interface to ask. Its names, flags and defaults are
// cloud-controller-manager's.

// Cloud is the cloud controller manager's configuration beyond what every
// manager has, under cloud-controller-manager's flag names.
type Cloud struct {
	// Provider is the cloud the controllers ask (--cloud-provider and
	// --cloud-config, resolved by the caller with cloud.New).
	Provider cloud.Interface
	// ClusterName names this cluster's load balancers and routes in the
	// cloud (--cluster-name).
	ClusterName string
	// AllocateNodeCIDRs says nodes get pod CIDRs in this cluster, and
	// ConfigureCloudRoutes that the cloud should route them: the route
	// controller runs only when both are set, as in kube
	// (--allocate-node-cidrs, --configure-cloud-routes).
	AllocateNodeCIDRs    bool
	ConfigureCloudRoutes bool
	// RouteReconciliationPeriod is how often the route controller
	// compares the cloud's routes with the nodes' pod CIDRs
	// (--route-reconciliation-period).
	RouteReconciliationPeriod time.Duration
	// NodeStatusUpdateFrequency is how often the cloud-node controller
	// refreshes initialized nodes' addresses from the cloud
	// (--node-status-update-frequency).
	NodeStatusUpdateFrequency time.Duration
}

// DefaultCloudConfig is cloud-controller-manager's defaults.
func DefaultCloudConfig() Config {
	c := DefaultConfig()
	c.LeaseName = "cloud-controller-manager"
	c.Cloud = Cloud{
		ClusterName:               cloud.DefaultClusterName,
		ConfigureCloudRoutes:      true,
		RouteReconciliationPeriod: 10 * time.Second,
		NodeStatusUpdateFrequency: 5 * time.Minute,
	}
	return c
}

// BindCloudFlags registers the cloud controller manager's flags on fs, with
// c's current values as defaults. --cloud-provider and --cloud-config are
// the caller's: it makes the provider from them.
func (c *Config) BindCloudFlags(fs *flag.FlagSet) {
	c.bindCommonFlags(fs, cloudControllers)
	cl := &c.Cloud
	fs.StringVar(&cl.ClusterName, "cluster-name", cl.ClusterName, "the name of this cluster in the cloud: its load balancers and routes carry it")
	fs.BoolVar(&cl.AllocateNodeCIDRs, "allocate-node-cidrs", cl.AllocateNodeCIDRs, "nodes have pod CIDRs (allocated by the controller manager's nodeipam); with --configure-cloud-routes, the route controller routes them")
	fs.BoolVar(&cl.ConfigureCloudRoutes, "configure-cloud-routes", cl.ConfigureCloudRoutes, "create a cloud route for every node's pod CIDR (with --allocate-node-cidrs)")
	fs.DurationVar(&cl.RouteReconciliationPeriod, "route-reconciliation-period", cl.RouteReconciliationPeriod, "how often the route controller reconciles the cloud's routes with the nodes")
	fs.DurationVar(&cl.NodeStatusUpdateFrequency, "node-status-update-frequency", cl.NodeStatusUpdateFrequency, "how often the cloud-node controller refreshes nodes' addresses from the cloud")
	fs.DurationVar(&c.Timings.NodeMonitorPeriod, "node-monitor-period", c.Timings.NodeMonitorPeriod, "how often the cloud-node-lifecycle controller asks the cloud about not-ready nodes")
	fs.StringVar(&c.Timings.ClusterCIDR, "cluster-cidr", c.Timings.ClusterCIDR, "the range node pod CIDRs come from; routes outside it are not the route controller's")
	c.bindWorkerFlags(fs, cloudControllers)
}

// NewCloudManager checks cfg and prepares a cloud controller manager (the
// controllers of cloudControllers); nothing runs until Run.
func NewCloudManager(rc *client.RESTClient, cfg Config, log *slog.Logger) (*Manager, error) {
	return newManager(rc, cfg, log, "cloud-controller-manager", cloudControllers)
}

// KnownCloudControllers lists every cloud controller's name, sorted.
func KnownCloudControllers() []string { return names(cloudControllers) }

// cloudControllers is the cloud controller manager's table, wired like
// knownControllers. Names, workers and ServiceAccounts follow
// cloud-controller-manager's.
var cloudControllers = []descriptor{
	{
		// Both node controllers run as node-controller, kube's
		// ServiceAccount for them; a cloud without InstancesV2 has
		// nothing to tell them, and they do not run.
		name: cloudnode.Name, serviceAccount: "node-controller", defaultOn: true, workers: 1, workersFlag: "concurrent-node-syncs",
		build: func(cc *controllerContext) (runner, error) {
			if cc.Cloud.Provider == nil {
				return disabled(cc, cloudnode.Name, "there is no cloud provider")
			}
			c, err := cloudnode.New(cloudnode.Options{
				Common: cc.Common, Cloud: cc.Cloud.Provider,
				NodeStatusUpdateFrequency: cc.Cloud.NodeStatusUpdateFrequency,
			})
			if errors.Is(err, cloudnode.ErrNoInstances) {
				return disabled(cc, cloudnode.Name, err.Error())
			}
			if err != nil {
				return nil, err
			}
			return c, nil
		},
	},
	{
		name: cloudnodelifecycle.Name, serviceAccount: "node-controller", defaultOn: true, workers: 1,
		build: func(cc *controllerContext) (runner, error) {
			if cc.Cloud.Provider == nil {
				return disabled(cc, cloudnodelifecycle.Name, "there is no cloud provider")
			}
			c, err := cloudnodelifecycle.New(cloudnodelifecycle.Options{
				Common: cc.Common, Cloud: cc.Cloud.Provider,
				NodeMonitorPeriod: cc.Timings.NodeMonitorPeriod,
			})
			if errors.Is(err, cloudnodelifecycle.ErrNoInstances) {
				return disabled(cc, cloudnodelifecycle.Name, err.Error())
			}
			if err != nil {
				return nil, err
			}
			return c, nil
		},
	},
	{
		name: service.Name, serviceAccount: "service-controller", defaultOn: true, workers: 1, workersFlag: "concurrent-service-syncs",
		build: func(cc *controllerContext) (runner, error) {
			// Without load balancers kube's cloud controller manager says
			// so and runs the others.
			if cc.Cloud.Provider == nil {
				return disabled(cc, service.Name, "there is no cloud provider")
			}
			if _, ok := cc.Cloud.Provider.LoadBalancer(); !ok {
				return disabled(cc, service.Name, "the cloud provider does not support external load balancers")
			}
			return service.New(service.Options{Common: cc.Common, Cloud: cc.Cloud.Provider, ClusterName: cc.Cloud.ClusterName})
		},
	},
	{
		// kube's route controller runs only when nodes have pod CIDRs
		// and the cloud is to route them. Its workers are the cloud calls
		// it makes at once (kube's maxConcurrentRouteOperations, which
		// has no flag).
		name: route.Name, serviceAccount: "route-controller", defaultOn: true, workers: 200,
		component: "route_controller",
		build: func(cc *controllerContext) (runner, error) {
			cl := cc.Cloud
			if !cl.AllocateNodeCIDRs || !cl.ConfigureCloudRoutes {
				return disabled(cc, route.Name, "--allocate-node-cidrs or --configure-cloud-routes is false")
			}
			if cl.Provider == nil {
				return disabled(cc, route.Name, "there is no cloud provider")
			}
			if _, ok := cl.Provider.Routes(); !ok {
				return disabled(cc, route.Name, "the cloud provider does not support routes")
			}
			return route.New(route.Options{
				Common: cc.Common, Cloud: cl.Provider, ClusterName: cl.ClusterName,
				ClusterCIDRs: cc.Timings.ClusterCIDR, Period: cl.RouteReconciliationPeriod,
			})
		},
	},
}
