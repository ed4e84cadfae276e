package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/controllers"
	"github.com/minictl/minictl/internal/serving"
	"github.com/minictl/minictl/internal/timeline"
	"github.com/minictl/minictl/metricsserver"
	"github.com/minictl/minictl/store"
)

// fastMetricResolution is --metric-resolution under --fast: usage that
// shows in kubectl top seconds after it changes.
const fastMetricResolution = 2 * time.Second

// serverFlags are the flags `up` and `apiserver` share.
type serverFlags struct {
	listen string
	// The secure port: TLS, authentication and authorization (secure.go).
	secure        secureFlags
	etcdEndpoints string
	log           logFlags
	compaction    time.Duration
	// Seconds new pods tolerate a not-ready or unreachable node.
	notReadyToleration, unreachableToleration int64
	profiling                                 bool
	// Each connection's deadlines (net/http's names).
	readHeaderTimeout, readTimeout, writeTimeout, idleTimeout time.Duration
	corsAllowedOrigins                                        string
	// Requests in flight, read-only and mutating (kube's flags).
	maxRequestsInflight, maxMutatingRequestsInflight int
	// requestTimeout bounds every request but a watch, and each etcd call.
	requestTimeout time.Duration
	// watchCacheSize is the events each resource's watch cache keeps.
	watchCacheSize int
	// watchCacheMaxBytes bounds the encoded bytes of the events it keeps.
	watchCacheMaxBytes int64
	// watchCacheSizes turns single resources' watch caches off or on.
	watchCacheSizes string
	// eventTTL is how long an Event lives after its last write.
	eventTTL time.Duration
	// advertiseAddress and serviceRange place the kubernetes Service.
	advertiseAddress netip.Addr
	serviceRange     netip.Prefix
	// nodePortRange is where Services' node ports come from.
	nodePortRange apiserver.PortRange
	// auditLogPath and auditPolicyFile: the audit log and its policy.
	auditLogPath, auditPolicyFile string
	// metricResolution is how often the kubelets are scraped for the
	// resource metrics API.
	metricResolution time.Duration
	// listenFallback: --listen was left at its default, so a taken port
	// falls back to a free one (up only).
	listenFallback bool
	// etcdTaken is the embedded etcd's default client URL when it was
	// taken and a free port used instead.
	etcdTaken string
	// afterBanner, when set, is called once the banner is printed.
	afterBanner func()
}

