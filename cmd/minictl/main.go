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
	"syscall"

	"github.com/minictl/minictl/apiserver"
)

const usage = `minictl runs a small Kubernetes control plane for learning and testing.

Usage:
  minictl up                  start a whole cluster in one process: etcd, the API
                              server, the controller manager, the scheduler and
                              simulated nodes
  minictl apiserver           run the API server alone against etcd endpoints
  minictl controller-manager  run the controller manager against an API server
  minictl scheduler           run the scheduler against an API server
  minictl kubelet --name N    run one simulated node against an API server
  minictl kubeconfig          print (or --write) a kubeconfig for kubectl and client-go
  minictl version             print the version

Run "minictl <command> -h" for a command's flags.
`

func main() {
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
	case "controller-manager":
		return runControllerManager(ctx, rest, stdout, stderr)
	case "scheduler":
		return runSchedulerCmd(ctx, rest, stdout, stderr)
	case "kubelet":
		return runKubeletCmd(ctx, rest, stdout, stderr)
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

// newLogger builds the process logger from --log-level.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
