package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/auth/pki"
	"github.com/minictl/minictl/auth/user"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/internal/timeline"
	"github.com/minictl/minictl/kubelet"
	"github.com/minictl/minictl/kubelet/bootstrap"
	"github.com/minictl/minictl/scheduler"
)

// clusterFlags are the knobs of everything `up` runs besides etcd and the
// API server, under their Kubernetes flag names.
type clusterFlags struct {
	runCM     bool
	cm        controllers.Config
	cmAddress string
	// cmFallback: --controller-manager-address was left at its default,
	// so a taken port falls back to a free one.
	cmFallback        bool
	nodes             int
	heartbeatInterval time.Duration
	statusInterval    time.Duration
	reportFrequency   time.Duration
	// kubeletPort is where each kubelet serves /containerLogs on its node
	// address: 0 (any free port) in up, --port alone.
	kubeletPort int
	// backOffBase and maxBackOff are the kubelets' container restart
	// back-off; 0 is a kubelet's (10s doubling to 5m).
	backOffBase, maxBackOff time.Duration
	// volumeMountTimeout is how long a kubelet's pod waits for its
	// volumes before a FailedMount event; bindTimeout how long the
	// scheduler waits for a pod's claims to bind. 0 is their default.
	volumeMountTimeout, bindTimeout time.Duration
	fast                            bool
	// set are the flags given on the command line.
	set map[string]bool
	// zones spread the nodes (--zones); cloud, when set, is the simulated
	// cloud the nodes live in (cloud.go).
	zones string
	cloud *upCloud
	// ccm is the cloud controller manager (ccm.go); ccmListener is its
	// port, which serve opens.
	ccm         ccmFlags
	ccmListener net.Listener
}

func (f *clusterFlags) bind(fs *pflag.FlagSet) {
	f.cm = controllers.DefaultConfig()
	goFlags(fs, f.cm.BindFlags)
	fs.BoolVar(&f.runCM, "controller-manager", true, "run the controller manager in this process (false: run it with minictl controller-manager, for example two of them to watch leader election)")
	fs.StringVar(&f.cmAddress, "controller-manager-address", "127.0.0.1:10257", "where the controller manager serves /healthz and /metrics (a free port if this default one is taken)")
	f.bindKubelet(fs)
	fs.IntVar(&f.nodes, "nodes", 3, "how many simulated nodes (kubelets) to run")
	f.ccm.bind(fs)
	fs.BoolVar(&f.fast, "fast", false, "scale every timing down (heartbeats, grace periods, leader election, tolerations, container restart back-off, metric resolution, the autoscaler's sync and downscale window) so a lesson's story plays out in seconds")
}

func (f *clusterFlags) bindKubelet(fs *pflag.FlagSet) {
	fs.DurationVar(&f.heartbeatInterval, "node-lease-renew-interval", kubelet.DefaultHeartbeatInterval, "how often each simulated kubelet renews its node Lease")
	fs.DurationVar(&f.statusInterval, "node-status-update-frequency", kubelet.DefaultStatusUpdateInterval, "how often each simulated kubelet computes its node status, and posts it if it changed")
	fs.DurationVar(&f.reportFrequency, "node-status-report-frequency", kubelet.DefaultNodeStatusReportFrequency, "how often each simulated kubelet posts its node status when nothing in it changed (the Lease tells that the node is alive); given --node-status-update-frequency alone, that, as kube's kubelet defaults it")
}

// kubeletDefaults is kube's kubelet's defaulting of the report frequency:
// a user who set only --node-status-update-frequency gets the status
// posted that often, changed or not, as before the report frequency was.
func (f *clusterFlags) kubeletDefaults(set map[string]bool) {
	if set["node-status-update-frequency"] && !set["node-status-report-frequency"] {
		f.reportFrequency = f.statusInterval
	}
}

