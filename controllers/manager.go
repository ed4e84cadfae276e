package controllers

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/leaderelection"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/csrsigning"
	"github.com/minictl/minictl/controllers/endpointslice"
	"github.com/minictl/minictl/controllers/endpointslicemirroring"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/job"
	"github.com/minictl/minictl/controllers/nodeipam"
	"github.com/minictl/minictl/controllers/nodelifecycle"
	"github.com/minictl/minictl/controllers/persistentvolume"
	"github.com/minictl/minictl/controllers/podautoscaler"
	"github.com/minictl/minictl/controllers/podgc"
	"github.com/minictl/minictl/controllers/resourcequota"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/internal/serving"
)

// Config is the controller manager's configuration, under
// kube-controller-manager's flag names.
type Config struct {
	// Controllers selects what runs: "*" is every default-on controller,
	// "name" enables one, "-name" disables one.
	Controllers []string

	LeaderElect   bool
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// LeaseNamespace and LeaseName name the Lease the candidates share.
	LeaseNamespace, LeaseName string

	// Timings shared with the controllers that need them.
	Timings Timings
	// Signing is the CA the csrsigning controller signs with.
	Signing Signing
	// Credentials are the keys and certificates the token controllers
	// need.
	Credentials Credentials
	// Workers per controller (--concurrent-<name>-syncs).
	Workers map[string]int
	// Trace, if set, is given to the shared informers, so that each stage
	// of the informer pipeline can be followed (minictl trace --stages),
	// while TraceActive (if set) reports true.
	Trace       informer.TraceFunc
	TraceActive func() bool

	// UseServiceAccountCredentials runs each controller as its own
	// ServiceAccount in kube-system (--use-service-account-credentials;
	// credentials.go). ServiceAccountClient makes the client of one such
	// account: the manager's server, with tokens from the source and no
	// other credential.
	UseServiceAccountCredentials bool
	ServiceAccountClient         func(tokens client.TokenSource) (*client.RESTClient, error)

	// Cloud is the cloud controller manager's: the provider its
	// controllers ask and their knobs (cloudwiring.go).
	Cloud Cloud
}

// Signing is kube-controller-manager's --cluster-signing-* flags: the CA
// the csrsigning controller signs with (none: it does not run, as in
// kube) and how long what it signs is valid.
type Signing struct {
	CertFile string        // --cluster-signing-cert-file
	KeyFile  string        // --cluster-signing-key-file
	Duration time.Duration // --cluster-signing-duration
}

// Timings are the knobs that decide how fast the cluster reacts, under
// their Kubernetes flag names; minictl up --fast scales them down.
type Timings struct {
	TerminatedPodGCThreshold int           // --terminated-pod-gc-threshold
	PodGCPeriod              time.Duration // how often podgc looks
	PodGCQuarantine          time.Duration // how long a node must stay gone before its pods are force-deleted
	ResourceQuotaSyncPeriod  time.Duration // --resource-quota-sync-period: full recalculation of every quota
	PVClaimBinderSyncPeriod  time.Duration // --pvclaimbinder-sync-period: how often every volume and claim is synced again

	NodeMonitorPeriod         time.Duration // --node-monitor-period: how often node health is checked
	NodeMonitorGracePeriod    time.Duration // --node-monitor-grace-period: silence before a node is Unknown
	NodeStartupGracePeriod    time.Duration // --node-startup-grace-period: the same, for a node never yet Ready
	NodeEvictionRate          float64       // --node-eviction-rate: nodes per second whose pods may be evicted
	SecondaryNodeEvictionRate float64       // --secondary-node-eviction-rate: the same when a zone is unhealthy
	UnhealthyZoneThreshold    float64       // --unhealthy-zone-threshold
	LargeClusterSizeThreshold int           // --large-cluster-size-threshold
	ClusterCIDR               string        // --cluster-cidr: where node podCIDRs come from
	NodeCIDRMaskSize          int           // --node-cidr-mask-size
	JobBackoffBase            time.Duration // the job controller's back-off after a Job's first failed pod, doubling after each
	JobBackoffMax             time.Duration // the longest that back-off grows

	MaxEndpointsPerSlice       int           // --max-endpoints-per-slice
	EndpointUpdatesBatchPeriod time.Duration // --endpoint-updates-batch-period: how long pod changes gather before a service's slices are written

	MirroringMaxEndpointsPerSubset      int           // --mirroring-max-endpoints-per-subset
	MirroringEndpointUpdatesBatchPeriod time.Duration // --mirroring-endpointslice-updates-batch-period
	HPASyncPeriod                       time.Duration // --horizontal-pod-autoscaler-sync-period
	HPATolerance                        float64       // --horizontal-pod-autoscaler-tolerance
	HPADownscaleStabilization           time.Duration // --horizontal-pod-autoscaler-downscale-stabilization
	HPACPUInitializationPeriod          time.Duration // --horizontal-pod-autoscaler-cpu-initialization-period
	HPAInitialReadinessDelay            time.Duration // --horizontal-pod-autoscaler-initial-readiness-delay
}

