// Command minictl runs a small Kubernetes control plane in one process:
// `minictl up` starts an embedded etcd and the API server; each component
// also runs alone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/timeline"
)

const usage = `minictl runs a small Kubernetes control plane for learning and testing.

Usage:
  minictl up                  start a whole cluster in one process: etcd, the API
                              server, the controller manager, the scheduler and
                              simulated nodes
  minictl apiserver           run the API server alone against etcd endpoints
  minictl etcd                run one member of an etcd cluster for the API servers
  minictl controller-manager  run the controller manager against an API server
  minictl cloud-controller-manager --cloud-provider sim
                              run the cloud controller manager against an API
                              server and a cloud
  minictl scheduler           run the scheduler against an API server
  minictl kubelet --name N    run one simulated node against an API server
  minictl cloud               run the simulated cloud alone (instances, load
                              balancers, routes behind an HTTP API)
  minictl trace               stream a running cluster's timeline of decisions
  minictl kubeconfig          print (or --write) a kubeconfig for kubectl and client-go
  minictl version             print the version

Run "minictl <command> -h" for a command's flags.
`

// gcPercent is the garbage collector's GOGC unless the environment sets
// one. A control plane allocates fast (every request and watch event
// decodes and encodes objects) while its live heap stays small, so at Go's
// default of 100 the collector runs many times a second under load; at
// 200 it runs half as often, for more memory in use between collections.
const gcPercent = 200

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "minictl:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "up":
		return runUp(ctx, rest, stdout, stderr)
	case "apiserver":
		return runAPIServer(ctx, rest, stdout, stderr)
	case "etcd":
		return runEtcd(ctx, rest, stdout, stderr)
	case "controller-manager":
		return runControllerManager(ctx, rest, stdout, stderr)
	case "cloud-controller-manager":
		return runCloudControllerManager(ctx, rest, stdout, stderr)
	case "scheduler":
		return runSchedulerCmd(ctx, rest, stdout, stderr)
	case "kubelet":
		return runKubeletCmd(ctx, rest, stdout, stderr)
	case "cloud":
		return runCloud(ctx, rest, stdout, stderr)
	case "trace":
		return runTrace(ctx, rest, stdout, stderr)
	case "kubeconfig":
		return runKubeconfig(rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "minictl (Kubernetes API %s)\n", apiserver.KubernetesVersion)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

// logFlags are every command's logging flags.
type logFlags struct {
	level  string
	format string
}

func (f *logFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.level, "log-level", "info", "log level: info shows decisions; debug adds raw detail; warn, error")
	fs.StringVar(&f.format, "log-format", "timeline", "timeline (one readable line per decision), text or json")
}

// logger builds the process logger; decisions are also published on bus
// (which may be nil) for `minictl trace`.
func (f *logFlags) logger(w io.Writer, bus *timeline.Bus) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(f.level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	format := timeline.Format(f.format)
	switch format {
	case timeline.FormatTimeline, timeline.FormatText, timeline.FormatJSON:
	default:
		return nil, fmt.Errorf("--log-format must be timeline, text or json, not %q", f.format)
	}
	return slog.New(timeline.NewHandler(w, timeline.Options{
		Format: format, Level: l, Color: isTerminal(w), Bus: bus,
	})), nil
}

// isTerminal reports whether w is a terminal that wants colour.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
