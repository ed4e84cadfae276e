package testenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/cluster"
	"github.com/minictl/minictl/controllers"
	"github.com/minictl/minictl/store"
)

// readyTimeout bounds each wait of Start: for etcd, the API server, a
// CRD to be Established, the nodes. Past it, the test fails with what it
// was waiting for, rather than hang until go test's own timeout.
const readyTimeout = 30 * time.Second

// Env is one running control plane. Its fields are what a client needs;
// they do not change after Start.
type Env struct {
	// URL is the secure port, https://127.0.0.1:PORT: TLS, client
	// certificates and RBAC, as envtest's rest.Config Host.
	URL string
	// InsecureURL is the plain loopback listener, http://127.0.0.1:PORT:
	// every request on it acts as the admin, as behind kubectl proxy.
	InsecureURL string
	// CAData is the cluster's CA (PEM): it signs the secure port's
	// serving certificate and every user's client certificate.
	CAData []byte
	// CertData and KeyData are the admin's client certificate and key
	// (PEM): user minictl-admin in group system:masters.
	CertData, KeyData []byte
	// Kubeconfig is the admin's kubeconfig for the secure port, every
	// credential inline; KubeconfigPath is the same in a file, for
	// kubectl --kubeconfig and KUBECONFIG.
	Kubeconfig     []byte
	KubeconfigPath string
	// DataDir holds etcd's data, the keys and the kubeconfig: a
	// directory of the test's t.TempDir, removed when the test ends.
	DataDir string
	// WebhookInstallOptions is the Webhooks option, filled in: where the
	// test's webhook server must listen, and its certificate.
	WebhookInstallOptions WebhookInstallOptions

	t   testing.TB
	cfg config
	id  *identity
	log *slog.Logger

	// stops are undone in reverse order by Stop: each step of Start
	// pushes what undoes it as soon as it has succeeded, so that a Start
	// that fails half way stops what it started.
	mu    sync.Mutex
	stops []func()
	// clusterErr is the error the components stopped with, if they
	// stopped by themselves.
	clusterErr error
}

// Start starts a control plane for the test, and stops it when the test
// ends (t.Cleanup). Any failure to start ends the test with t.Fatal.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	// The directory first: cleanups run last-in first-out, so every
	// component is stopped before the directory is removed.
	dir := t.TempDir()
	e := &Env{t: t, cfg: cfg, DataDir: dir, log: cfg.logger}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	t.Cleanup(e.Stop)

	secure, plain := e.listen()
	e.URL, e.InsecureURL = "https://"+secure.Addr().String(), "http://"+plain.Addr().String()
	st := e.openStoreAndKeys()
	e.CAData, e.CertData, e.KeyData = e.id.ca.CertPEM, e.id.adminCert, e.id.adminKey
	e.Kubeconfig = kubeconfig(e.URL, e.CAData, e.CertData, e.KeyData, "minictl-admin")
	e.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(e.KubeconfigPath, e.Kubeconfig, 0o600); err != nil {
		t.Fatalf("testenv: write kubeconfig: %v", err)
	}
	e.serve(st, secure, plain)

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	rc := e.Client()
	e.installCRDs(ctx, rc)
	e.installWebhooks(ctx, rc)
	e.runCluster(plain.Addr().String())
	e.waitCluster(ctx, rc)
	return e
}

// Stop stops everything Start started, last first: the controllers,
// scheduler and nodes, then the API server, then etcd. It runs at the
// test's cleanup; calling it earlier (a benchmark that starts many) is
// allowed, and a second call does nothing.
func (e *Env) Stop() {
	e.mu.Lock()
	stops := e.stops
	e.stops = nil
	e.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	e.mu.Lock()
	err := e.clusterErr
	e.clusterErr = nil
	e.mu.Unlock()
	if err != nil {
		e.t.Errorf("testenv: the cluster's components stopped on their own: %v", err)
	}
}

// onStop adds f to what Stop undoes.
func (e *Env) onStop(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stops = append(e.stops, f)
}

// Client is a minictl client of the plain listener, acting as the
// admin.
func (e *Env) Client() *client.RESTClient {
	rc, err := client.New(&client.Config{Server: e.InsecureURL, Timeout: readyTimeout})
	if err != nil {
		e.t.Fatalf("testenv: client: %v", err)
	}
	return rc
}

// listen opens the secure port and the plain listener, before anything
// runs, so that a taken port is a clear failure and not a hang.
func (e *Env) listen() (secure, plain net.Listener) {
	e.t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", e.cfg.port)
	secure, err := net.Listen("tcp", addr)
	if err != nil {
		e.t.Fatalf("testenv: the secure port %s is taken (%v): let Start choose a free port (no WithPort), or stop what listens there", addr, err)
	}
	e.onStop(func() { secure.Close() })
	plain, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatalf("testenv: listen on loopback: %v", err)
	}
	e.onStop(func() { plain.Close() })
	return secure, plain
}