// fastKubelet is --fast for the simulated kubelets: heartbeats every
// second, an unchanged status posted every 30s, and a restart back-off of
// 1s doubling to 10s.
func (f *clusterFlags) fastKubelet(set map[string]bool) {
	if !set["node-lease-renew-interval"] {
		f.heartbeatInterval = time.Second
	}
	if !set["node-status-update-frequency"] {
		f.statusInterval = time.Second
		if !set["node-status-report-frequency"] {
			f.reportFrequency = 30 * time.Second
		}
	}
	f.backOffBase, f.maxBackOff = time.Second, 10*time.Second
	f.volumeMountTimeout = 10 * time.Second
}

// applyFast scales every timing the user did not set explicitly down to
// the --fast values.
func (f *clusterFlags) applyFast(fs *pflag.FlagSet) {
	if !f.fast {
		return
	}
	set := setFlags(fs)
	fastControllerManager(&f.cm, set)
	f.fastKubelet(set)
	f.bindTimeout = 20 * time.Second
}

// fastControllerManager is --fast for the controller manager: leader
// election and the controllers' periods in seconds rather than minutes.
func fastControllerManager(cm *controllers.Config, set map[string]bool) {
	fast := func(name string, apply func()) {
		if !set[name] {
			apply()
		}
	}
	fast("leader-elect-lease-duration", func() { cm.LeaseDuration = 3 * time.Second })
	fast("leader-elect-renew-deadline", func() { cm.RenewDeadline = 2 * time.Second })
	fast("leader-elect-retry-period", func() { cm.RetryPeriod = 500 * time.Millisecond })
	fast("node-monitor-period", func() { cm.Timings.NodeMonitorPeriod = 500 * time.Millisecond })
	fast("node-monitor-grace-period", func() { cm.Timings.NodeMonitorGracePeriod = 5 * time.Second })
	fast("node-startup-grace-period", func() { cm.Timings.NodeStartupGracePeriod = 10 * time.Second })
	fast("node-eviction-rate", func() { cm.Timings.NodeEvictionRate = 1 })
	fast("horizontal-pod-autoscaler-sync-period", func() { cm.Timings.HPASyncPeriod = 2 * time.Second })
	fast("horizontal-pod-autoscaler-downscale-stabilization", func() { cm.Timings.HPADownscaleStabilization = 15 * time.Second })
	cm.Timings.PodGCPeriod = 2 * time.Second
	cm.Timings.PodGCQuarantine = 2 * time.Second
	cm.Timings.JobBackoffBase = time.Second // a failed Job's retries in seconds, not minutes
	cm.Timings.JobBackoffMax = 36 * time.Second
}

func setFlags(fs *pflag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(fl *pflag.Flag) { set[fl.Name] = true })
	return set
}

// runCluster runs the controller manager, the scheduler, the simulated
// kubelets and, with a cloud, the simulated ingress controller against the
// API until ctx ends, and waits for them. connect
// gives each its client, as the user it acts as.
func runCluster(ctx context.Context, connect connector, cf clusterFlags, cmListener net.Listener, log *slog.Logger, bus *timeline.Bus) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var made madeClients
	defer made.closeIdle() // after every component has stopped
	connect = made.connector(connect)
	if cf.cm.ServiceAccountClient != nil {
		cf.cm.ServiceAccountClient = made.tokenClients(cf.cm.ServiceAccountClient)
	}
	cmClient, err := connect(user.KubeControllerManager)
	if err != nil {
		return err
	}
	schedClient, err := connect(user.KubeScheduler)
	if err != nil {
		return err
	}
	cf.cm.Trace, cf.cm.TraceActive = stageTracer(bus, "controller-manager"), bus.Active
	mgr, err := controllers.NewManager(cmClient, cf.cm, log)
	if err != nil {
		return err
	}
	ln := cmListener
	var wg sync.WaitGroup
	errc := make(chan error, 6+cf.nodes)
	run := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	if cf.runCM {
		run("controller-manager", func() error { return mgr.Run(ctx) })
		run("controller-manager server", func() error { return mgr.Serve(ctx, ln) })
	} else {
		ln.Close()
	}
	if cf.ccmListener != nil {
		ccm, err := startCloudControllerManager(connect, cf, log)
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		run("cloud-controller-manager", func() error { return ccm.Run(ctx) })
		run("cloud-controller-manager server", func() error { return ccm.Serve(ctx, cf.ccmListener) })
	}
	run("scheduler", func() error {
		return runScheduler(ctx, schedClient, log, stageTracer(bus, "scheduler"), bus.Active, cf.bindTimeout)
	})
	if cf.cloud != nil { // ingress.go: a third party's controller, which needs the cloud
		run("ingress-controller", func() error { return runIngressController(ctx, connect, cf.cloud.url, log) })
	}
	if cf.cloud != nil { // cloud.go: every instance of the cloud is a node
		run("machines", func() error { return runMachines(ctx, connect, cf, log) })
	}
	for i := 1; cf.cloud == nil && i <= cf.nodes; i++ {
		name := fmt.Sprintf("node-%d", i)
		rc, err := connect(user.NodeUserPrefix+name, user.NodesGroup)
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		run(name, func() error { return runNode(ctx, rc, name, i, cf, log) })
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case err := <-errc:
		cancel()
		<-done
		return err
	case <-done:
		return nil
	}
}

