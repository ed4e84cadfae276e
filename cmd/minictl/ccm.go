package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/auth/user"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/cloud"
	"github.com/minictl/minictl/controllers"
)

// The cloud controller manager, alone (`minictl cloud-controller-manager`)
// or inside `up`: cloud-controller-manager's flags, its port 10258 and its
// own Lease, over the controllers' cloud table.

// DefaultCloudControllerManagerAddress is cloud-controller-manager's
// secure port, on loopback.
const DefaultCloudControllerManagerAddress = "127.0.0.1:10258"

// ccmFlags are up's flags for its cloud controller manager, which runs
// whenever up runs a cloud (--cloud-provider, cloud.go). Its other knobs
// follow the controller manager's (leader election, --cluster-cidr,
// --use-service-account-credentials), whose flags up already has.
type ccmFlags struct {
	// address is --cloud-controller-manager-address.
	address string
	// routePeriod is --route-reconciliation-period.
	routePeriod time.Duration
}

func (f *ccmFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.address, "cloud-controller-manager-address", DefaultCloudControllerManagerAddress, "where the cloud controller manager serves /healthz and /metrics (a free port if this default one is taken)")
	fs.DurationVar(&f.routePeriod, "route-reconciliation-period", 10*time.Second, "how often the route controller reconciles the cloud's routes with the nodes")
}

// cloudManagerConfig is the cloud controller manager's configuration in
// up: its defaults, with the controller manager's leader election, cluster
// CIDR and credentials; nodes get pod CIDRs there (the controller
// manager's nodeipam), so the cloud routes them.
func cloudManagerConfig(cf clusterFlags) controllers.Config {
	cfg := controllers.DefaultCloudConfig()
	km := cf.cm
	cfg.LeaderElect, cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = km.LeaderElect, km.LeaseDuration, km.RenewDeadline, km.RetryPeriod
	cfg.Timings.ClusterCIDR = km.Timings.ClusterCIDR
	cfg.Timings.NodeMonitorPeriod = km.Timings.NodeMonitorPeriod
	cfg.UseServiceAccountCredentials, cfg.ServiceAccountClient = km.UseServiceAccountCredentials, km.ServiceAccountClient
	cfg.Cloud.AllocateNodeCIDRs = true
	cfg.Cloud.RouteReconciliationPeriod = cf.ccm.routePeriod
	if cf.fast && !cf.set["route-reconciliation-period"] {
		cfg.Cloud.RouteReconciliationPeriod = time.Second
	}
	if cf.fast {
		cfg.Cloud.NodeStatusUpdateFrequency = 5 * time.Second
	}
	return cfg
}

// listenCloudControllerManager opens the cloud controller manager's port:
// address, or a free port beside it when that one is taken (another
// cluster, or a cloud-controller-manager of its own, may hold 10258).
func listenCloudControllerManager(address string, fallback bool, log *slog.Logger) (net.Listener, error) {
	if err := checkLoopback(address); err != nil {
		return nil, err
	}
	return listenFlag("cloud-controller-manager-address", address, fallback, log)
}

// takenNote says, for the banner, that address was taken when ln is
// elsewhere.
func takenNote(address string, ln net.Listener) string {
	_, want, err := net.SplitHostPort(address)
	if err != nil || want == "0" {
		return ""
	}
	if _, got, _ := net.SplitHostPort(ln.Addr().String()); got == want {
		return ""
	}
	return "; " + address + " was taken"
}

// startCloudControllerManager makes the provider and the cloud controller
// manager up runs, as user system:cloud-controller-manager; nothing runs
// until the returned functions are called.
func startCloudControllerManager(connect connector, cf clusterFlags, log *slog.Logger) (*controllers.Manager, error) {
	provider, err := cf.cloud.provider()
	if err != nil {
		return nil, err
	}
	rc, err := connect(user.CloudControllerManager)
	if err != nil {
		return nil, err
	}
	cfg := cloudManagerConfig(cf)
	cfg.Cloud.Provider = provider
	return controllers.NewCloudManager(rc, cfg, log)
}

// runCloudControllerManager is `minictl cloud-controller-manager`.
func runCloudControllerManager(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("cloud-controller-manager")
	resolve := bindClientConfig(fs)
	cfg := controllers.DefaultCloudConfig()
	goFlags(fs, cfg.BindCloudFlags)
	provider := fs.String("cloud-provider", "", "the cloud provider (sim); required")
	config := fs.String("cloud-config", "", "the cloud provider's configuration file (sim: YAML with the cloud's url)")
	addr := fs.String("address", DefaultCloudControllerManagerAddress, "where /healthz and /metrics are served")
	fast := fs.Bool("fast", false, "scale leader election and the controllers' periods down, as minictl up --fast does")
	var lf logFlags
	lf.bind(fs)
	if err := parseFlags(ctx, fs, args); err != nil {
		return err
	}
	if *provider == "" {
		return errors.New("--cloud-provider cannot be empty")
	}
	if *fast {
		set := setFlags(fs)
		fastControllerManager(&cfg, set)
		if !set["route-reconciliation-period"] {
			cfg.Cloud.RouteReconciliationPeriod = time.Second
		}
		if !set["node-status-update-frequency"] {
			cfg.Cloud.NodeStatusUpdateFrequency = 5 * time.Second
		}
	}
	log, err := lf.logger(stderr, nil)
	if err != nil {
		return err
	}
	if cfg.Cloud.Provider, err = cloud.New(*provider, *config); err != nil {
		return fmt.Errorf("--cloud-provider: %w", err)
	}
	ccfg, err := resolve()
	if err != nil {
		return err
	}
	rc, err := client.New(ccfg)
	if err != nil {
		return err
	}
	cfg.ServiceAccountClient = tokenClients(*ccfg)
	mgr, err := controllers.NewCloudManager(rc.WithUserAgent(apiserver.SystemUserAgent(user.CloudControllerManager)), cfg, log)
	if err != nil {
		return err
	}
	if err := checkLoopback(*addr); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cloud controller manager %s (cloud %s): /healthz and /metrics on http://%s\n", mgr.Identity(), *provider, ln.Addr())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return mgr.Serve(gctx, ln) })
	g.Go(func() error { return mgr.Run(gctx) })
	return g.Wait()
}
