package main

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// runKubeconfig prints, or writes, a kubeconfig for a running cluster, so
// that kubectl and client-go programs reach it. By default it is the
// admin's, for the secure port: the kubeconfig `minictl up` keeps in its
// data dir, with the cluster CA and the admin's client certificate. With
// --server http://... it is one for the plain loopback listener, which
// needs no credentials.
func runKubeconfig(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kubeconfig", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "", "the API server's URL: https://... replaces the secure port's address; http://... gives a kubeconfig for the plain loopback listener, without credentials")
	dataDir := fs.String("data-dir", defaultDataDir(), "the data dir of the `minictl up` whose admin kubeconfig to give")
	write := fs.Bool("write", false, "write the kubeconfig to --output instead of printing it")
	home, _ := os.UserHomeDir()
	output := fs.String("output", filepath.Join(home, ".kube", "minictl.yaml"), "where --write puts the kubeconfig")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := kubeconfigOf(*server, *dataDir)
	if err != nil {
		return err
	}
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

// kubeconfigOf is the kubeconfig for server: the plain listener's for an
// http:// URL, else the admin's from dataDir, pointed at server if given.
func kubeconfigOf(server, dataDir string) (string, error) {
	if strings.HasPrefix(server, "http://") {
		return proxyKubeconfig(server), nil
	}
	path := filepath.Join(dataDir, "kubeconfig")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no admin kubeconfig at %s: start the cluster first (minictl up --data-dir %s), or pass --server http://127.0.0.1:8080 for the plain loopback listener", path, dataDir)
	}
	if err != nil {
		return "", err
	}
	kc := string(b)
	if server != "" {
		kc = serverLine.ReplaceAllString(kc, "${1}"+server)
	}
	return kc, nil
}

var serverLine = regexp.MustCompile(`(?m)^(\s+server: ).*$`)

// proxyKubeconfig is a kubeconfig with one cluster, one user and one
// context, all named "minictl", for the plain loopback listener: the user
// has no credentials, and acts as the admin, as behind kubectl proxy.
func proxyKubeconfig(server string) string {
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

// adminKubeconfig is the admin's kubeconfig for the secure port at
// server: the cluster CA, and the client certificate of minictl-admin in
// system:masters.
func adminKubeconfig(server string, caPEM, certPEM, keyPEM []byte) string {
	enc := base64.StdEncoding.EncodeToString
	return strings.NewReplacer("SERVER", server, "CA", enc(caPEM), "CERT", enc(certPEM), "KEY", enc(keyPEM)).Replace(`apiVersion: v1
kind: Config
clusters:
- name: minictl
  cluster:
    server: SERVER
    certificate-authority-data: CA
users:
- name: minictl-admin
  user:
    client-certificate-data: CERT
    client-key-data: KEY
contexts:
- name: minictl
  context:
    cluster: minictl
    user: minictl-admin
    namespace: default
current-context: minictl
`)
}
