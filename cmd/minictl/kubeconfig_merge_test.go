package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minictl/minictl/client"
)

// threeContexts is a kubeconfig as kubectl writes them, with comments and
// a layout of its own that a merge must keep.
const threeContexts = `# my clusters
apiVersion: v1
clusters:
- cluster:
    server: https://a.example:6443
  name: a
- cluster:
    server: https://b.example:6443
  name: b

# the one at home
- cluster:
    insecure-skip-tls-verify: true
    server: https://c.example:6443
  name: c
contexts:
  - context:
      cluster: a
      user: a
    name: a
  - context:
      cluster: b
      user: b
      namespace: team-b
    name: b
  - context: {cluster: c, user: c}
    name: c
current-context: b
kind: Config
preferences: {}
users:
- name: a
  user:
    token: aaa
- name: b
  user:
    token: bbb
- name: c
  user: {}
`

// TestMergeKubeconfigKeepsTheRest merges into a kubeconfig with three
// contexts, twice: the new context works, the others read as before, and
// every line that was there is still there, in order.
func TestMergeKubeconfigKeepsTheRest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(threeContexts), 0o640); err != nil {
		t.Fatal(err)
	}
	for i, server := range []string{"http://127.0.0.1:18123", "http://127.0.0.1:18124"} {
		if err := mergeKubeconfigFile(path, proxyKubeconfig(server)); err != nil {
			t.Fatalf("merge %d: %v", i, err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// Every original line but current-context's, in order.
		rest := string(got)
		for _, l := range strings.SplitAfter(threeContexts, "\n") {
			if l == "" || strings.HasPrefix(l, "current-context:") {
				continue
			}
			at := strings.Index(rest, l)
			if at < 0 {
				t.Fatalf("merge %d lost or moved line %q:\n%s", i, l, got)
			}
			rest = rest[at+len(l):]
		}
		if n := strings.Count(string(got), "name: minictl"); n != 3 {
			t.Errorf("merge %d: %d entries named minictl, want 3:\n%s", i, n, got)
		}
		cfg, err := client.LoadKubeconfig(path, "")
		if err != nil {
			t.Fatalf("merge %d: %v\n%s", i, err, got)
		}
		if cfg.Server != server {
			t.Errorf("merge %d: current context's server = %q, want %q", i, cfg.Server, server)
		}
		for ctx, want := range map[string]string{"a": "https://a.example:6443", "b": "https://b.example:6443", "c": "https://c.example:6443"} {
			cfg, err := client.LoadKubeconfig(path, ctx)
			if err != nil || cfg.Server != want {
				t.Errorf("merge %d: context %s: server %v, %v; want %s", i, ctx, cfg, err, want)
			}
		}
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o640 {
			t.Errorf("merge %d: mode %v, %v; want 0640 kept", i, st.Mode(), err)
		}
	}
}

// TestMergeKubeconfigNew merges into a kubeconfig that does not exist.
func TestMergeKubeconfigNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".kube", "config")
	if err := mergeKubeconfigFile(path, proxyKubeconfig("http://127.0.0.1:18125")); err != nil {
		t.Fatal(err)
	}
	cfg, err := client.LoadKubeconfig(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server != "http://127.0.0.1:18125" {
		t.Errorf("server = %q", cfg.Server)
	}
}

// TestMergeKubeconfigRefusesGarbage leaves a file that is not a
// kubeconfig alone.
func TestMergeKubeconfigRefusesGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	const garbage = "- just\n- a list\n"
	os.WriteFile(path, []byte(garbage), 0o600)
	if err := mergeKubeconfigFile(path, proxyKubeconfig("http://127.0.0.1:1")); err == nil {
		t.Fatal("merged into a list")
	}
	if b, _ := os.ReadFile(path); string(b) != garbage {
		t.Errorf("file changed to %q", b)
	}
}