// Credentials are files of kube-controller-manager's flags of the same
// names; a controller that needs one that is not given does not run.
type Credentials struct {
	// ServiceAccountPrivateKeyFile (--service-account-private-key-file)
	// signs the legacy tokens of the serviceaccount-token controller.
	ServiceAccountPrivateKeyFile string
	// RootCAFile (--root-ca-file) is the cluster's CA, put in token
	// Secrets and published in every namespace as kube-root-ca.crt.
	RootCAFile string
}

// DefaultConfig is kube-controller-manager's defaults: the manager's own,
// and each knob's from the package that owns it.
func DefaultConfig() Config {
	return Config{
		Controllers:    []string{"*"},
		LeaderElect:    true,
		LeaseDuration:  leaderelection.DefaultLeaseDuration,
		RenewDeadline:  leaderelection.DefaultRenewDeadline,
		RetryPeriod:    leaderelection.DefaultRetryPeriod,
		LeaseNamespace: "kube-system",
		LeaseName:      "kube-controller-manager",
		Timings: Timings{
			TerminatedPodGCThreshold:       podgc.DefaultTerminatedPodThreshold,
			PodGCPeriod:                    podgc.DefaultPeriod,
			PodGCQuarantine:                podgc.DefaultQuarantineTime,
			ResourceQuotaSyncPeriod:        resourcequota.DefaultResyncPeriod,
			PVClaimBinderSyncPeriod:        persistentvolume.DefaultSyncPeriod,
			NodeMonitorPeriod:              nodelifecycle.DefaultNodeMonitorPeriod,
			NodeMonitorGracePeriod:         nodelifecycle.DefaultNodeMonitorGracePeriod,
			NodeStartupGracePeriod:         nodelifecycle.DefaultNodeStartupGracePeriod,
			NodeEvictionRate:               nodelifecycle.DefaultEvictionRate,
			SecondaryNodeEvictionRate:      nodelifecycle.DefaultSecondaryEvictionRate,
			UnhealthyZoneThreshold:         nodelifecycle.DefaultUnhealthyZoneThreshold,
			JobBackoffBase:                 job.DefaultBackoffBase,
			JobBackoffMax:                  job.DefaultBackoffMax,
			LargeClusterSizeThreshold:      nodelifecycle.DefaultLargeClusterSizeThreshold,
			ClusterCIDR:                    nodeipam.DefaultClusterCIDR,
			NodeCIDRMaskSize:               nodeipam.DefaultNodeCIDRMaskSize,
			MaxEndpointsPerSlice:           endpointslice.DefaultMaxEndpointsPerSlice,
			MirroringMaxEndpointsPerSubset: endpointslicemirroring.DefaultMaxEndpointsPerSubset,
			HPASyncPeriod:                  podautoscaler.DefaultSyncPeriod,
			HPATolerance:                   podautoscaler.DefaultTolerance,
			HPADownscaleStabilization:      podautoscaler.DefaultDownscaleStabilization,
			HPACPUInitializationPeriod:     podautoscaler.DefaultCPUInitializationPeriod,
			HPAInitialReadinessDelay:       podautoscaler.DefaultInitialReadinessDelay,
		},
		Signing: Signing{Duration: csrsigning.DefaultDuration},
		Workers: map[string]int{},
	}
}