func (f *serverFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "loopback address of the plain HTTP listener, minictl's built-in kubectl proxy: every request on it acts as the admin (\"\" turns it off)")
	f.secure.bind(fs)
	fs.StringVar(&f.etcdEndpoints, "etcd-endpoints", "", "comma-separated etcd client URLs; empty starts an embedded etcd")
	f.log.bind(fs)
	fs.DurationVar(&f.compaction, "etcd-compaction-interval", 5*time.Minute, "how often etcd history older than one interval is compacted")
	fs.Int64Var(&f.notReadyToleration, "default-not-ready-toleration-seconds", 300, "how long new pods tolerate a not-ready node before eviction")
	fs.Int64Var(&f.unreachableToleration, "default-unreachable-toleration-seconds", 300, "how long new pods tolerate an unreachable node before eviction")
	fs.DurationVar(&f.readHeaderTimeout, "read-header-timeout", serving.DefaultReadHeaderTimeout, "how long a client may take to send a request's headers")
	fs.DurationVar(&f.readTimeout, "read-timeout", serving.DefaultReadTimeout, "how long a client may take to send a whole request, headers and body; a stalled upload is dropped")
	fs.DurationVar(&f.writeTimeout, "write-timeout", serving.DefaultWriteTimeout, "how long writing an answer may take; a watch extends it with every event it writes")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", serving.DefaultIdleTimeout, "how long a keep-alive connection may wait for its next request before it is closed")
	fs.DurationVar(&f.requestTimeout, "request-timeout", apiserver.DefaultRequestTimeout, "how long a request (any but a watch) may take, etcd calls included, before it is answered 504 Timeout")
	fs.StringVar(&f.corsAllowedOrigins, "cors-allowed-origins", "", "comma-separated regular expressions of the browser origins allowed to call the API besides its own (anchor them: ^https://example\\.com$); other cross-origin requests are refused")
	fs.IntVar(&f.maxRequestsInflight, "max-requests-inflight", apiserver.DefaultMaxRequestsInflight, "how many read-only requests of clients other than minictl's own components may run at once; beyond, 429 TooManyRequests (0: no limit)")
	fs.IntVar(&f.maxMutatingRequestsInflight, "max-mutating-requests-inflight", apiserver.DefaultMaxMutatingRequestsInflight, "how many mutating requests of clients other than minictl's own components may run at once; beyond, 429 TooManyRequests (0: no limit)")
	fs.IntVar(&f.watchCacheSize, "default-watch-cache-size", apiserver.DefaultWatchCacheSize, "how many recent events each resource's watch cache keeps, so that a watch resuming from an older resourceVersion than the newest is served from memory; one older than them all gets 410 Gone (the cache also keeps at most --watch-cache-max-bytes of them, and none older than 75s beyond its newest 100)")
	fs.Int64Var(&f.watchCacheMaxBytes, "watch-cache-max-bytes", apiserver.DefaultWatchCacheMaxBytes, "the most bytes (as encoded: JSON, protobuf for pods, events and leases) of recent events each resource's watch cache keeps, whatever --default-watch-cache-size allows: a watch resuming from before the oldest kept event gets 410 Gone and lists again")
	fs.DurationVar(&f.eventTTL, "event-ttl", apiserver.DefaultEventTTL, "how long an Event lives after its last write before etcd deletes it, as kube-apiserver's flag of the same name (Events written within a minute share one etcd lease, so one may live up to a minute longer)")
	fs.StringVar(&f.watchCacheSizes, "watch-cache-sizes", "", "comma-separated resource[.group]#size: a size of 0 serves that resource from etcd without a watch cache (every read goes to etcd, each watch is its own etcd watch), any other size keeps its cache, as kube-apiserver's flag of the same name; events are served without one unless this says events#<size> (only events may go without)")
	fs.TextVar(&f.advertiseAddress, "advertise-address", netip.Addr{}, "the IP address the API server publishes in the kubernetes Service's Endpoints (default: the listen address, or this machine's first global IPv4 address when listening on loopback)")
	fs.TextVar(&f.serviceRange, "service-cluster-ip-range", apiserver.DefaultServiceClusterIPRange, "the IPv4 range Services' cluster IPs come from; the kubernetes Service has its first address")
	fs.TextVar(&f.nodePortRange, "service-node-port-range", apiserver.DefaultServiceNodePortRange, "the range of ports NodePort and LoadBalancer Services' node ports come from, both ends included")
	fs.StringVar(&f.auditLogPath, "audit-log-path", "", "if set, every request to the API server is recorded in this file as audit.k8s.io/v1 Events, one JSON line each; '-' means standard out")
	fs.StringVar(&f.auditPolicyFile, "audit-policy-file", "", "the audit.k8s.io/v1 Policy (YAML or JSON) that says what the audit log records of which request (default: every request at the Metadata level)")
	fs.DurationVar(&f.metricResolution, "metric-resolution", metricsserver.DefaultResolution, "how often the kubelets are scraped for the resource metrics API (metrics.k8s.io, kubectl top), as metrics-server's flag of the same name")
	fs.BoolVar(&f.profiling, "profiling", false, "serve Go's CPU, heap and allocation profiles at /debug/pprof/ on the API port (for go tool pprof)")
}

// storeConfig is the store the flags name: cfg.Endpoints empty means an
// embedded etcd, which runUp places.
func (f *serverFlags) storeConfig(log *slog.Logger) store.Config {
	return store.Config{
		Endpoints: splitList(f.etcdEndpoints), CompactionInterval: f.compaction,
		RequestTimeout: f.requestTimeout, Logger: log,
	}
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "minictl")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "minictl")
	}
	return filepath.Join(os.TempDir(), "minictl")
}

func runUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("up")
	var sf serverFlags
	sf.bind(fs)
	var cf clusterFlags
	cf.bind(fs)
	var clf cloudFlags
	clf.bind(fs)
	dataDir := fs.String("data-dir", defaultDataDir(), "directory for the embedded etcd's data (and the simulated cloud's, in cloud/); one minictl uses it at a time")
	etcdURL := fs.String("etcd-client-url", defaultEtcdClientURL, "client URL of the embedded etcd (a free port is used if this default one is taken; port 0 always picks one)")
	if err := parseFlags(ctx, fs, args); err != nil {
		return err
	}
	cf.kubeletDefaults(setFlags(fs))
	cf.applyFast(fs)
	cf.set = setFlags(fs)
	if cf.nodes < 0 {
		return fmt.Errorf("invalid value \"%d\" for --nodes: must be 0 or more", cf.nodes)
	}
	// The data dir is this process's before etcd opens it: etcd would wait
	// for ever for the lock of another minictl's database.
	lock, err := lockDataDir(*dataDir)
	if err != nil {
		return err
	}
	defer lock.unlock()
	if cf.fast {
		set := setFlags(fs)
		if !set["default-not-ready-toleration-seconds"] {
			sf.notReadyToleration = 5
		}
		if !set["default-unreachable-toleration-seconds"] {
			sf.unreachableToleration = 5
		}
		if !set["metric-resolution"] {
			sf.metricResolution = fastMetricResolution
		}
	}
	// The banner comes first, then the timeline: what start-up logs waits
	// for the banner (or for the error that ends start-up).
	held := &heldWriter{w: stderr, held: true}
	defer held.release()
	sf.afterBanner = held.release
	bus := timeline.NewBus()
	log, err := sf.log.logger(held, bus)
	if err != nil {
		return err
	}
	cfg := sf.storeConfig(log)
	if sf.secure.certDir == "" {
		sf.secure.certDir = filepath.Join(*dataDir, "pki")
	}
	sf.secure.kubeconfigOut = filepath.Join(*dataDir, "kubeconfig")
	sf.secure.fallbackPort = !cf.set["secure-listen"]
	sf.listenFallback = !cf.set["listen"]
	cf.cmFallback = !cf.set["controller-manager-address"]
	if len(cfg.Endpoints) == 0 {
		cfg.DataDir = *dataDir
		if cfg.ClientURL, err = etcdClientURL(*etcdURL, cf.set["etcd-client-url"]); err != nil {
			return err
		}
		if cfg.ClientURL != *etcdURL {
			sf.etcdTaken = *etcdURL
		}
	}
	cf.zones = clf.zones
	if cf.cloud, err = clf.open(setFlags(fs)["cloud-listen"], *dataDir, log); err != nil {
		return err
	}
	if cf.cloud != nil {
		defer cf.cloud.ln.Close()
	}
	return serve(ctx, cfg, sf, &cf, log, bus, stdout, *dataDir)
}

func runAPIServer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("apiserver")
	var sf serverFlags
	sf.bind(fs)
	if err := parseFlags(ctx, fs, args); err != nil {
		return err
	}
	if sf.etcdEndpoints == "" {
		return errors.New("--etcd-endpoints is required (minictl up starts an embedded etcd instead)")
	}
	// Alone, the API server has no data dir to keep a CA in: its secure
	// port needs --cert-dir or certificates of its own, and is off when
	// neither is given and it was not asked for.
	if set := setFlags(fs); !set["secure-listen"] && sf.secure.certDir == "" && sf.secure.tlsCertFile == "" {
		sf.secure.listen = ""
	}
	bus := timeline.NewBus()
	log, err := sf.log.logger(stderr, bus)
	if err != nil {
		return err
	}
	cfg := sf.storeConfig(log)
	return serve(ctx, cfg, sf, nil, log, bus, stdout, "")
}

