package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minictl/minictl/client"
)

// TestKubeconfigRoundTrip writes a kubeconfig and reads it back with
// minictl's own client loader, which follows kubectl's rules.
func TestKubeconfigRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	var out bytes.Buffer
	if err := runKubeconfig(context.Background(), []string{"--server", "http://127.0.0.1:18123", "--write", "--output", path}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "export KUBECONFIG="+path) {
		t.Errorf("no usage hint in %q", out.String())
	}
	cfg, err := client.LoadKubeconfig(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server != "http://127.0.0.1:18123" {
		t.Errorf("server = %q", cfg.Server)
	}
}

// TestAdminKubeconfigFromDataDir reads back the admin kubeconfig up keeps
// in its data dir, with another server's address when asked.
func TestAdminKubeconfigFromDataDir(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := runKubeconfig(context.Background(), []string{"--data-dir", dir}, &out, &out); err == nil || !strings.Contains(err.Error(), "minictl up --data-dir") {
		t.Errorf("no kubeconfig yet: err = %v, want one saying to start the cluster", err)
	}
	kc := adminKubeconfig("https://127.0.0.1:6443", []byte("ca"), []byte("cert"), []byte("key"))
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := runKubeconfig(context.Background(), []string{"--data-dir", dir, "--server", "https://127.0.0.1:7443", "--write", "--output", path}, &out, &out); err != nil {
		t.Fatal(err)
	}
	cfg, err := client.LoadKubeconfig(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server != "https://127.0.0.1:7443" || string(cfg.CAData) != "ca" || string(cfg.CertData) != "cert" || string(cfg.KeyData) != "key" {
		t.Errorf("read back %+v", cfg)
	}
}