// BindFlags registers the configuration's flags on fs, with c's current
// values as defaults.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	c.bindCommonFlags(fs, knownControllers)
	fs.DurationVar(&c.Timings.ResourceQuotaSyncPeriod, "resource-quota-sync-period", c.Timings.ResourceQuotaSyncPeriod, "how often every quota's usage is recalculated in full")
	fs.DurationVar(&c.Timings.PVClaimBinderSyncPeriod, "pvclaimbinder-sync-period", c.Timings.PVClaimBinderSyncPeriod, "how often the persistentvolume-binder syncs every volume and claim again")
	t := &c.Timings
	fs.DurationVar(&t.NodeMonitorPeriod, "node-monitor-period", t.NodeMonitorPeriod, "how often the node lifecycle controller checks node health")
	fs.DurationVar(&t.NodeMonitorGracePeriod, "node-monitor-grace-period", t.NodeMonitorGracePeriod, "how long a node may be silent before it is marked Unknown")
	fs.DurationVar(&t.NodeStartupGracePeriod, "node-startup-grace-period", t.NodeStartupGracePeriod, "the same, for a node that has never been Ready")
	fs.Float64Var(&t.NodeEvictionRate, "node-eviction-rate", t.NodeEvictionRate, "nodes per second whose pods may be evicted when a zone is healthy")
	fs.Float64Var(&t.SecondaryNodeEvictionRate, "secondary-node-eviction-rate", t.SecondaryNodeEvictionRate, "nodes per second when a zone is unhealthy")
	fs.Float64Var(&t.UnhealthyZoneThreshold, "unhealthy-zone-threshold", t.UnhealthyZoneThreshold, "fraction of not-ready nodes that makes a zone unhealthy")
	fs.IntVar(&t.LargeClusterSizeThreshold, "large-cluster-size-threshold", t.LargeClusterSizeThreshold, "zones up to this size stop evicting when unhealthy")
	fs.StringVar(&t.ClusterCIDR, "cluster-cidr", t.ClusterCIDR, "the range node podCIDRs are allocated from")
	fs.IntVar(&t.NodeCIDRMaskSize, "node-cidr-mask-size", t.NodeCIDRMaskSize, "the prefix length of each node's podCIDR")
	fs.StringVar(&c.Signing.CertFile, "cluster-signing-cert-file", c.Signing.CertFile, "PEM CA certificate the csrsigning controller signs with; none: it does not run")
	fs.StringVar(&c.Signing.KeyFile, "cluster-signing-key-file", c.Signing.KeyFile, "PEM private key of --cluster-signing-cert-file")
	fs.DurationVar(&c.Signing.Duration, "cluster-signing-duration", c.Signing.Duration, "the longest a signed certificate is valid; a request's spec.expirationSeconds may shorten it")
	fs.StringVar(&c.Credentials.ServiceAccountPrivateKeyFile, "service-account-private-key-file", c.Credentials.ServiceAccountPrivateKeyFile, "PEM private key (RSA or ECDSA) that signs the legacy ServiceAccount tokens; without it the serviceaccount-token controller does not run")
	fs.StringVar(&c.Credentials.RootCAFile, "root-ca-file", c.Credentials.RootCAFile, "the cluster's root CA, put into ServiceAccount token Secrets and the kube-root-ca.crt ConfigMap of every namespace; without it root-ca-cert-publisher does not run")
	fs.IntVar(&c.Timings.TerminatedPodGCThreshold, "terminated-pod-gc-threshold", c.Timings.TerminatedPodGCThreshold, "terminated pods kept before podgc deletes the oldest")
	fs.IntVar(&t.MaxEndpointsPerSlice, "max-endpoints-per-slice", t.MaxEndpointsPerSlice, "the most endpoints the endpointslice controller puts in one EndpointSlice (1 to 1000)")
	fs.DurationVar(&t.EndpointUpdatesBatchPeriod, "endpoint-updates-batch-period", t.EndpointUpdatesBatchPeriod, "how long the endpointslice controller gathers pod changes before writing a service's slices")
	fs.IntVar(&t.MirroringMaxEndpointsPerSubset, "mirroring-max-endpoints-per-subset", t.MirroringMaxEndpointsPerSubset, "the most addresses of one Endpoints subset the endpointslicemirroring controller mirrors (1 to 1000)")
	fs.DurationVar(&t.MirroringEndpointUpdatesBatchPeriod, "mirroring-endpointslice-updates-batch-period", t.MirroringEndpointUpdatesBatchPeriod, "how long the endpointslicemirroring controller gathers Endpoints changes before writing")
	fs.DurationVar(&t.HPASyncPeriod, "horizontal-pod-autoscaler-sync-period", t.HPASyncPeriod, "how often the horizontal pod autoscaler passes over every autoscaler")
	fs.Float64Var(&t.HPATolerance, "horizontal-pod-autoscaler-tolerance", t.HPATolerance, "the smallest ratio of metric to target, away from 1, that makes the autoscaler scale")
	fs.DurationVar(&t.HPADownscaleStabilization, "horizontal-pod-autoscaler-downscale-stabilization", t.HPADownscaleStabilization, "how far back the autoscaler looks for a higher recommendation before it scales down")
	fs.DurationVar(&t.HPACPUInitializationPeriod, "horizontal-pod-autoscaler-cpu-initialization-period", t.HPACPUInitializationPeriod, "how long after its start a pod's CPU is not trusted unless it is ready")
	fs.DurationVar(&t.HPAInitialReadinessDelay, "horizontal-pod-autoscaler-initial-readiness-delay", t.HPAInitialReadinessDelay, "how long after its start a pod's readiness changes are taken as its initial readiness")
	c.bindWorkerFlags(fs, knownControllers)
}