// serve opens the store and runs the API server, and with cf the rest of
// the cluster, until ctx ends. Shutdown goes in order: the cluster's
// components first (the controller manager gives its lease back through a
// still-running API server), then the API server (stop accepting, end
// watches), then etcd.
func serve(ctx context.Context, cfg store.Config, sf serverFlags, cf *clusterFlags, log *slog.Logger, bus *timeline.Bus, stdout io.Writer, dataDir string) error {
	if r := sf.serviceRange; !r.Addr().Is4() || r.Bits() > 30 {
		return fmt.Errorf("--service-cluster-ip-range %s: give an IPv4 range of at least 4 addresses, such as 10.96.0.0/12 (Services are single-stack IPv4)", r)
	}
	start := time.Now()
	if sf.watchCacheSize < 1 {
		return fmt.Errorf("--default-watch-cache-size must be at least 1, not %d (minictl serves every resource from its watch cache)", sf.watchCacheSize)
	}
	if sf.watchCacheMaxBytes < 1 {
		return fmt.Errorf("--watch-cache-max-bytes must be at least 1, not %d", sf.watchCacheMaxBytes)
	}
	if sf.eventTTL <= 0 {
		return fmt.Errorf("--event-ttl must be more than 0, not %v", sf.eventTTL)
	}
	cacheSizes, err := apiserver.ParseWatchCacheSizes(sf.watchCacheSizes)
	if err != nil {
		return fmt.Errorf("--watch-cache-sizes: %w", err)
	}
	budget := connectionBudget(log)
	st, err := store.Open(ctx, cfg)
	if err != nil {
		return fmt.Errorf("open etcd: %w", err)
	}
	defer st.Close()
	if sf.listen == "" && sf.secure.listen == "" {
		return errors.New("--listen and --secure-listen are both off: the API server would answer nobody")
	}
	// The servers close their listeners when they stop; these cover the
	// returns before they start (closing twice does no harm).
	var ln net.Listener
	if sf.listen != "" {
		if err := checkLoopback(sf.listen); err != nil {
			return err
		}
		if ln, err = listenFlag("listen", sf.listen, sf.listenFallback, log); err != nil {
			return err
		}
		defer ln.Close()
		ln = budget.Listener(ln)
	}
	secure, err := sf.secure.open(log)
	if err != nil {
		return err
	}
	if secure != nil {
		defer secure.ln.Close()
		secure.ln = budget.Listener(secure.ln)
	}
	authn, err := sf.secure.authentication(secure)
	if err != nil {
		return err
	}
	// Every listener is open before anything starts, so that a taken port
	// is an error before any goroutine runs.
	var cmListener net.Listener
	if cf != nil {
		if cmListener, err = listenFlag("controller-manager-address", cf.cmAddress, cf.cmFallback, log); err != nil {
			return err
		}
		defer cmListener.Close()
		cmListener = budget.Listener(cmListener)
		if cf.cloud != nil {
			if cf.ccmListener, err = listenCloudControllerManager(cf.ccm.address, !cf.set["cloud-controller-manager-address"], log); err != nil {
				return err
			}
			defer cf.ccmListener.Close()
			cf.ccmListener = budget.Listener(cf.ccmListener)
		}
	}
	auditLog, auditPolicy, err := sf.openAudit()
	if err != nil {
		return err
	}
	if auditLog != nil {
		defer auditLog.Close()
	}
	srv, err := apiserver.New(apiserver.Config{
		Store: st, Logger: log, Timeline: bus,
		AuditLog: auditLog, AuditPolicy: auditPolicy,
		DefaultNotReadyTolerationSeconds:    sf.notReadyToleration,
		DefaultUnreachableTolerationSeconds: sf.unreachableToleration,
		ReadHeaderTimeout:                   sf.readHeaderTimeout,
		ReadTimeout:                         sf.readTimeout,
		WriteTimeout:                        sf.writeTimeout,
		IdleTimeout:                         sf.idleTimeout,
		RequestTimeout:                      sf.requestTimeout,
		WatchCacheSize:                      sf.watchCacheSize,
		WatchCacheMaxBytes:                  sf.watchCacheMaxBytes,
		WatchCacheSizes:                     cacheSizes,
		EventTTL:                            sf.eventTTL,
		CORSAllowedOrigins:                  splitList(sf.corsAllowedOrigins),
		MaxRequestsInflight:                 noLimitIfZero(sf.maxRequestsInflight),
		MaxMutatingRequestsInflight:         noLimitIfZero(sf.maxMutatingRequestsInflight),
		AdvertiseAddress:                    sf.advertiseAddress,
		ServiceClusterIPRange:               sf.serviceRange,
		ServiceNodePortRange:                sf.nodePortRange,
		Authentication:                      authn,
		ServiceAccountAdmission:             cf != nil,
		AnonymousAuth:                       sf.secure.anonymousAuth,
		SecurePort:                          secure != nil,
		AuthorizationModes:                  splitList(sf.secure.authorizationMode),
		EnableAdmissionPlugins:              splitList(sf.secure.enableAdmissionPlugins),
		MetricResolution:                    sf.metricResolution,
	})
	if err != nil {
		return err
	}
	if sf.profiling {
		srv.EnableProfiling()
	}
	stopInitiated := context.AfterFunc(ctx, srv.ShutdownInitiated)
	defer stopInitiated()
	serverCtx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServer()
	g, gctx := errgroup.WithContext(serverCtx)
	g.Go(func() error { return srv.Run(gctx) })
	if ln != nil {
		g.Go(func() error { return srv.Serve(gctx, ln) })
	}
	if secure != nil {
		g.Go(func() error { return srv.ServeSecure(gctx, secure.ln, secure.tls) })
	}
	if cf != nil && cf.cloud != nil {
		g.Go(func() error { return cf.cloud.c.Serve(gctx, cf.cloud.ln) })
	}

	// The cluster's own components use the plain listener when there is
	// one (they are the admin's proxy's users), and their own client
	// certificates on the secure port otherwise.
	url := ""
	if ln != nil {
		url = "http://" + ln.Addr().String()
	}
	var clusterErr error
	select {
	case <-srv.Ready():
		fmt.Fprintf(stdout, "minictl is up (API ready in %s)\n", time.Since(start).Round(time.Millisecond))
		if url != "" {
			fmt.Fprintf(stdout, "  API server:  %s (plain HTTP on loopback: acts as the admin, as kubectl proxy%s)\n", url, takenNote(sf.listen, ln))
		}
		if secure != nil {
			fmt.Fprintf(stdout, "  secure API:  %s (TLS; client certificates, tokens and RBAC%s)\n", secure.url(), takenNote(sf.secure.listen, secure.ln))
			if err := sf.secure.writeKubeconfig(secure); err != nil {
				log.Warn("admin kubeconfig not written", "err", err)
			} else if sf.secure.kubeconfigOut != "" {
				fmt.Fprintf(stdout, "  kubeconfig:  %s (the admin, over TLS)\n", sf.secure.kubeconfigOut)
			}
		}
		etcdNote := ""
		if sf.etcdTaken != "" {
			etcdNote = " (" + sf.etcdTaken + " was taken)"
		}
		fmt.Fprintf(stdout, "  etcd:        %s%s\n", strings.Join(st.Endpoints(), ","), etcdNote)
		if peers := st.PeerURLs(); len(peers) > 0 {
			fmt.Fprintf(stdout, "  etcd peer:   %s (a free port: one member has no peers to find it)\n", strings.Join(peers, ","))
		}
		if dataDir != "" && len(cfg.Endpoints) == 0 {
			fmt.Fprintf(stdout, "  data dir:    %s\n", dataDir)
		}
		if cf != nil && cf.runCM {
			fmt.Fprintf(stdout, "  controllers: %s (health on http://%s%s)\n", strings.Join(enabledNames(cf.cm.Controllers), ","), cmListener.Addr(), takenNote(cf.cmAddress, cmListener))
			fmt.Fprintf(stdout, "  nodes:       %d simulated\n", cf.nodes)
		}
		if cf != nil && cf.cloud != nil {
			fmt.Fprintf(stdout, "  cloud:       %s\n", cf.cloud.banner())
		}
		if cf != nil && cf.ccmListener != nil {
			fmt.Fprintf(stdout, "  cloud controllers: %s (health on http://%s%s)\n",
				strings.Join(controllers.KnownCloudControllers(), ","), cf.ccmListener.Addr(), takenNote(cf.ccm.address, cf.ccmListener))
		}
		if dataDir != "" {
			if err := writeRecord(dataDir, recordOf(url, secure, sf, cfg, st, cf, cmListener)); err != nil {
				log.Warn("cluster record not written", "err", err)
			}
		}
		if url != "" {
			fmt.Fprintf(stdout, "  web view:    %s/ui/ (the cluster and its controllers, live)\n", url)
			fmt.Fprintf(stdout, "Try: curl %s/api/v1/namespaces\n", url)
		}
		if sf.afterBanner != nil {
			sf.afterBanner()
		}
		if cf != nil {
			sf.clusterCredentials(&cf.cm, cf.set, secure)
			connect, err := sf.clusterConnector(url, secure)
			if err != nil {
				clusterErr = err
			} else {
				clusterErr = runCluster(ctx, connect, *cf, cmListener, log, bus)
			}
		} else {
			<-ctx.Done()
		}
	case <-ctx.Done():
	case <-gctx.Done():
	}
	stopServer()
	err = g.Wait()
	log.Info("minictl stopped")
	if clusterErr != nil {
		return clusterErr
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// connectionBudget raises the process's open file limit as far as it goes
// and returns the budget of connections its listeners share: the limit
// less a reserve for etcd and the process's own clients, so that a flood
// of connections is refused at the door instead of starving etcd of
// descriptors.
func connectionBudget(log *slog.Logger) *serving.Budget {
	limit, err := serving.RaiseFileLimit()
	if err != nil {
		log.Warn("open file limit not raised", "err", err)
	}
	if limit == 0 {
		limit = 1 << 20
	}
	b := serving.NewBudget(serving.ConnectionsFor(limit), log)
	log.Debug("connection budget", "openFileLimit", limit, "maxConnections", b.Max())
	return b
}

// noLimitIfZero turns a limit flag where 0 means none, as kube-apiserver's
// in-flight flags, into apiserver.Config's spelling of none.
func noLimitIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// defaultEtcdClientURL is up's --etcd-client-url: etcd's own default.
const defaultEtcdClientURL = "http://127.0.0.1:2379"

// etcdClientURL is the embedded etcd's client URL: u when its port is
// free, else (for the default, not for a URL the user gave) the same URL
// with port 0, which the store turns into a free port.
func etcdClientURL(u string, given bool) (string, error) {
	host := strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://")
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		return "", fmt.Errorf("invalid value %q for --etcd-client-url: not a URL such as %s", u, defaultEtcdClientURL)
	}
	if port == "0" {
		return u, nil
	}
	ln, err := net.Listen("tcp", host)
	if err == nil {
		ln.Close()
		return u, nil
	}
	if given {
		return "", fmt.Errorf("--etcd-client-url %s: %s; give --etcd-client-url another port (port 0 picks a free one)", u, listenProblem(err))
	}
	return "http://" + net.JoinHostPort(h, "0"), nil
}

// listenFlag listens on addr, the value of --name. When addr is taken and
// fallback is set (the flag was left at its default), it listens on a free
// port of the same host instead; otherwise the error says which flag
// changes the address.
func listenFlag(name, addr string, fallback bool, log *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil && fallback && errors.Is(err, syscall.EADDRINUSE) {
		host, _, _ := net.SplitHostPort(addr)
		log.Debug("port taken; using a free one", "flag", name, "wanted", addr)
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
	}
	if err != nil {
		return nil, fmt.Errorf("--%s %s: %s; give --%s another address (port 0 picks a free one)", name, addr, listenProblem(err), name)
	}
	return ln, nil
}

// listenProblem is why a listen failed, in a few words.
func listenProblem(err error) string {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return "the port is in use by another program (another minictl?)"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "this machine has no such address"
	case errors.Is(err, syscall.EACCES):
		return "permission denied (ports below 1024 need privileges)"
	}
	return err.Error()
}

