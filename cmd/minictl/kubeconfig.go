package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// runKubeconfig prints, writes or merges a kubeconfig for the running
// cluster, so that kubectl and client-go programs reach it. By default it
// is the admin's, for the secure port: the kubeconfig `minictl up` keeps
// in its data dir, with the cluster CA and the admin's client
// certificate; without a secure port, one for the plain loopback
// listener, which needs no credentials. Where the listeners are comes
// from the record up writes in its data dir, so the kubeconfig points at
// the cluster that runs. With --server http://... it is one for that
// plain listener.
func runKubeconfig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("kubeconfig")
	server := fs.String("server", "", "the API server's URL: https://... replaces the secure port's address; http://... gives a kubeconfig for the plain loopback listener, without credentials")
	dataDir := fs.String("data-dir", defaultDataDir(), "the data dir of the minictl up whose kubeconfig to give")
	write := fs.Bool("write", false, "write the kubeconfig to --output instead of printing it")
	home, _ := os.UserHomeDir()
	output := fs.String("output", filepath.Join(home, ".kube", "minictl.yaml"), "where --write puts the kubeconfig")
	merge := fs.Bool("merge", false, "add (or update) the cluster, user and context \"minictl\" in --kubeconfig and make it the current context, keeping the rest of the file as it is")
	target := fs.String("kubeconfig", "", "the kubeconfig --merge edits (default: the first file of $KUBECONFIG, else ~/.kube/config)")
	if err := parseFlags(ctx, fs, args); err != nil {
		return err
	}
	if *merge && *write {
		return errors.New("--merge and --write go separately: --merge edits a kubeconfig, --write writes a new one")
	}
	cfg, err := kubeconfigOf(*server, *dataDir)
	if err != nil {
		return err
	}
	if *merge {
		path, err := mergeTarget(*target)
		if err != nil {
			return err
		}
		if err := mergeKubeconfigFile(path, cfg); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Set kubectl context to %q in %s\ntry: kubectl get nodes\n", mergedName, path)
		return nil
	}
	if !*write {
		_, err := io.WriteString(stdout, cfg)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*output), 0o700); err != nil {
		return err
	}
	if err := writeFileAtomic(*output, []byte(cfg), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\nuse it with:\n  export KUBECONFIG=%s\n  kubectl get nodes\n", *output, *output)
	return nil
}

// kubeconfigOf is the kubeconfig for server: the plain listener's for an
// http:// URL, else the admin's from dataDir, pointed at server if given.
// Without server, the record of the running cluster says which: the
// admin's when it has a secure port, the plain listener's otherwise.
func kubeconfigOf(server, dataDir string) (string, error) {
	if strings.HasPrefix(server, "http://") {
		return proxyKubeconfig(server), nil
	}
	path := filepath.Join(dataDir, "kubeconfig")
	if r, err := readRecord(dataDir); err == nil && server == "" {
		if r.Kubeconfig == "" && r.API != "" {
			return proxyKubeconfig(r.API), nil
		}
		if r.Kubeconfig != "" {
			path = r.Kubeconfig
		}
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, iofs.ErrNotExist) {
		return "", fmt.Errorf("no admin kubeconfig at %s: start the cluster first (minictl up --data-dir %s)", path, dataDir)
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