// bindCommonFlags registers the flags both managers have: which
// controllers of table run, leader election, and whose credentials they
// use.
func (c *Config) bindCommonFlags(fs *flag.FlagSet, table []descriptor) {
	fs.Func("controllers", fmt.Sprintf("comma-separated controllers to run: '*' enables every default-on one, 'foo' enables foo, '-foo' disables foo (known: %s) (default \"*\")", strings.Join(names(table), ", ")), func(s string) error {
		c.Controllers = splitComma(s)
		return nil
	})
	fs.BoolVar(&c.LeaderElect, "leader-elect", c.LeaderElect, "take a Lease before running controllers, so that only one controller manager acts")
	fs.DurationVar(&c.LeaseDuration, "leader-elect-lease-duration", c.LeaseDuration, "how long a candidate waits, after the lease last changed, before taking it over")
	fs.DurationVar(&c.RenewDeadline, "leader-elect-renew-deadline", c.RenewDeadline, "how long the leader tries to renew before it stops leading")
	fs.DurationVar(&c.RetryPeriod, "leader-elect-retry-period", c.RetryPeriod, "the wait between attempts to acquire or renew the lease")
	fs.BoolVar(&c.UseServiceAccountCredentials, "use-service-account-credentials", c.UseServiceAccountCredentials, "run each controller with the credentials of its own ServiceAccount in kube-system, so that RBAC holds it to its role")
}

// bindWorkerFlags registers the --concurrent-...-syncs flag of each
// controller of table that has one.
func (c *Config) bindWorkerFlags(fs *flag.FlagSet, table []descriptor) {
	for _, d := range table {
		if d.workersFlag == "" {
			continue
		}
		name := d.name
		def := d.workers
		fs.Func(d.workersFlag, fmt.Sprintf("workers of the %s controller (default %d)", name, def), func(s string) error {
			var n int
			if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
				return fmt.Errorf("must be a positive integer")
			}
			c.Workers[name] = n
			return nil
		})
	}
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// controllerContext is what every controller is built from, per
// leadership term: the options every controller takes (one client, one
// shared informer factory, its own event recorder, the manager's logger,
// its metrics), and the timings for those that have knobs.
type controllerContext struct {
	controller.Common
	Timings     Timings
	Signing     Signing
	Credentials Credentials
	Cloud       Cloud
}

// runner is what the manager needs of a controller.
type runner interface {
	Run(ctx context.Context, workers int)
}

// descriptor is one row of the manager's table of controllers.
type descriptor struct {
	name        string
	defaultOn   bool
	workers     int    // default workers
	workersFlag string // --concurrent-...-syncs
	// component is the source.component of its Events when it is not
	// "<name>-controller": kube's replicationcontroller reports as
	// "replication-controller".
	component string
	// serviceAccount is the ServiceAccount in kube-system it runs as with
	// --use-service-account-credentials, by kube's name for it; "": the
	// manager's own identity, as kube's root client.
	serviceAccount string
	// build returns the controller, or nil when it is disabled for want
	// of what it needs (a key, a certificate), as kube's are.
	build func(cc *controllerContext) (runner, error)
}