// recordOf is the record of the cluster serve runs.
func recordOf(url string, secure *securePort, sf serverFlags, cfg store.Config, st *store.Store, cf *clusterFlags, cmListener net.Listener) clusterRecord {
	r := clusterRecord{PID: os.Getpid(), API: url}
	if secure != nil {
		r.SecureAPI = secure.url()
		if secure.pki != nil {
			r.Kubeconfig = sf.secure.kubeconfigOut
		}
	}
	if len(cfg.Endpoints) == 0 {
		r.Etcd = st.Endpoints()
		r.EtcdPeer = st.PeerURLs()
	}
	if cf != nil {
		if cf.runCM && cmListener != nil {
			r.ControllerManager = "http://" + cmListener.Addr().String()
		}
		if cf.ccmListener != nil {
			r.CloudControllerManager = "http://" + cf.ccmListener.Addr().String()
		}
		if cf.cloud != nil {
			r.Cloud = cf.cloud.url
		}
	}
	return r
}

// heldWriter holds what is written to it until release, then writes it,
// and everything after, to w.
type heldWriter struct {
	mu   sync.Mutex
	w    io.Writer
	buf  bytes.Buffer
	held bool
}

func (h *heldWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		return h.buf.Write(p)
	}
	return h.w.Write(p)
}

// release writes what was held, and stops holding.
func (h *heldWriter) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.held = false
		_, _ = h.w.Write(h.buf.Bytes())
		h.buf.Reset()
	}
}

// Unwrap is the writer behind h (isTerminal looks there).
func (h *heldWriter) Unwrap() io.Writer { return h.w }
