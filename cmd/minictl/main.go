// Command minictl runs a small Kubernetes control plane in one process:
// `minictl up` starts an embedded etcd and the API server; each component
// also runs alone.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"

	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/minictl/minictl/internal/gctune"
	"github.com/minictl/minictl/internal/timeline"
)

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
		if errors.Is(err, errShown) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "minictl:", err)
		os.Exit(1)
	}
}

// run runs the command args name until it ends, or until an interrupt or
// SIGTERM ends it.
func run(args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv("GOMEMLIMIT") == "" {
		// Past a few hundred megabytes of live heap, GOGC's headroom is
		// capped (package gctune): a cluster of tens of thousands of pods
		// would otherwise keep gigabytes for garbage.
		gogc := debug.SetGCPercent(-1)
		debug.SetGCPercent(gogc)
		var wg sync.WaitGroup
		tune, stopTune := context.WithCancel(ctx)
		wg.Go(func() { gctune.Run(tune, gogc, gctune.CapFrom, gctune.MaxHeadroom) })
		defer wg.Wait()
		defer stopTune()
	}
	root := rootCommand(stdout, stderr)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// rootCommand is minictl's command tree, writing to stdout and stderr.
func rootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "minictl",
		Short: "minictl runs a small Kubernetes control plane for learning and testing",
		Long: `minictl runs a small Kubernetes control plane for learning and testing:
etcd, an API server, the controller manager, the scheduler and simulated
nodes, in one process (minictl up) or each alone.`,
		Example: `  minictl up --fast                  # a cluster with 3 nodes, timings in seconds
  minictl kubeconfig --merge         # let kubectl reach it (context "minictl")
  minictl etcd get --prefix /registry/core/pods/ --keys-only`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(stderr)
			_ = cmd.Help()
			return errors.New("no command given")
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return flagError(cmd.Flags(), err)
	})
	root.AddGroup(
		&cobra.Group{ID: "cluster", Title: "Run a cluster:"},
		&cobra.Group{ID: "component", Title: "Run one component alone:"},
		&cobra.Group{ID: "inspect", Title: "Use a running cluster:"},
	)
	root.SetHelpCommandGroupID("inspect")
	root.SetCompletionCommandGroupID("inspect")
	add := func(group, use, short string, run runFunc) *cobra.Command {
		cmd := newCommand(use, short, run, stdout, stderr)
		cmd.GroupID = group
		root.AddCommand(cmd)
		return cmd
	}
	add("cluster", "up", "Start a whole cluster in one process: etcd, the API server, the controller manager, the scheduler and simulated nodes", runUp)
	add("component", "apiserver", "Run the API server alone against etcd endpoints", runAPIServer)
	etcd := add("component", "etcd", "Run one member of an etcd cluster for the API servers; get and watch read a running cluster's etcd", runEtcd)
	etcd.AddCommand(
		newCommand("get [KEY]", "Print a key, or the keys under --prefix, of the running cluster's etcd", runEtcdGet, stdout, stderr),
		newCommand("watch [KEY]", "Print each change to a key, or to the keys under --prefix, of the running cluster's etcd", runEtcdWatch, stdout, stderr),
	)
	add("component", "controller-manager", "Run the controller manager against an API server", runControllerManager)
	add("component", "cloud-controller-manager", "Run the cloud controller manager against an API server and a cloud (--cloud-provider sim)", runCloudControllerManager)
	add("component", "scheduler", "Run the scheduler against an API server", runSchedulerCmd)
	add("component", "kubelet", "Run one simulated node (--name N) against an API server", runKubeletCmd)
	add("component", "cloud", "Run the simulated cloud alone: instances, load balancers and routes behind an HTTP API", runCloud)
	add("inspect", "trace", "Stream a running cluster's timeline of decisions", runTrace)
	add("inspect", "kubeconfig", "Print, write or --merge a kubeconfig for kubectl and client-go", runKubeconfig)
	add("inspect", "version", "Print minictl's version, the Kubernetes API version it serves and its Go version", runVersion)
	root.Flags().BoolP("version", "", false, "print the version (as minictl version)")
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		if v, _ := cmd.Flags().GetBool("version"); v {
			return runVersion(cmd.Context(), nil, stdout, stderr)
		}
		cmd.SetOut(stderr)
		_ = cmd.Help()
		return errors.New("no command given")
	}
	return root
}

// newCommand is the command use, which runs run with its arguments. Its
// flags are learnt by calling run with a describing context; run parses
// them itself.
func newCommand(use, short string, run runFunc, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:                use,
		Short:              short,
		DisableFlagParsing: true,
		SilenceErrors:      true,
		SilenceUsage:       true,
	}
	ctx := context.WithValue(context.Background(), describeKey{}, cmd.Flags())
	if err := run(ctx, nil, io.Discard, io.Discard); !errors.Is(err, errDescribed) {
		panic(fmt.Sprintf("minictl %s: its flags are not parsed with parseFlags (%v)", use, err))
	}
	cmd.RunE = func(c *cobra.Command, args []string) error {
		return run(context.WithValue(c.Context(), commandKey{}, c), args, stdout, stderr)
	}
	// Cobra completes no flags of a command that parses its own: these
	// complete its flags' names.
	cmd.ValidArgsFunction = func(c *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if !strings.HasPrefix(toComplete, "-") {
			return nil, cobra.ShellCompDirectiveDefault
		}
		var out []cobra.Completion
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if name := "--" + f.Name; strings.HasPrefix(name, toComplete) {
				out = append(out, cobra.CompletionWithDesc(name, firstLine(f.Usage)))
			}
		})
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	return cmd
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// logFlags are every command's logging flags.
type logFlags struct {
	level  string
	format string
}

func (f *logFlags) bind(fs *pflag.FlagSet) {
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
	if u, ok := w.(interface{ Unwrap() io.Writer }); ok {
		w = u.Unwrap()
	}
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
