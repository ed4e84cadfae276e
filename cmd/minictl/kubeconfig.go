package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// runKubeconfig prints, or writes, a kubeconfig for a running cluster, so
// that kubectl and client-go programs reach it.
func runKubeconfig(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kubeconfig", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "http://127.0.0.1:8080", "the API server's URL")
	write := fs.Bool("write", false, "write the kubeconfig to --output instead of printing it")
	home, _ := os.UserHomeDir()
	output := fs.String("output", filepath.Join(home, ".kube", "minictl.yaml"), "where --write puts the kubeconfig")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := kubeconfigFor(*server)
	if !*write {
		_, err := io.WriteString(stdout, cfg)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*output), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(*output, []byte(cfg), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\nuse it with:\n  export KUBECONFIG=%s\n  kubectl get nodes\n", *output, *output)
	return nil
}

// kubeconfigFor is a kubeconfig with one cluster, one user and one context,
// all named "minictl". The server speaks plain HTTP on loopback, so the
// user has no credentials.
func kubeconfigFor(server string) string {
	return strings.ReplaceAll(`apiVersion: v1
kind: Config
clusters:
- name: minictl
  cluster:
    server: SERVER
users:
- name: minictl
  user: {}
contexts:
- name: minictl
  context:
    cluster: minictl
    user: minictl
    namespace: default
current-context: minictl
`, "SERVER", server)
}
