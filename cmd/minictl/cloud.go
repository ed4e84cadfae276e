package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/minictl/minictl/auth/user"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/cloud"
	"github.com/minictl/minictl/cloud/sim"
	"github.com/minictl/minictl/controllers"
	"github.com/minictl/minictl/kubelet"
)

// defaultCloudListen is where the simulated cloud's API listens.
const defaultCloudListen = "127.0.0.1:8090"

// runCloud is `minictl cloud`: the simulated cloud alone, for a cloud
// controller manager or a cluster started elsewhere.
func runCloud(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("cloud")
	listen := fs.String("listen", defaultCloudListen, "loopback address of the simulated cloud's HTTP API")
	dataDir := fs.String("data-dir", "", "directory the cloud keeps its instances, load balancers and routes in (cloud.json); empty keeps them in memory only")
	pool := fs.String("lb-pool", sim.DefaultPool, "the IPv4 range load balancers' IPs come from")
	var lf logFlags
	lf.bind(fs)
	if err := parseFlags(ctx, fs, args); err != nil {
		return err
	}
	log, err := lf.logger(stderr, nil)
	if err != nil {
		return err
	}
	if err := cloudLoopback("--listen", *listen); err != nil {
		return err
	}
	c, err := sim.New(sim.Options{DataDir: *dataDir, Pool: *pool, Log: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("cloud listen: %w", err)
	}
	fmt.Fprintf(stdout, "simulated cloud on http://%s (try: curl http://%s/v1/instances)\n", ln.Addr(), ln.Addr())
	return c.Serve(ctx, ln)
}

// cloudLoopback refuses a cloud address other than loopback: the cloud's
// API has no authentication.
func cloudLoopback(flagName, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %s: %w", flagName, addr, err)
	}
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || strings.EqualFold(host, "localhost") {
		return nil
	}
	return fmt.Errorf("%s %s: the simulated cloud binds loopback addresses only (127.0.0.1, ::1, localhost): its API has no authentication", flagName, addr)
}

// cloudFlags are `up`'s flags for the cloud its nodes live in.
type cloudFlags struct {
	provider string
	listen   string
	zones    string
}

func (f *cloudFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.provider, "cloud-provider", sim.ProviderName, "the cloud the cluster runs on: \"sim\" runs the simulated cloud in this process and each node on one of its instances; \"\" runs no cloud")
	fs.StringVar(&f.listen, "cloud-listen", defaultCloudListen, "loopback address of the simulated cloud's HTTP API (a free port is used if this one is taken and the flag was not given)")
	fs.StringVar(&f.zones, "zones", "", "comma-separated zones the nodes are spread over, round-robin (node-1 in the first); with a cloud they are its instances' zones, without one the kubelets label their nodes topology.kubernetes.io/zone")
}

// upCloud is the simulated cloud `up` runs, and how its nodes use it.
type upCloud struct {
	c   *sim.Cloud
	ln  net.Listener
	url string
	// taken is the address asked for when it was taken and another was
	// used.
	taken string
	// initializesNodes says a cloud-node controller exists to initialize
	// the nodes, so kubelets register them tainted uninitialized.
	initializesNodes bool
}

// open starts nothing: it makes the cloud the flags ask for, with its
// listener bound (nil when there is no cloud).
func (f *cloudFlags) open(explicitListen bool, dataDir string, log *slog.Logger) (*upCloud, error) {
	switch f.provider {
	case "":
		return nil, nil
	case sim.ProviderName:
	default:
		if _, err := cloud.New(f.provider, ""); err != nil {
			return nil, fmt.Errorf("--cloud-provider: %w", err)
		}
		return nil, fmt.Errorf("--cloud-provider %q: up runs only the simulated cloud (\"sim\") or none (\"\")", f.provider)
	}
	if err := cloudLoopback("--cloud-listen", f.listen); err != nil {
		return nil, err
	}
	for _, z := range splitList(f.zones) {
		if msgs := validation.IsDNS1123Label(z); len(msgs) > 0 {
			return nil, fmt.Errorf("--zones: %q is not a zone the cloud can have: %s", z, strings.Join(msgs, "; "))
		}
	}
	u := &upCloud{initializesNodes: slices.Contains(controllers.KnownCloudControllers(), "cloud-node")}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil && !explicitListen {
		host, _, _ := net.SplitHostPort(f.listen)
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
		u.taken = f.listen
	}
	if err != nil {
		return nil, fmt.Errorf("cloud listen: %w", err)
	}
	opts := sim.Options{Log: log}
	if dataDir != "" {
		opts.DataDir = filepath.Join(dataDir, "cloud")
	}
	if u.c, err = sim.New(opts); err != nil {
		ln.Close()
		return nil, err
	}
	u.ln, u.url = ln, "http://"+ln.Addr().String()
	return u, nil
}

// provider is the "sim" provider over this cloud, at the address it
// really listens on: what up's cloud controller manager should be given,
// rather than a provider made from the default URL, which is another
// cloud's when the default port was taken.
func (u *upCloud) provider() (cloud.Interface, error) {
	c, err := sim.NewClient(u.url, sim.ClientOptions{})
	if err != nil {
		return nil, err
	}
	return sim.NewProvider(c), nil
}

// banner is the cloud's line in up's banner.
func (u *upCloud) banner() string {
	s := u.url + " (simulated: instances, load balancers, routes"
	if u.taken != "" {
		s += "; " + u.taken + " was taken"
	}
	return s + ")"
}

