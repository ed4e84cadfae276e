package main

import (
	"bytes"
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
	if err := runKubeconfig([]string{"--server", "http://127.0.0.1:18123", "--write", "--output", path}, &out, &out); err != nil {
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
