// Package testenv starts a real minictl API server for tests: an embedded
// etcd in a temporary directory and the API server on a free loopback
// port. Nothing is mocked.
package testenv

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/store"
)

// Env is one running API server and its etcd.
type Env struct {
	URL    string // base URL of the API server, "http://127.0.0.1:port"
	Store  *store.Store
	Server *apiserver.Server

	t       testing.TB
	dataDir string
	addr    string
	cfg     apiserver.Config
	cancel  context.CancelFunc
	done    chan struct{}
}

// Options adjust the server a test starts.
type Options struct {
	// Server is the API server's configuration; Store is filled in.
	Server apiserver.Config
	// Storage, if set, makes what the API server runs on from the real
	// etcd store: a wrapper that fails on purpose, say. Nil: the store.
	Storage func(*store.Store) apiserver.Storage
	// Etcd, if set, is the client URL of the etcd to use (one the test
	// runs, with package etcdtest say); empty: an embedded etcd in a
	// temporary directory.
	Etcd string
}

// Widgets returns a new catalogue entry for a kind nobody compiled in:
// widgets.example.com/v1, kind Widget, namespaced, with no Go type (its
// objects are unstructured), as a custom resource's would be. Tests serve
// it with Options{Server: apiserver.Config{Resources:
// api.Resources().With(w)}} and hand the same catalogue to what they test,
// to show that one catalogue entry is all a new kind needs.
func Widgets() *api.Resource {
	return &api.Resource{
		Group: "example.com", Version: "v1", Kind: "Widget", Plural: "widgets", Singular: "widget",
		Namespaced: true, New: api.NewUnstructured,
	}
}

// Start starts etcd and the API server, waits until /readyz is OK, and
// stops both when the test ends.
func Start(t testing.TB) *Env { return StartWith(t, Options{}) }

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *Env {
	t.Helper()
	e := &Env{t: t, dataDir: t.TempDir(), cfg: opts.Server}
	cfg := store.Config{DataDir: e.dataDir, ClientURL: "http://127.0.0.1:0", RequestTimeout: opts.Server.RequestTimeout}
	if opts.Etcd != "" {
		cfg = store.Config{Endpoints: []string{opts.Etcd}, RequestTimeout: opts.Server.RequestTimeout}
	}
	st, err := store.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	e.Store = st
	t.Cleanup(func() { _ = st.Close() })
	e.cfg.Store = st
	if opts.Storage != nil {
		e.cfg.Store = opts.Storage(st)
	}
	e.startServer()
	t.Cleanup(e.StopServer)
	return e
}

func (e *Env) startServer() {
	e.t.Helper()
	addr := e.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := listenRetry(addr)
	if err != nil {
		e.t.Fatalf("listen: %v", err)
	}
	e.addr = ln.Addr().String()
	e.URL = "http://" + e.addr
	srv, err := apiserver.New(e.cfg)
	if err != nil {
		e.t.Fatalf("new apiserver: %v", err)
	}
	e.Server = srv
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.done = make(chan struct{})
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_ = srv.Run(ctx)
	}()
	go func() {
		defer close(e.done)
		_ = srv.Serve(ctx, ln)
		<-runDone
	}()
	select {
	case <-srv.Ready():
	case <-time.After(30 * time.Second):
		e.t.Fatalf("api server not ready after 30s")
	}
}

// StopServer stops the API server (not etcd) and waits until it has
// stopped; every watch ends. It is safe to call twice.
func (e *Env) StopServer() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	<-e.done
	e.cancel = nil
}

// RestartServer stops the API server and starts a new one on the same
// address and etcd, as a restarted kube-apiserver would come back.
func (e *Env) RestartServer() {
	e.t.Helper()
	e.StopServer()
	e.startServer()
}

// Client is an HTTP client with a timeout fit for tests.
func (e *Env) Client() *http.Client { return &http.Client{Timeout: 30 * time.Second} }

// listenRetry listens on addr, retrying briefly: after a restart the old
// listener's port may take a moment to be free.
func listenRetry(addr string) (net.Listener, error) {
	var err error
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, err
}