// zoneOf is node i's zone (counting from 1), round-robin over zones; ""
// when there are none.
func zoneOf(zones []string, i int) string {
	if len(zones) == 0 {
		return ""
	}
	return zones[(i-1)%len(zones)]
}

// runNode runs node i's kubelet. With a cloud, the node lives on an
// instance named for it, created before the kubelet first starts (or
// found again, kept from an earlier run), and the kubelet runs only
// while that instance does.
func runNode(ctx context.Context, rc *client.RESTClient, name string, i int, cf clusterFlags, log *slog.Logger) error {
	zone, address := zoneOf(splitList(cf.zones), i), nodeAddress(i)
	if cf.cloud == nil {
		return runKubelet(ctx, rc, name, cf, log, (&upCloud{}).kubeletOptions(zone, address))
	}
	id, err := cf.cloud.machine(name, zone, address)
	if err != nil {
		return err
	}
	return cf.cloud.c.RunMachine(ctx, id, func(ctx context.Context) error {
		return runKubelet(ctx, rc, name, cf, log, cf.cloud.kubeletOptions(zone, address))
	})
}

// machine is the ID of node name's instance, created when there is none.
func (u *upCloud) machine(name, zone, address string) (string, error) {
	for _, in := range u.c.Instances() {
		if in.Name == name {
			return in.ID, nil
		}
	}
	in, err := u.c.CreateInstance(sim.InstanceSpec{
		Name: name, Zone: zone,
		Addresses: []sim.Address{{Type: string(corev1.NodeInternalIP), Address: address}, {Type: string(corev1.NodeHostName), Address: name}},
	})
	var e *sim.Error
	if errors.As(err, &e) {
		return "", fmt.Errorf("node %s's machine: %s", name, e.Message)
	}
	return in.ID, err
}

// runMachines makes the cloud the source of machines, as a real cloud is:
// the --nodes nodes' instances are created (or found again), then every
// instance of the cloud runs a kubelet for as long as it runs, including
// instances created later through the cloud's API, which boot and join
// the cluster under their instance's name. A deleted instance's kubelet
// stops for good. Each kubelet gets its own client from connect, as its
// node's user, like the first nodes'.
//
// A kubelet that fails is logged and its machine left silent, rather than
// ending the cluster: a machine someone added by hand should not take the
// control plane down with it.
func runMachines(ctx context.Context, connect connector, cf clusterFlags, log *slog.Logger) error {
	u := cf.cloud
	zones := splitList(cf.zones)
	for i := 1; i <= cf.nodes; i++ {
		name := fmt.Sprintf("node-%d", i)
		if _, err := u.machine(name, zoneOf(zones, i), nodeAddress(i)); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	booted := map[string]bool{} // instance IDs, never reused by the cloud
	assigned := map[string]string{}
	for {
		changed := u.c.Changed()
		ins := u.c.Instances()
		for _, in := range ins {
			if booted[in.ID] {
				continue
			}
			booted[in.ID] = true
			address := internalIP(in)
			if address == "" {
				address = freeAddress(ins, assigned)
				assigned[in.ID] = address
			}
			rc, err := connect(user.NodeUserPrefix+in.Name, user.NodesGroup)
			if err != nil {
				return err
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := u.c.RunMachine(ctx, in.ID, func(ctx context.Context) error {
					return runKubelet(ctx, rc, in.Name, cf, log, u.kubeletOptions(in.Zone, address))
				}); err != nil {
					log.Error(fmt.Sprintf("machine %s (%s): its kubelet failed: %v", in.ID, in.Name, err), "instance", in.ID, "object", in.Name)
				}
			}()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// kubeletOptions are a machine's kubelet's: the machine's address and, when
// no cloud-node controller labels the node, its zone.
func (u *upCloud) kubeletOptions(zone, address string) func(*kubelet.Options) {
	return func(o *kubelet.Options) {
		o.Address = address
		o.ExternalCloudProvider = u.initializesNodes
		if zone != "" && !u.initializesNodes {
			o.Labels = map[string]string{corev1.LabelTopologyZone: zone}
		}
	}
}

// nodeAddress is node i's address (counting from 1), made explicit so
// that its machine agrees: 127.0.1.<i> for the first 255 nodes, as the
// kubelet would choose, then on through 127.0.2.0 and up, so that every
// node of a large cluster (5,000 nodes) has an InternalIP of its own.
func nodeAddress(i int) string {
	n := 1<<8 + i // past 127.0.0.0
	return fmt.Sprintf("127.%d.%d.%d", n>>16&0xff, n>>8&0xff, n&0xff)
}

// internalIP is the instance's first InternalIP address, "" if it has none.
func internalIP(in sim.Instance) string {
	for _, a := range in.Addresses {
		if a.Type == string(corev1.NodeInternalIP) {
			return a.Address
		}
	}
	return ""
}

// freeAddress is the first 127.0.1.<n> no instance has and none was given
// by up, so that a machine created without an address still has a node
// address of its own.
func freeAddress(ins []sim.Instance, assigned map[string]string) string {
	used := map[string]bool{}
	for _, in := range ins {
		used[internalIP(in)] = true
	}
	for _, a := range assigned {
		used[a] = true
	}
	for n := 1; n < 255; n++ {
		if a := nodeAddress(n); !used[a] {
			return a
		}
	}
	return nodeAddress(255)
}