// KnownControllers lists every controller's name, sorted.
func KnownControllers() []string { return names(knownControllers) }

// names lists the names of table's controllers, sorted.
func names(table []descriptor) []string {
	out := make([]string, 0, len(table))
	for _, d := range table {
		out = append(out, d.name)
	}
	sort.Strings(out)
	return out
}

// enabled resolves --controllers against table the way
// kube-controller-manager does: an explicit "-name" wins, then an explicit
// "name", then "*" for the default-on ones.
func enabled(table []descriptor, selection []string) ([]descriptor, error) {
	known := names(table)
	for _, s := range selection {
		name := strings.TrimPrefix(s, "-")
		if s == "*" {
			continue
		}
		if !slices.Contains(known, name) {
			return nil, fmt.Errorf("unknown controller %q in --controllers; known controllers: %s", s, strings.Join(known, ", "))
		}
	}
	var out []descriptor
	for _, d := range table {
		switch {
		case slices.Contains(selection, "-"+d.name):
		case slices.Contains(selection, d.name):
			out = append(out, d)
		case slices.Contains(selection, "*") && d.defaultOn:
			out = append(out, d)
		}
	}
	return out, nil
}

// Manager runs the enabled controllers while it holds the leader lease.
type Manager struct {
	rc       *client.RESTClient
	cfg      Config
	log      *slog.Logger
	registry *prometheus.Registry
	selected []descriptor
	identity string
	isLeader prometheus.Gauge

	mu      sync.Mutex
	elector *leaderelection.LeaderElector
	// saClients are the controllers' clients by ServiceAccount, made once
	// (credentials.go).
	saClients map[string]*client.RESTClient
}

// NewManager checks cfg and prepares a controller manager (the controllers
// of wiring.go); nothing runs until Run.
func NewManager(rc *client.RESTClient, cfg Config, log *slog.Logger) (*Manager, error) {
	return newManager(rc, cfg, log, "controller-manager", knownControllers)
}

// newManager prepares a manager of the controllers of table, whose log
// lines say component=component.
func newManager(rc *client.RESTClient, cfg Config, log *slog.Logger, component string, table []descriptor) (*Manager, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	selected, err := enabled(table, cfg.Controllers)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	m := &Manager{
		rc: rc, cfg: cfg, log: log.With("component", component),
		registry: prometheus.NewRegistry(), selected: selected,
		identity: host + "_" + uuid.NewString(),
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "leader_election_master_status",
			Help:        "1 while this controller manager holds the leader lease.",
			ConstLabels: prometheus.Labels{"name": cfg.LeaseName},
		}),
	}
	m.registry.MustRegister(m.isLeader, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m, nil
}

// Identity is this manager's name in the leader lease.
func (m *Manager) Identity() string { return m.identity }

