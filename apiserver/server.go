package apiserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/auth/audit"
	"github.com/minictl/minictl/auth/authenticator"
	"github.com/minictl/minictl/auth/authorizer"
	"github.com/minictl/minictl/auth/rbac"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/internal/serving"
	"github.com/minictl/minictl/internal/timeline"
	"github.com/minictl/minictl/internal/webhook"
	"github.com/minictl/minictl/metricsserver"
	"github.com/minictl/minictl/ui"
)

// DefaultEventTTL is how long an Event lives after its last write, as
// kube-apiserver's --event-ttl defaults it.
const DefaultEventTTL = time.Hour

// Config configures a Server. Only Store is required.
type Config struct {
	// Store is the etcd the server keeps every object in: a *store.Store,
	// or anything that keeps its contract (see Storage).
	Store  Storage
	Logger *slog.Logger // nil: discard
	// Resources is the catalogue the server serves: storage, watch cache,
	// routes, discovery and OpenAPI for each entry. nil: api.Resources().
	Resources api.Catalogue
	// Registry receives the server's metrics and is served at /metrics;
	// nil: a new registry.
	Registry *prometheus.Registry
	// MaxRequestBodyBytes: 0 means DefaultMaxRequestBodyBytes.
	MaxRequestBodyBytes int64
	// WatchCacheSize is the number of events each resource's watch cache
	// keeps for watchers that resume (0: 10000). WatcherBuffer is the number
	// of events buffered per watcher before it is closed as too slow
	// (0: 1000).
	WatchCacheSize, WatcherBuffer int
	// WatchCacheMaxBytes bounds the encoded bytes of the events each watch
	// cache keeps (0: DefaultWatchCacheMaxBytes), and WatchCacheWindow how
	// long it keeps them, beyond its newest 100 (0: DefaultWatchCacheWindow,
	// kube-apiserver's 75s).
	WatchCacheMaxBytes int64
	WatchCacheWindow   time.Duration
	// WatchCacheSizes are kube-apiserver's --watch-cache-sizes: a resource
	// given 0 is served without a watch cache, from etcd
	// (watchcache_uncached.go); any other size keeps its cache. They
	// override DefaultWatchCacheSizes, which serves Events from etcd.
	WatchCacheSizes map[schema.GroupResource]int
	// EventTTL is how long an Event lives after its last write before
	// etcd deletes it, as kube-apiserver's --event-ttl (0: DefaultEventTTL).
	EventTTL time.Duration
	// BookmarkInterval is how often watchers that allow bookmarks get one
	// (0: 10s).
	BookmarkInterval time.Duration
	// Timeline, if set, is served at /debug/timeline for `minictl trace`.
	Timeline *timeline.Bus
	// DefaultNotReadyTolerationSeconds and
	// DefaultUnreachableTolerationSeconds are how long a new pod tolerates
	// its node being not-ready or unreachable before it is evicted, unless
	// it says otherwise (kube-apiserver's flags of the same names; 0: 300).
	DefaultNotReadyTolerationSeconds, DefaultUnreachableTolerationSeconds int64
	// ReadHeaderTimeout, ReadTimeout (headers and body: a stalled upload
	// is dropped), WriteTimeout (watches extend theirs as they write) and
	// IdleTimeout (keep-alive) bound every connection Serve accepts; 0:
	// the defaults of internal/serving.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// RequestTimeout bounds every request but a watch, and every call to
	// etcd it makes (kube-apiserver's --request-timeout); one that runs out
	// is answered 504 Timeout. 0: DefaultRequestTimeout.
	RequestTimeout time.Duration
	// CORSAllowedOrigins are regular expressions of the browser origins
	// (besides the server's own) allowed to call the API, as
	// kube-apiserver's --cors-allowed-origins; every other cross-origin
	// request is refused (crosssite.go).
	CORSAllowedOrigins []string
	// MaxRequestsInflight and MaxMutatingRequestsInflight are how many
	// read-only and mutating requests of clients other than the system's
	// own components may run at once, as kube-apiserver's
	// --max-requests-inflight and --max-mutating-requests-inflight: a
	// request beyond them is answered 429 TooManyRequests at once
	// (inflight.go). 0: DefaultMaxRequestsInflight and
	// DefaultMaxMutatingRequestsInflight; negative: no limit. The system's
	// components have seats of their own (flowschema.go).
	MaxRequestsInflight, MaxMutatingRequestsInflight int
	// AdvertiseAddress is the address the server publishes in the
	// kubernetes Service's Endpoints (kube-apiserver's
	// --advertise-address); invalid: chosen from the listener
	// (kubernetesservice.go).
	AdvertiseAddress netip.Addr
	// ServiceClusterIPRange is the range cluster IPs come from; the
	// kubernetes Service has its first address. Invalid:
	// DefaultServiceClusterIPRange.
	ServiceClusterIPRange netip.Prefix
	// ServiceNodePortRange is the range NodePort and LoadBalancer
	// Services' node ports come from (kube-apiserver's
	// --service-node-port-range); zero: DefaultServiceNodePortRange.
	ServiceNodePortRange PortRange

	// Authenticator proves who the secure port's requests come from
	// (auth.go); nil: nobody is authenticated there, and every request is
	// anonymous (or refused, without AnonymousAuth). The plain listener
	// needs none: everything on it is the admin.
	Authenticator authenticator.Request
	// AnonymousAuth lets the secure port's requests without credentials
	// through as system:anonymous, for authorization to judge, as
	// kube-apiserver's --anonymous-auth (its default is true); false
	// answers them 401.
	AnonymousAuth bool
	// AuthorizationModes are the authorizers asked in turn after
	// system:masters, by kube-apiserver's --authorization-mode names:
	// "AlwaysAllow", "Node", "RBAC". Empty: AlwaysAllow.
	AuthorizationModes []string
	// Authentication configures the secure port's authenticators
	// (authentication.go); Authenticator, if set, is asked after them.
	Authentication Authentication
	// ServiceAccountAdmission runs kube's ServiceAccount admission plugin
	// on new pods: their ServiceAccount must exist, and its token is
	// mounted (serviceaccount_admission.go).
	ServiceAccountAdmission bool
	// EnableAdmissionPlugins turns on admission plugins that are off
	// unless asked for, by kube-apiserver's --enable-admission-plugins
	// names: "NodeRestriction" (noderestriction.go). Naming a plugin that
	// is always on changes nothing; an unknown name is an error.
	EnableAdmissionPlugins []string
	// Authorizer, when set, is asked after system:masters in place of
	// the AuthorizationModes: a program that embeds the server and
	// decides access its own way.
	Authorizer authorizer.Authorizer
	// TokenAuthenticator authenticates the bearer tokens a TokenReview
	// asks about, in place of Authentication's token authenticators
	// (the token file, ServiceAccount and bootstrap tokens); with
	// neither, every token is answered unauthenticated.
	TokenAuthenticator authenticator.Token
	// RuleResolver lists what a user may do, for SelfSubjectRulesReview,
	// in place of the RBAC mode's rules; with neither, nothing is listed.
	RuleResolver authorizer.RuleResolver
	// AuditLog receives the audit Events, one JSON line each
	// (kube-apiserver's --audit-log-path; audit.OpenLog opens one); nil:
	// no audit log. AuditPolicy says what is recorded of which request
	// (--audit-policy-file); nil: audit.DefaultPolicy, everything at the
	// Metadata level.
	AuditLog    io.Writer
	AuditPolicy *audit.Policy
	// SecurePort says the server will be given a secure port
	// (ServeSecure): the kubernetes Service then publishes its port, not
	// the plain listener's.
	SecurePort bool
	// MetricResolution is how often the server's metrics server scrapes
	// the kubelets for the resource metrics API (metrics.k8s.io), as
	// metrics-server's --metric-resolution; 0:
	// metricsserver.DefaultResolution.
	MetricResolution time.Duration
}

