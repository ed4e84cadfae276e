package compat

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestKubectlAfterKubeconfigMerge: minictl kubeconfig --merge into a
// kubeconfig with three contexts leaves them as they were, and real
// kubectl reaches the cluster through the new current context, over TLS
// as the admin.
func TestKubectlAfterKubeconfigMerge(t *testing.T) {
	const existing = `apiVersion: v1
clusters:
- cluster:
    server: https://one.example:6443
  name: one
- cluster:
    server: https://two.example:6443
  name: two
- cluster:
    server: https://three.example:6443
  name: three
contexts:
- context:
    cluster: one
    user: one
  name: one
- context:
    cluster: two
    namespace: team-two
    user: two
  name: two
- context:
    cluster: three
    user: three
  name: three
current-context: two
kind: Config
preferences: {}
users:
- name: one
  user:
    token: token-one
- name: two
  user:
    token: token-two
- name: three
  user:
    token: token-three
`
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(existing), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(env.minictl, "kubeconfig", "--merge", "--data-dir", env.dataDir, "--kubeconfig", path).CombinedOutput(); err != nil {
		t.Fatalf("minictl kubeconfig --merge: %v\n%s", err, out)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(existing, "\n") {
		if l != "current-context: two" && !strings.Contains(string(got), l+"\n") {
			t.Errorf("line %q lost in the merge:\n%s", l, got)
		}
	}
	use := []string{"KUBECONFIG=" + path}
	r := kubectlRun(t, "", use, "config", "get-contexts", "-o", "name")
	if contexts := strings.Fields(r.stdout); r.err != nil || !slices.Equal(slices.Sorted(slices.Values(contexts)), []string{"minictl", "one", "three", "two"}) {
		t.Errorf("kubectl config get-contexts: %v %q", r.err, r.stdout)
	}
	r = kubectlRun(t, "", use, "config", "view", "--minify", "--context", "two", "-o", "jsonpath={.clusters[0].cluster.server} {.contexts[0].context.namespace}")
	if r.err != nil || r.stdout != "https://two.example:6443 team-two" {
		t.Errorf("context two after the merge: %v %q", r.err, r.stdout)
	}
	r = kubectlRun(t, "", use, "get", "namespace", "default", "-o", "name")
	if r.err != nil || strings.TrimSpace(r.stdout) != "namespace/default" {
		t.Fatalf("kubectl get namespace default through the merged context: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	r = kubectlRun(t, "", use, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
	if r.err != nil || r.stdout != "minictl-admin" {
		t.Errorf("kubectl auth whoami through the merged context: %v %q %s", r.err, r.stdout, r.stderr)
	}
}