func runScheduler(ctx context.Context, rc *client.RESTClient, log *slog.Logger, trace informer.TraceFunc, traceActive func() bool, bindTimeout time.Duration) error {
	log = log.With("component", "scheduler")
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{Logger: log, Trace: trace, TraceActive: traceActive, Transform: informer.Lean})
	defer factory.Shutdown()
	rec := record.NewRecorder(rc, record.Options{Component: "default-scheduler", Logger: log})
	s, err := scheduler.New(scheduler.Options{Client: rc, Informers: factory, Recorder: rec, Logger: log, BindTimeout: bindTimeout})
	if err != nil {
		return err
	}
	return runWithRecorder(ctx, rec, func() error {
		factory.Start(ctx)
		return s.Run(ctx, scheduler.DefaultWorkers)
	})
}

// runWithRecorder runs f with rec writing Events beside it, and returns
// only when both have stopped.
func runWithRecorder(ctx context.Context, rec *record.Recorder, f func() error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec.Run(ctx)
	}()
	err := f()
	cancel()
	<-done
	return err
}

func runKubelet(ctx context.Context, rc *client.RESTClient, name string, cf clusterFlags, log *slog.Logger, adjust ...func(*kubelet.Options)) error {
	log = log.With("component", "kubelet")
	rec := record.NewRecorder(rc, record.Options{Component: "kubelet", Host: name, Logger: log})
	opts := kubelet.Options{
		Client: rc, NodeName: name, Recorder: rec, Logger: log,
		HeartbeatInterval: cf.heartbeatInterval, StatusUpdateInterval: cf.statusInterval,
		NodeStatusReportFrequency: cf.reportFrequency,
		Port:                      cf.kubeletPort,
		BackOffBase:               cf.backOffBase, MaxBackOff: cf.maxBackOff, VolumeMountTimeout: cf.volumeMountTimeout,
	}
	for _, f := range adjust {
		f(&opts)
	}
	k, err := kubelet.New(opts)
	if err != nil {
		return err
	}
	return runWithRecorder(ctx, rec, func() error { return k.Run(ctx) })
}

// connector gives a component its client to the API server, acting as
// user in groups.
type connector func(user string, groups ...string) (*client.RESTClient, error)

// madeClients are the clients made for the cluster's components. Once
// the components have stopped, closeIdle closes their connections: an
// idle HTTP/2 connection left open holds the API server's stop for a
// second, until its server gives up on it after its GOAWAY.
type madeClients struct {
	mu      sync.Mutex
	clients []*client.RESTClient
}

func (m *madeClients) add(rc *client.RESTClient, err error) (*client.RESTClient, error) {
	if err == nil {
		m.mu.Lock()
		m.clients = append(m.clients, rc)
		m.mu.Unlock()
	}
	return rc, err
}