// Server is minictl's API server: kube-apiserver's REST API over one etcd.
type Server struct {
	store    Storage
	log      *slog.Logger
	registry *prometheus.Registry
	metrics  *metrics
	maxBody  int64
	bookmark time.Duration
	timeline *timeline.Bus
	timeouts serving.Timeouts
	flow     *flowControl // bounds the requests in flight
	// requestTimeout is Config.RequestTimeout, defaulted.
	requestTimeout time.Duration
	// corsOrigins are the origins allowed across sites.
	corsOrigins []*regexp.Regexp
	// tolerations are the default NoExecute toleration seconds, by taint.
	tolerations map[string]int64
	// serviceRange is Config.ServiceClusterIPRange, defaulted.
	serviceRange netip.Prefix
	// alloc allocates Services' cluster IPs and node ports
	// (servicealloc.go).
	alloc *serviceAllocator
	// advertiseAddr is Config.AdvertiseAddress; advertised, where the
	// server says it is, is set from it and the first listener Serve is
	// given, before listening is closed.
	advertiseAddr netip.Addr
	advertised    netip.AddrPort
	listening     chan struct{}
	listenOnce    sync.Once

	// live is what the server serves now (served.go): the built-ins and
	// the custom resources of established definitions (crd.go).
	live       atomic.Pointer[served]
	builtins   api.Catalogue // Config.Resources: always served, first
	caches     runningCaches
	crds       *crdController
	quotaLocks quotaLocks
	// cacheSize and watcherBuffer size every watch cache
	// (Config.WatchCacheSize, Config.WatcherBuffer).
	cacheSize, watcherBuffer int
	cacheMaxBytes            int64                  // Config.WatchCacheMaxBytes
	cacheWindow              time.Duration          // Config.WatchCacheWindow
	uncached                 map[*api.Resource]bool // served without a watch cache: Config.WatchCacheSizes
	eventTTL                 time.Duration          // Config.EventTTL

	// webhooks calls admission webhooks; mutatingHooks and validatingHooks
	// are their configurations as the watch caches last had them.
	webhooks *webhook.Client
	// kubelets reaches the kubelets, for pods' logs (podlog.go).
	kubelets *http.Client
	// resourceMetrics scrapes the kubelets for the resource metrics API
	// (resourcemetrics.go); Run runs it until ShutdownInitiated.
	resourceMetrics *metricsserver.Server
	// shutdownInitiated is closed by ShutdownInitiated.
	shutdownInitiated              chan struct{}
	initiateShutdownOnce           sync.Once
	mutatingHooks, validatingHooks hookSet
	// policies are the ValidatingAdmissionPolicies and their bindings,
	// compiled, as the watch caches last had them.
	policies policySet
	// applyConfigs are the apply configurations last parsed (apply.go).
	applyConfigs applyConfigCache

	// authenticator, anonymous and authorizer are the secure port's
	// authentication and every request's authorization (auth.go).
	authenticator authenticator.Request
	anonymous     bool
	authorizer    authorizer.Authorizer
	securePort    bool // Config.SecurePort
	// tokens authenticates bearer tokens alone, for TokenReview: the
	// token file, ServiceAccount and bootstrap tokens, or
	// Config.TokenAuthenticator; nil: none.
	tokens authenticator.Token
	// rules lists what a user may do, for SelfSubjectRulesReview: the
	// RBAC authorizer's resolver, or Config.RuleResolver; nil: nothing
	// is listed.
	rules authorizer.RuleResolver
	// rbac is the RBAC authorization mode, nil when it is not one of the
	// server's modes; rbacPolicy its index (rbac.go).
	rbac       *rbac.Authorizer
	rbacPolicy rbacPolicy
	// saIssuer issues the tokens of TokenRequests; nil: none are
	// (authentication.go, tokenrequest.go).
	saIssuer *tokenIssuer
	// apiAudiences are the audiences a token must be meant for here
	// (authentication.go), which a TokenReview asks about by default.
	apiAudiences []string
	// saAdmission is Config.ServiceAccountAdmission.
	saAdmission bool
	// nodeRestriction turns on the NodeRestriction admission plugin.
	nodeRestriction bool
	// auditLog writes the audit Events, at the levels auditPolicy says
	// (audit.go); nil: none.
	auditLog    *audit.Writer
	auditPolicy *audit.Policy

	handler http.Handler
	ready   chan struct{} // closed when caches are filled and the namespaces exist
	done    chan struct{} // closed when the server stops: ends every watch
	stop    sync.Once
	// historyLost receives (without blocking, so at most one is pending)
	// when a watch cache has listed a history that replaced one etcd lost:
	// the built-in namespaces went with it.
	historyLost chan struct{}
}

