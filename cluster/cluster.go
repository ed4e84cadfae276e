// Package cluster runs the parts of a cluster that act through the API,
// in one process: the controller manager, the scheduler and simulated
// nodes. It is what `minictl up` starts around its API server, and what
// package testenv starts inside a test.
//
// Properties:
//   - Every component reaches the API server through the client a
//     Connector gives it, as the user it acts as; none touches etcd or
//     the API server's memory, exactly as in Kubernetes.
//   - Run returns only after every goroutine it started has stopped: when
//     its context ends, or when a component fails (then with that error,
//     having stopped the rest).
//
// Design: cluster.go runs the components; connect.go gives them their
// clients; fast.go scales their timings down (`minictl up --fast`).
package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/minictl/minictl/auth/user"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/kubelet"
	"github.com/minictl/minictl/scheduler"
)

// Config says which components run, and how.
type Config struct {
	// Connect gives each component its client. Required.
	Connect Connector
	// ControllerManager, when set, is the controller manager's
	// configuration, and the controller manager runs.
	ControllerManager *controllers.Config
	// ControllerManagerListener, when set, is where the controller
	// manager serves /healthz and /metrics; Run closes it.
	ControllerManagerListener net.Listener
	// Scheduler runs the default scheduler.
	Scheduler bool
	// BindTimeout is how long the scheduler waits for a pod's volume
	// claims to bind; 0: the scheduler's default.
	BindTimeout time.Duration
	// Nodes is how many simulated nodes run, named node-1, node-2, ...
	Nodes int
	// Kubelet is each simulated kubelet's configuration; Client,
	// NodeName, Recorder, Logger and Address are filled in per node.
	Kubelet KubeletConfig
	// Logger receives every component's logs; nil discards them.
	Logger *slog.Logger
}

// KubeletConfig are the simulated kubelets' knobs, under the names of
// kubelet.Options; zero values are the kubelet's defaults.
type KubeletConfig struct {
	HeartbeatInterval, StatusUpdateInterval time.Duration
	NodeStatusReportFrequency               time.Duration
	BackOffBase, MaxBackOff                 time.Duration
	VolumeMountTimeout                      time.Duration
	// Port is where each kubelet serves /containerLogs on its node
	// address; 0: a free port.
	Port int
}

// NodeName is the name of node i, counting from 1.
func NodeName(i int) string { return fmt.Sprintf("node-%d", i) }

// NodeAddress is node i's address (counting from 1): a loopback address
// of its own, where its kubelet serves; 127.0.1.<i> for the first 255,
// then on through 127.0.2.0 and up, so that no two nodes share one.
func NodeAddress(i int) string {
	n := 1<<8 + i // past 127.0.0.0
	return fmt.Sprintf("127.%d.%d.%d", n>>16&0xff, n>>8&0xff, n&0xff)
}

// Run runs the components cfg names until ctx ends or one of them fails,
// and returns once all have stopped.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Connect == nil {
		return fmt.Errorf("cluster: a Connector is required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	run := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && ctx.Err() == nil {
				select {
				case errc <- fmt.Errorf("%s: %w", name, err):
				default:
				}
				cancel()
			}
		}()
	}
	err := start(ctx, cfg, log, run)
	if err != nil {
		cancel()
	}
	wg.Wait()
	if err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// start makes each component's client and starts it with run; an error
// means a component could not be made, and the caller stops the rest.
func start(ctx context.Context, cfg Config, log *slog.Logger, run func(string, func() error)) error {
	if cfg.ControllerManager != nil {
		rc, err := cfg.Connect(user.KubeControllerManager)
		if err != nil {
			return err
		}
		mgr, err := controllers.NewManager(rc, *cfg.ControllerManager, log)
		if err != nil {
			return err
		}
		run("controller-manager", func() error { return mgr.Run(ctx) })
		if ln := cfg.ControllerManagerListener; ln != nil {
			run("controller-manager server", func() error { return mgr.Serve(ctx, ln) })
		}
	} else if cfg.ControllerManagerListener != nil {
		cfg.ControllerManagerListener.Close()
	}
	if cfg.Scheduler {
		rc, err := cfg.Connect(user.KubeScheduler)
		if err != nil {
			return err
		}
		run("scheduler", func() error { return RunScheduler(ctx, rc, SchedulerConfig{Logger: log, BindTimeout: cfg.BindTimeout}) })
	}
	for i := 1; i <= cfg.Nodes; i++ {
		name := NodeName(i)
		rc, err := cfg.Connect(user.NodeUserPrefix+name, user.NodesGroup)
		if err != nil {
			return err
		}
		opts := cfg.Kubelet.options(rc, name, log)
		opts.Address = NodeAddress(i)
		run(name, func() error { return RunKubelet(ctx, opts) })
	}
	return nil
}

// SchedulerConfig are the scheduler's knobs besides its client.
type SchedulerConfig struct {
	Logger *slog.Logger
	// Trace and TraceActive follow the informer pipeline's stages
	// (informer.FactoryOptions).
	Trace       informer.TraceFunc
	TraceActive func() bool
	BindTimeout time.Duration
}

// RunScheduler runs the default scheduler with its informers and its
// Event recorder until ctx ends.
func RunScheduler(ctx context.Context, rc *client.RESTClient, cfg SchedulerConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "scheduler")
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{Logger: log, Trace: cfg.Trace, TraceActive: cfg.TraceActive, Transform: informer.Lean})
	defer factory.Shutdown()
	rec := record.NewRecorder(rc, record.Options{Component: "default-scheduler", Logger: log})
	s, err := scheduler.New(scheduler.Options{Client: rc, Informers: factory, Recorder: rec, Logger: log, BindTimeout: cfg.BindTimeout})
	if err != nil {
		return err
	}
	return WithRecorder(ctx, rec, func() error {
		factory.Start(ctx)
		return s.Run(ctx, scheduler.DefaultWorkers)
	})
}

// options are kubelet.Options for node name, with its own Event
// recorder.
func (k KubeletConfig) options(rc *client.RESTClient, name string, log *slog.Logger) kubelet.Options {
	log = log.With("component", "kubelet")
	return kubelet.Options{
		Client: rc, NodeName: name, Logger: log,
		Recorder:          record.NewRecorder(rc, record.Options{Component: "kubelet", Host: name, Logger: log}),
		HeartbeatInterval: k.HeartbeatInterval, StatusUpdateInterval: k.StatusUpdateInterval,
		NodeStatusReportFrequency: k.NodeStatusReportFrequency,
		Port:                      k.Port,
		BackOffBase:               k.BackOffBase, MaxBackOff: k.MaxBackOff, VolumeMountTimeout: k.VolumeMountTimeout,
	}
}

// RunKubelet runs a simulated kubelet until ctx ends. opts.Recorder, when
// it is a *record.Recorder, writes its Events for as long as the kubelet
// runs.
func RunKubelet(ctx context.Context, opts kubelet.Options) error {
	k, err := kubelet.New(opts)
	if err != nil {
		return err
	}
	rec, ok := opts.Recorder.(*record.Recorder)
	if !ok {
		return k.Run(ctx)
	}
	return WithRecorder(ctx, rec, func() error { return k.Run(ctx) })
}

// WithRecorder runs f with rec writing Events beside it, and returns only
// when both have stopped.
func WithRecorder(ctx context.Context, rec *record.Recorder, f func() error) error {
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