// connector is connect, remembering what it makes.
func (m *madeClients) connector(connect connector) connector {
	return func(user string, groups ...string) (*client.RESTClient, error) {
		return m.add(connect(user, groups...))
	}
}

// tokenClients is newClient, remembering what it makes.
func (m *madeClients) tokenClients(newClient func(client.TokenSource) (*client.RESTClient, error)) func(client.TokenSource) (*client.RESTClient, error) {
	return func(tokens client.TokenSource) (*client.RESTClient, error) { return m.add(newClient(tokens)) }
}

func (m *madeClients) closeIdle() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rc := range m.clients {
		rc.CloseIdleConnections()
	}
}

// proxyConnector reaches the plain loopback listener at server: one
// client, whose connections every component shares, each naming in its
// User-Agent the user it acts for (which gives its requests their
// priority level in the API server).
func proxyConnector(server string) (connector, error) {
	rc, err := client.New(&client.Config{Server: server})
	if err != nil {
		return nil, err
	}
	return func(name string, _ ...string) (*client.RESTClient, error) { return asUser(rc, name), nil }, nil
}

// certConnector reaches the secure port at server with a client
// certificate for each user, issued by ca at start, and verifies the
// server with the same CA.
func certConnector(server string, ca *pki.CA) connector {
	return func(name string, groups ...string) (*client.RESTClient, error) {
		certPEM, keyPEM, err := ca.Issue(pki.CertRequest{CommonName: name, Organization: groups})
		if err != nil {
			return nil, err
		}
		return client.New(&client.Config{Server: server, CAData: ca.CertPEM, CertData: certPEM, KeyData: keyPEM})
	}
}

// tokenClients makes clients of the server base names that carry a
// ServiceAccount's token and no other credential: the controllers' own,
// with --use-service-account-credentials.
func tokenClients(base client.Config) func(client.TokenSource) (*client.RESTClient, error) {
	return func(tokens client.TokenSource) (*client.RESTClient, error) {
		cfg := base
		cfg.CertFile, cfg.KeyFile, cfg.CertData, cfg.KeyData, cfg.BearerToken = "", "", nil, nil, ""
		cfg.TokenSource = tokens
		return client.New(&cfg)
	}
}

// asUser is rc naming, in its User-Agent, the system user a component acts
// as: until requests are authenticated, that is how the API server tells
// the system's own requests from its users' and keeps seats for them.
func asUser(rc *client.RESTClient, user string) *client.RESTClient {
	return rc.WithUserAgent(apiserver.SystemUserAgent(user))
}

// clientFlags are the flags of the components that reach a running API
// server: --server, --kubeconfig, ...
func bindClient(fs *pflag.FlagSet) func() (*client.RESTClient, error) {
	resolve := bindClientConfig(fs)
	return func() (*client.RESTClient, error) {
		cfg, err := resolve()
		if err != nil {
			return nil, err
		}
		return client.New(cfg)
	}
}

func runControllerManager(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("controller-manager")
	resolve := bindClientConfig(fs)
	cfg := controllers.DefaultConfig()
	goFlags(fs, cfg.BindFlags)
	addr := fs.String("address", "127.0.0.1:10257", "where /healthz and /metrics are served")
	fast := fs.Bool("fast", false, "scale leader election and the controllers' periods down, as minictl up --fast does")
	var lf logFlags
	lf.bind(fs)
	if err := parseFlags(ctx, fs, args); err != nil {
		return err
	}
	if *fast {
		fastControllerManager(&cfg, setFlags(fs))
	}
	log, err := lf.logger(stderr, nil)
	if err != nil {
		return err
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
	mgr, err := controllers.NewManager(asUser(rc, apiserver.UserKubeControllerManager), cfg, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "controller manager %s: /healthz and /metrics on http://%s\n", mgr.Identity(), ln.Addr())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return mgr.Serve(gctx, ln) })
	g.Go(func() error { return mgr.Run(gctx) })
	return g.Wait()
}

func runSchedulerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("scheduler")
	newClient := bindClient(fs)
	var lf logFlags
	lf.bind(fs)
	if err := parseFlags(ctx, fs, args); err != nil {
		return err
	}
	log, err := lf.logger(stderr, nil)
	if err != nil {
		return err
	}
	rc, err := newClient()
	if err != nil {
		return err
	}
	return runScheduler(ctx, asUser(rc, apiserver.UserKubeScheduler), log, nil, nil, 0)
}

func runKubeletCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("kubelet")
	newClient := bindClient(fs)
	var cf clusterFlags
	cf.bindKubelet(fs)
	name := fs.String("name", "", "the node's name (required)")
	fs.IntVar(&cf.kubeletPort, "port", kubelet.DefaultPort, "the port the kubelet serves /containerLogs and /healthz on, at its node address (127.0.1.<n>); 0: any free port")
	fast := fs.Bool("fast", false, "scale the kubelet's timings down (heartbeats, restart back-off), as minictl up --fast does")
	bootstrapKubeconfig := fs.String("bootstrap-kubeconfig", "", "a kubeconfig with a bootstrap token; when --kubeconfig does not exist, the kubelet asks the cluster for a client certificate with it and writes --kubeconfig to use that (TLS bootstrap)")
	certDir := fs.String("cert-dir", "/var/lib/kubelet/pki", "where the TLS bootstrap writes the kubelet's client key and certificate")
	var lf logFlags
	lf.bind(fs)
	if err := parseFlags(ctx, fs, args); err != nil {
		return err
	}
	if *name == "" {
		return fmt.Errorf("--name is required")
	}
	cf.kubeletDefaults(setFlags(fs))
	if *fast {
		cf.fastKubelet(setFlags(fs))
	}
	log, err := lf.logger(stderr, nil)
	if err != nil {
		return err
	}
	if *bootstrapKubeconfig != "" {
		kubeconfig := fs.Lookup("kubeconfig").Value.String()
		if kubeconfig == "" {
			return fmt.Errorf("--bootstrap-kubeconfig needs --kubeconfig: where to write the kubeconfig it bootstraps")
		}
		if err := bootstrap.LoadClientCert(ctx, kubeconfig, *bootstrapKubeconfig, *certDir, *name, log); err != nil {
			return fmt.Errorf("TLS bootstrap: %w", err)
		}
	}
	rc, err := newClient()
	if err != nil {
		return err
	}
	return runKubelet(ctx, asUser(rc, apiserver.NodeUser(*name)), *name, cf, log)
}

func enabledNames(selection []string) []string {
	names, err := controllers.Enabled(selection)
	if err != nil {
		return selection
	}
	return names
}

// stageTracer publishes each informer pipeline stage on the timeline bus,
// for `minictl trace --stages`. Given with bus.Active as the informers'
// TraceActive, it costs one atomic load per stage while nobody follows.
// Stages never go to the terminal: there are far too many.
func stageTracer(bus *timeline.Bus, component string) informer.TraceFunc {
	if bus == nil {
		return nil
	}
	return func(stage informer.TraceStage, attrs ...slog.Attr) {
		if !bus.Active() {
			return
		}
		e := timeline.Entry{Time: time.Now(), Level: slog.LevelInfo.String(), Component: component, Stage: string(stage)}
		var resource, typ, rv string
		for _, a := range attrs {
			switch a.Key {
			case informer.TraceAttrKey:
				e.Object = a.Value.String()
			case informer.TraceAttrResource:
				resource = a.Value.String()
			case informer.TraceAttrType:
				typ = a.Value.String()
			case informer.TraceAttrResourceVersion:
				rv = a.Value.String()
			}
		}
		e.Message = strings.TrimSpace(fmt.Sprintf("%s %s", resource, typ))
		if rv != "" {
			e.Message += " rv=" + rv
		}
		bus.Publish(e)
	}
}