// New builds a Server. Nothing runs until Run.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("apiserver: a store is required")
	}
	s := &Server{
		store:    cfg.Store,
		log:      cfg.Logger,
		registry: cfg.Registry,
		maxBody:  cfg.MaxRequestBodyBytes,
		bookmark: cfg.BookmarkInterval,
		timeline: cfg.Timeline,
		timeouts: serving.Timeouts{
			ReadHeader: cfg.ReadHeaderTimeout, Read: cfg.ReadTimeout,
			Write: cfg.WriteTimeout, Idle: cfg.IdleTimeout,
		},
		tolerations: map[string]int64{
			corev1.TaintNodeNotReady:    cmp.Or(cfg.DefaultNotReadyTolerationSeconds, api.DefaultTolerationSeconds),
			corev1.TaintNodeUnreachable: cmp.Or(cfg.DefaultUnreachableTolerationSeconds, api.DefaultTolerationSeconds),
		},
		requestTimeout:    cmp.Or(cfg.RequestTimeout, DefaultRequestTimeout),
		serviceRange:      cfg.ServiceClusterIPRange,
		advertiseAddr:     cfg.AdvertiseAddress,
		listening:         make(chan struct{}),
		builtins:          cfg.Resources,
		cacheSize:         cfg.WatchCacheSize,
		watcherBuffer:     cfg.WatcherBuffer,
		cacheMaxBytes:     cfg.WatchCacheMaxBytes,
		cacheWindow:       cfg.WatchCacheWindow,
		eventTTL:          cmp.Or(cfg.EventTTL, DefaultEventTTL),
		ready:             make(chan struct{}),
		done:              make(chan struct{}),
		historyLost:       make(chan struct{}, 1),
		shutdownInitiated: make(chan struct{}),
	}
	var err error
	if s.corsOrigins, err = compileOrigins(cfg.CORSAllowedOrigins); err != nil {
		return nil, err
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.builtins == nil {
		s.builtins = api.Resources()
	}
	if s.uncached, err = uncachedResources(s.builtins, cfg.WatchCacheSizes); err != nil {
		return nil, err
	}
	if s.eventTTL < 0 {
		return nil, fmt.Errorf("apiserver: event TTL %v: give how long an Event lives, such as 1h", s.eventTTL)
	}
	if !s.serviceRange.IsValid() {
		s.serviceRange = DefaultServiceClusterIPRange
	}
	if !s.serviceRange.Addr().Is4() || s.serviceRange.Bits() > 30 {
		return nil, fmt.Errorf("apiserver: service cluster IP range %s: Services are single-stack IPv4, and need a range of at least 4 addresses", s.serviceRange)
	}
	s.alloc = newServiceAllocator(s.serviceRange, cmp.Or(cfg.ServiceNodePortRange, DefaultServiceNodePortRange))
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	if s.maxBody == 0 {
		s.maxBody = DefaultMaxRequestBodyBytes
	}
	if s.bookmark == 0 {
		s.bookmark = 10 * time.Second
	}
	s.metrics = newMetrics(s.registry)
	s.webhooks = webhook.NewClient(webhook.Options{
		Resolver: webhook.ResolverFunc(s.resolveService), MaxResponseBytes: 2 * s.maxBody,
	})
	s.kubelets = newKubeletClient()
	s.resourceMetrics = metricsserver.New(metricsserver.Options{
		Nodes: s.nodesToScrape, Resolution: cfg.MetricResolution, Logger: s.log,
	})
	s.flow = newFlowControl(func() api.Catalogue { return s.serving().resources }, flowControlConfig{
		maxReadOnly: inflightLimit(cfg.MaxRequestsInflight, DefaultMaxRequestsInflight),
		maxMutating: inflightLimit(cfg.MaxMutatingRequestsInflight, DefaultMaxMutatingRequestsInflight),
		levels:      systemLevels,
		queueWait:   queueWait,
	}, s.metrics)
	s.live.Store(s.newServed(s.builtins, nil))
	s.crds = newCRDController(s)
	s.anonymous, s.saAdmission, s.securePort = cfg.AnonymousAuth, cfg.ServiceAccountAdmission, cfg.SecurePort
	if err := s.setupAuthentication(cfg); err != nil {
		return nil, err
	}
	if s.authorizer, err = s.newAuthorizer(cfg.AuthorizationModes); err != nil {
		return nil, err
	}
	if err := s.enableAdmissionPlugins(cfg.EnableAdmissionPlugins); err != nil {
		return nil, err
	}
	if cfg.Authorizer != nil {
		s.authorizer = authorizer.Union(authorizer.Privileged, cfg.Authorizer)
	}
	if cfg.TokenAuthenticator != nil {
		s.tokens = cfg.TokenAuthenticator
	}
	if cfg.RuleResolver != nil {
		s.rules = cfg.RuleResolver
	}
	if cfg.AuditLog != nil {
		s.auditLog, s.auditPolicy = audit.NewWriter(cfg.AuditLog), cmp.Or(cfg.AuditPolicy, audit.DefaultPolicy())
	}
	s.handler = s.routes()
	return s, nil
}