// openStoreAndKeys starts etcd and makes the cluster's keys at once:
// etcd's start is most of Start's time, the keys would only add to it.
func (e *Env) openStoreAndKeys() *store.Store {
	e.t.Helper()
	scfg := store.Config{DataDir: filepath.Join(e.DataDir, "etcd"), ClientURL: "http://127.0.0.1:0", Logger: e.log,
		// The data dies with the test: what fsync protects against cannot
		// matter, and it is most of what a write costs.
		UnsafeNoFsync: true}
	if len(e.cfg.etcdEndpoints) > 0 {
		scfg = store.Config{Endpoints: e.cfg.etcdEndpoints, Logger: e.log}
	}
	var st *store.Store
	var g errgroup.Group
	g.Go(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		defer cancel()
		s, err := store.Open(ctx, scfg)
		if err != nil {
			return fmt.Errorf("start etcd: %w", err)
		}
		st = s
		return nil
	})
	g.Go(func() (err error) {
		if e.id, err = newIdentity(filepath.Join(e.DataDir, "pki")); err != nil {
			return fmt.Errorf("make the cluster's keys: %w", err)
		}
		return nil
	})
	err := g.Wait()
	if st != nil {
		e.onStop(func() { _ = st.Close() })
	}
	if err != nil {
		e.t.Fatalf("testenv: %v", err)
	}
	return st
}

// serve runs the API server on both listeners and waits until it is
// ready: its caches filled and the built-in namespaces made.
func (e *Env) serve(st *store.Store, secure, plain net.Listener) {
	e.t.Helper()
	srv, err := apiserver.New(apiserver.Config{
		Store: st, Logger: e.log,
		Authentication: apiserver.Authentication{
			ClientCA:                 e.id.ca.Pool(),
			ServiceAccountIssuer:     "https://kubernetes.default.svc.cluster.local",
			ServiceAccountSigningKey: e.id.saKey,
		},
		AnonymousAuth:          true,
		AuthorizationModes:     []string{"Node", "RBAC"},
		EnableAdmissionPlugins: []string{"NodeRestriction"},
		SecurePort:             true,
		// The ServiceAccount admission plugin refuses pods until their
		// ServiceAccount exists, which only the controllers make; envtest,
		// which runs none, turns it off as well.
		ServiceAccountAdmission:             e.controllerRuns("serviceaccount"),
		DefaultNotReadyTolerationSeconds:    e.fastOr(5, 0),
		DefaultUnreachableTolerationSeconds: e.fastOr(5, 0),
	})
	if err != nil {
		e.t.Fatalf("testenv: API server: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return srv.Run(ctx) })
	g.Go(func() error { return srv.Serve(ctx, plain) })
	g.Go(func() error { return srv.ServeSecure(ctx, secure, e.id.serving) })
	e.onStop(func() {
		cancel()
		_ = g.Wait()
	})
	select {
	case <-srv.Ready():
	case <-time.After(readyTimeout):
		e.t.Fatalf("testenv: the API server was not ready after %s", readyTimeout)
	}
}

func (e *Env) fastOr(fast, otherwise int64) int64 {
	if e.cfg.fast {
		return fast
	}
	return otherwise
}

// controllerRuns reports whether the controller manager runs the named
// controller.
func (e *Env) controllerRuns(name string) bool {
	if e.cfg.controllers == nil {
		return false
	}
	names, err := controllers.Enabled(e.cfg.controllers)
	if err != nil {
		return false
	}
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// runCluster starts the controller manager, the scheduler and the nodes
// the options ask for, on the plain listener (as minictl up's do when
// the components need no credentials of their own).
func (e *Env) runCluster(plainAddr string) {
	e.t.Helper()
	if e.cfg.controllers == nil && !e.cfg.scheduler && e.cfg.nodes == 0 {
		return
	}
	if _, err := controllers.Enabled(e.cfg.controllers); e.cfg.controllers != nil && err != nil {
		e.t.Fatalf("testenv: WithControllers(%q): %v", e.cfg.controllers, err)
	}
	connect, err := cluster.ProxyConnector("http://" + plainAddr)
	if err != nil {
		e.t.Fatalf("testenv: %v", err)
	}
	cc := cluster.Config{Connect: connect, Scheduler: e.cfg.scheduler, Nodes: e.cfg.nodes, Logger: e.log}
	if e.cfg.controllers != nil {
		cm := controllers.DefaultConfig()
		cm.Controllers = e.cfg.controllers
		cm.LeaderElect = false // one manager per Env: nobody to elect
		cm.Signing.CertFile, cm.Signing.KeyFile = e.id.caFile, e.id.caKeyFile
		cm.Credentials.ServiceAccountPrivateKeyFile = e.id.saKeyFile
		cm.Credentials.RootCAFile = e.id.caFile
		cm.UseServiceAccountCredentials = false
		if e.cfg.fast {
			cluster.FastControllerManager(&cm, nil)
		}
		cc.ControllerManager = &cm
	}
	if e.cfg.fast {
		cluster.FastKubelet(&cc.Kubelet, nil)
		cc.BindTimeout = cluster.FastBindTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := cluster.Run(ctx, cc); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			e.mu.Lock()
			e.clusterErr = err
			e.mu.Unlock()
		}
	}()
	e.onStop(func() {
		cancel()
		<-done
	})
}
