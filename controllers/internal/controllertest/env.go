package controllertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/internal/testenv"
)

// Env is a running API server on a real etcd, a client of it, and an
// informer factory on that client that nothing has started yet. The
// factory's informers transform objects as the controller manager's do
// (informer.Lean), so that a controller that changed a cached object,
// or a part pods share, would do it in its tests too.
type Env struct {
	Client    *client.RESTClient
	Informers *informer.SharedInformerFactory
}

// Options adjust what StartWith starts.
type Options struct {
	// ClientTimeout bounds each non-watch request of Env.Client; 0 = none.
	ClientTimeout time.Duration
	// Resources is the catalogue the API server serves; nil:
	// api.Resources().
	Resources api.Catalogue
	// AuthorizationModes are the API server's; with "RBAC" it starts
	// with Kubernetes' bootstrap roles (admin, edit, view, ...).
	AuthorizationModes []string
	// MetricResolution is how often the API server scrapes the kubelets
	// for metrics.k8s.io; 0: its default.
	MetricResolution time.Duration
}

// Start starts an API server, which stops when the test ends, and returns
// a client of it whose requests time out after 20s.
func Start(t testing.TB) *Env {
	t.Helper()
	return StartWith(t, Options{ClientTimeout: 20 * time.Second})
}

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *Env {
	t.Helper()
	srv := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{Resources: opts.Resources, AuthorizationModes: opts.AuthorizationModes, MetricResolution: opts.MetricResolution}})
	rc, err := client.New(&client.Config{Server: srv.URL, Timeout: opts.ClientTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Client: rc, Informers: informer.NewSharedInformerFactory(rc, informer.FactoryOptions{Transform: informer.Lean})}
}

// Controller is what Run runs: Run blocks until ctx is done.
type Controller interface {
	Run(ctx context.Context, workers int)
}

// Run starts informers and runs each controller, with workers workers, in
// its own goroutine. They run until the test ends or stop is called: stop
// stops the controllers, waits for them to return, and then shuts the
// informers down. stop may be called more than once.
func Run(t testing.TB, informers *informer.SharedInformerFactory, workers int, controllers ...Controller) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	informers.Start(ctx)
	var wg sync.WaitGroup
	for _, c := range controllers {
		wg.Go(func() { c.Run(ctx, workers) })
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			informers.Shutdown()
		})
	}
	t.Cleanup(stop)
	return stop
}