// inflightLimit is a Config's in-flight limit: 0 takes def, a negative
// value means none (-1).
func inflightLimit(n, def int) int {
	switch {
	case n == 0:
		return def
	case n < 0:
		return -1
	}
	return n
}

// Ready is closed once the server can answer: every watch cache is filled,
// the custom resources of the established definitions are served, and
// the built-in namespaces, the bootstrap RBAC policy (with the RBAC mode)
// and the kubernetes Service exist (the latter once Serve has been given
// a listener).
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Run starts the watch caches and creates the built-in namespaces, then
// blocks until ctx ends, creating the namespaces again if etcd loses its
// history. When it returns, every watch has ended.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel() // on an early error too, so the caches stop
		s.stop.Do(func() { close(s.done) })
		wg.Wait()
		s.caches.wait()
	}()
	builtins := s.serving().watchCaches()
	for _, c := range builtins {
		s.caches.start(ctx, c)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.sendBookmarks(ctx)
	}()
	for _, c := range builtins {
		if err := c.waitFresh(ctx, 0); err != nil {
			for ctx.Err() == nil && c.waitFresh(ctx, 0) != nil {
			}
		}
	}
	// The definitions' controllers serve what is established before the
	// server is ready, and keep the custom resources served until it stops.
	synced := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.crds.run(ctx, synced)
	}()
	select {
	case <-synced:
	case <-ctx.Done():
		return nil
	}
	if !s.keepNamespaces(ctx) || !s.keepBootstrapPolicy(ctx) || !s.startServiceAllocation(ctx) || !s.publishKubernetesService(ctx) ||
		!s.retry(ctx, "creating the default storage class", s.ensureDefaultStorageClass) {
		return nil
	}
	close(s.ready)
	s.log.Info("api server ready")
	// The kubelets go first when the cluster stops: the scraper stops
	// when shutdown begins, not once the server has drained.
	wg.Go(func() {
		mctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wg.Go(func() {
			select {
			case <-s.shutdownInitiated:
				cancel()
			case <-mctx.Done():
			}
		})
		s.resourceMetrics.Run(mctx)
	})
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.keepKubernetesService(ctx)
	}()
	go func() {
		defer wg.Done()
		s.keepServiceAllocations(ctx)
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.historyLost:
			if !s.keepNamespaces(ctx) || !s.keepBootstrapPolicy(ctx) {
				return nil
			}
		}
	}
}