// Handler serves /healthz and /metrics.
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		el := m.elector
		m.mu.Unlock()
		if el != nil {
			if err := el.Check(20 * time.Second); err != nil {
				http.Error(w, "leaderElection: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}))
	return mux
}

// Serve answers /healthz and /metrics on ln until ctx ends.
func (m *Manager) Serve(ctx context.Context, ln net.Listener) error {
	srv := serving.Timeouts{}.Server(m.Handler())
	srv.Log = m.log
	return srv.Run(ctx, ln, 5*time.Second)
}

// Run runs the controllers until ctx ends. With leader election it first
// takes the lease; if the lease is lost, the controllers stop and it
// campaigns again, so at most one manager acts at a time.
func (m *Manager) Run(ctx context.Context) error {
	names := make([]string, len(m.selected))
	for i, d := range m.selected {
		names[i] = d.name
	}
	m.log.Info("controller manager starting", "controllers", strings.Join(names, ","), "identity", m.identity, "leaderElect", m.cfg.LeaderElect)
	if !m.cfg.LeaderElect {
		m.isLeader.Set(1)
		return m.runTerm(ctx)
	}
	for ctx.Err() == nil {
		// A term that fails to build its controllers ends the election
		// too: holding the lease with no controllers running would keep
		// every other manager from taking over.
		ectx, stopElection := context.WithCancel(ctx)
		var termErr error
		el, err := leaderelection.New(leaderelection.Config{
			Client: m.rc, Namespace: m.cfg.LeaseNamespace, Name: m.cfg.LeaseName, Identity: m.identity,
			LeaseDuration: m.cfg.LeaseDuration, RenewDeadline: m.cfg.RenewDeadline, RetryPeriod: m.cfg.RetryPeriod,
			ReleaseOnCancel: true, Logger: m.log,
			OnStartedLeading: func(ctx context.Context) {
				m.isLeader.Set(1)
				m.log.Info("became leader; starting controllers", "lease", m.cfg.LeaseNamespace+"/"+m.cfg.LeaseName)
				if termErr = m.runTerm(ctx); termErr != nil {
					stopElection()
				}
			},
			OnStoppedLeading: func() {
				m.isLeader.Set(0)
				m.log.Info("stopped leading; controllers stopped")
			},
			OnNewLeader: func(id string) {
				if id != m.identity {
					m.log.Info("another controller manager leads; waiting", "leader", id)
				}
			},
		})
		if err != nil {
			stopElection()
			return err
		}
		m.mu.Lock()
		m.elector = el
		m.mu.Unlock()
		err = el.Run(ectx)
		stopElection()
		if termErr != nil {
			return termErr
		}
		if err != nil && !errors.Is(err, leaderelection.ErrLeaseLost) {
			return err
		}
	}
	return nil
}

// runTerm builds every enabled controller on a fresh informer factory and
// runs them until ctx ends; then it waits for all of them to stop. If one
// cannot be built, none runs: those already built are stopped at once (each
// Run returns as soon as its context is done) and the error is returned.
func (m *Manager) runTerm(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// No controller reads managedFields: the caches drop them, as
	// kube-controller-manager's do, and hold each object at about two
	// thirds of its size. Pods also share what they have in common with
	// each other and with the scheduler's and kubelets' (informer.Lean).
	factory := informer.NewSharedInformerFactory(m.rc, informer.FactoryOptions{Logger: m.log, Trace: m.cfg.Trace, TraceActive: m.cfg.TraceActive, Transform: informer.Lean})
	type built struct {
		c        runner
		workers  int
		recorder *record.Recorder
	}
	var all []built
	var buildErr error
	for _, d := range m.selected {
		// Each controller reports Events as itself, as kube-controller-manager's
		// do: source.component "replicaset-controller", ...
		component := d.component
		if component == "" {
			component = d.name + "-controller"
		}
		rc, err := m.controllerClient(d)
		if err != nil {
			buildErr = fmt.Errorf("controller %s: %w", d.name, err)
			cancel()
			break
		}
		recorder := record.NewRecorder(rc, record.Options{Component: component, Logger: m.log})
		// The controller's logger names it, once, under its
		// kube-controller-manager name: the timeline and `minictl trace
		// --component` read that attribute.
		cc := &controllerContext{
			Common: controller.Common{
				Client: rc, Informers: factory, Recorder: recorder,
				// The controller adds controller=<its name> itself.
				Logger:  m.log,
				Metrics: prometheus.WrapRegistererWith(prometheus.Labels{"controller": d.name}, m.registry),
			},
			Timings: m.cfg.Timings, Signing: m.cfg.Signing, Credentials: m.cfg.Credentials, Cloud: m.cfg.Cloud,
		}
		c, err := d.build(cc)
		if err != nil {
			buildErr = fmt.Errorf("controller %s: %w", d.name, err)
			cancel()
			break
		}
		if c == nil {
			continue // it lacks what it needs, and said so
		}
		workers := d.workers
		if n := m.cfg.Workers[d.name]; n > 0 {
			workers = n
		}
		all = append(all, built{c: c, workers: workers, recorder: recorder})
	}
	var wg sync.WaitGroup
	for _, b := range all {
		wg.Add(2)
		go func() {
			defer wg.Done()
			b.recorder.Run(ctx)
		}()
		go func() {
			defer wg.Done()
			b.c.Run(ctx, b.workers)
		}()
	}
	if buildErr == nil {
		factory.Start(ctx)
		<-ctx.Done()
	}
	wg.Wait()
	factory.Shutdown()
	return buildErr
}

// Enabled returns the names of the controllers a --controllers selection
// runs, or an error naming the unknown ones.
func Enabled(selection []string) ([]string, error) {
	ds, err := enabled(knownControllers, selection)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.name
	}
	return names, nil
}