// ShutdownInitiated says the cluster has begun to stop, as
// kube-apiserver's ShutdownInitiated signal does: the server still serves
// until its context ends, but the kubelets may already be gone, so the
// resource metrics scraper stops now rather than report them missing.
func (s *Server) ShutdownInitiated() {
	s.initiateShutdownOnce.Do(func() { close(s.shutdownInitiated) })
}

// noteHistoryLost tells Run that etcd lost its history.
func (s *Server) noteHistoryLost() {
	select {
	case s.historyLost <- struct{}{}:
	default: // one is pending already
	}
}

func (s *Server) sendBookmarks(ctx context.Context) {
	t := time.NewTicker(s.bookmark)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, c := range s.serving().watchCaches() {
				c.bookmark()
			}
		}
	}
}

// protectedNamespaces exist from the start and may not be deleted: the
// system's own objects live there (kube-node-lease holds the kubelets'
// heartbeats, which no kubelet could renew in a deleted namespace).
var protectedNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// keepNamespaces creates the namespaces every cluster has, as
// kube-apiserver's system namespaces controller does, retrying while etcd
// fails; false if ctx ended first.
func (s *Server) keepNamespaces(ctx context.Context) bool {
	return s.retry(ctx, "creating the built-in namespaces", s.ensureNamespaces)
}

// keepBootstrapPolicy reconciles the bootstrap RBAC policy, with RBAC
// among the server's modes, retrying while etcd fails; false if ctx ended
// first.
func (s *Server) keepBootstrapPolicy(ctx context.Context) bool {
	if s.rbac == nil {
		return true
	}
	return s.retry(ctx, "reconciling the bootstrap RBAC policy", s.reconcileBootstrapPolicy)
}

// retry runs fn until it succeeds, backing off as a watch cache's relist
// does while etcd fails; false if ctx ended first. what names the work in
// the log.
func (s *Server) retry(ctx context.Context, what string, fn func(context.Context) error) bool {
	backoff := firstRelistBackoff
	for {
		err := fn(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		s.log.Warn(what+" failed; retrying", "err", err, "backoff", backoff)
		if !clock.Sleep(ctx, clock.Real{}, backoff) {
			return false
		}
		backoff = min(2*backoff, maxRelistBackoff)
	}
}

// ensureNamespaces creates the namespaces every cluster has.
func (s *Server) ensureNamespaces(ctx context.Context) error {
	rs := s.serving().stores[api.Namespaces]
	for _, name := range protectedNamespaces {
		ns := api.Namespaces.NewObject()
		ns.SetName(name)
		cctx, cancel := context.WithTimeout(ctx, s.requestTimeout)
		_, err := s.createObject(cctx, rs, ns, createOptions{manager: "kube-apiserver"})
		cancel()
		if err != nil && !isAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return nil
}

// Serve answers HTTP on ln until ctx ends, then shuts down gracefully: it
// stops accepting, ends every watch, and waits for requests in flight.
// Every connection is bounded by the Config's timeouts, browsers are kept
// out as crosssite.go says, and the requests in flight are bounded as
// inflight.go says.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.serve(ctx, ln, false)
}

// shutdownGrace is how long requests in flight may take to finish once the
// server stops; what is left then is closed.
const shutdownGrace = 10 * time.Second

// serve answers on ln until ctx ends, the secure port's when secure.
func (s *Server) serve(ctx context.Context, ln net.Listener, secure bool) error {
	if secure || !s.securePort {
		s.listenOnce.Do(func() {
			s.advertised = advertisedAddress(s.advertiseAddr, ln.Addr())
			close(s.listening)
		})
	}
	srv := s.timeouts.Server(s.chain(ln.Addr(), secure))
	srv.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	srv.Log = s.log
	srv.RegisterOnShutdown(func() { s.stop.Do(func() { close(s.done) }) }) // every watch ends
	err := srv.Run(ctx, ln, shutdownGrace)
	s.webhooks.Close() // its requests ended with the server's
	s.kubelets.CloseIdleConnections()
	return err
}

func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(s.recoverer)
	s.healthRoutes(r)
	r.Get("/version", s.version)
	r.Get("/debug/timeline", s.serveTimeline)
	// The web view (package ui): static files, authorised as non-resource
	// URLs like /version; what the page shows, it reads through the API.
	r.Get("/ui", http.RedirectHandler(ui.Prefix, http.StatusMovedPermanently).ServeHTTP)
	r.Method(http.MethodGet, ui.Prefix+"*", ui.Handler())
	r.Method(http.MethodHead, ui.Prefix+"*", ui.Handler())
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	r.Get("/openapi/v2", s.openAPIV2)
	r.Get("/openapi/v3", s.openAPIV3Discovery)
	r.Get("/openapi/v3/*", s.openAPIV3)
	// Discovery, with or without a trailing slash, as kube-apiserver.
	groupVersion := func(w http.ResponseWriter, r *http.Request) {
		s.resourceList(chi.URLParam(r, "group"), chi.URLParam(r, "version"))(w, r)
	}
	for _, slash := range []string{"", "/"} {
		r.Get("/api"+slash, s.apiVersions)
		r.Get("/apis"+slash, s.apiGroups)
		r.Get("/apis/{group}"+slash, s.apiGroup)
	}
	r.Get("/api/v1", s.resourceList("", "v1"))
	r.Get("/apis/{group}/{version}", groupVersion)
	r.HandleFunc("/api/v1/*", func(w http.ResponseWriter, r *http.Request) {
		if rest := chi.URLParam(r, "*"); rest != "" || r.Method != http.MethodGet {
			s.serveResource(w, r, "", "v1", rest)
			return
		}
		s.resourceList("", "v1")(w, r)
	})
	r.HandleFunc("/apis/{group}/{version}/*", func(w http.ResponseWriter, r *http.Request) {
		if rest := chi.URLParam(r, "*"); rest != "" || r.Method != http.MethodGet {
			s.serveResource(w, r, chi.URLParam(r, "group"), chi.URLParam(r, "version"), rest)
			return
		}
		groupVersion(w, r)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { writeStatus(w, newNotFoundPath(r.URL.Path)) })
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, newMethodNotAllowed(r.Method, r.URL.Path))
	})
	return r
}

// recoverer turns a panic in a handler into a 500 Status, so that no
// request can take the server down.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", p)
				writeStatus(w, fmt.Errorf("internal error: %v", p))
			}
		}()
		next.ServeHTTP(w, r)
	})
}
