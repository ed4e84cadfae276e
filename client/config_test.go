package client

import (
	"encoding/base64"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testCAPEM = "-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n"

// writeFile writes content to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// testKubeconfig has three contexts: "dev" (token, CA data, the current
// one), "prod" (tokenFile and a relative CA file, with a namespace) and
// "lab" (insecure, no user).
func testKubeconfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "token.txt", "  file-token\n")
	writeFile(t, dir, "ca.crt", testCAPEM)
	caData := base64.StdEncoding.EncodeToString([]byte(testCAPEM))
	return writeFile(t, dir, "config", `
apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev-cluster
  cluster:
    server: https://dev.example:6443
    certificate-authority-data: `+caData+`
- name: prod-cluster
  cluster:
    server: https://prod.example:6443
    certificate-authority: ca.crt
- name: lab-cluster
  cluster:
    server: https://lab.example:6443
    insecure-skip-tls-verify: true
users:
- name: dev-user
  user:
    token: dev-token
- name: prod-user
  user:
    tokenFile: token.txt
contexts:
- name: dev
  context:
    cluster: dev-cluster
    user: dev-user
- name: prod
  context:
    cluster: prod-cluster
    user: prod-user
    namespace: shop
- name: lab
  context:
    cluster: lab-cluster
- name: broken
  context:
    cluster: nowhere
- name: no-user
  context:
    cluster: dev-cluster
    user: nobody
`)
}

func TestLoadKubeconfig(t *testing.T) {
	path := testKubeconfig(t)
	dir := filepath.Dir(path)
	tests := []struct {
		context string
		want    Config
	}{
		{"", Config{Server: "https://dev.example:6443", BearerToken: "dev-token", CAData: []byte(testCAPEM)}},
		{"dev", Config{Server: "https://dev.example:6443", BearerToken: "dev-token", CAData: []byte(testCAPEM)}},
		{"prod", Config{Server: "https://prod.example:6443", BearerToken: "file-token", CAFile: filepath.Join(dir, "ca.crt"), Namespace: "shop"}},
		{"lab", Config{Server: "https://lab.example:6443", Insecure: true}},
	}
	for _, tt := range tests {
		t.Run("context="+tt.context, func(t *testing.T) {
			got, err := LoadKubeconfig(path, tt.context)
			if err != nil {
				t.Fatal(err)
			}
			if got.Server != tt.want.Server || got.BearerToken != tt.want.BearerToken ||
				got.CAFile != tt.want.CAFile || string(got.CAData) != string(tt.want.CAData) ||
				got.Insecure != tt.want.Insecure || got.Namespace != tt.want.Namespace {
				t.Errorf("got %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func TestLoadKubeconfigErrors(t *testing.T) {
	path := testKubeconfig(t)
	dir := t.TempDir()
	noCurrent := writeFile(t, dir, "nocurrent", "clusters: []\n")
	badYAML := writeFile(t, dir, "bad", "clusters: [\n")
	noServer := writeFile(t, dir, "noserver", `
current-context: c
clusters: [{name: x, cluster: {}}]
contexts: [{name: c, context: {cluster: x}}]
`)
	badTokenFile := writeFile(t, dir, "badtoken", `
current-context: c
clusters: [{name: x, cluster: {server: "http://x"}}]
users: [{name: u, user: {tokenFile: missing.txt}}]
contexts: [{name: c, context: {cluster: x, user: u}}]
`)
	tests := []struct {
		name, path, context, want string
	}{
		{"unknown context", path, "nope", `context "nope" not found`},
		{"unknown cluster", path, "broken", `cluster "nowhere" not found`},
		{"unknown user", path, "no-user", `user "nobody" not found`},
		{"no current context", noCurrent, "", "no current-context"},
		{"bad yaml", badYAML, "", "kubeconfig " + badYAML},
		{"no server", noServer, "", "has no server"},
		{"bad token file", badTokenFile, "", "missing.txt"},
		{"missing file", filepath.Join(dir, "absent"), "", "file does not exist"},
		{"empty path", "", "", "no path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadKubeconfig(tt.path, tt.context)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, err := LoadKubeconfig(filepath.Join(dir, "absent"), ""); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v, want fs.ErrNotExist", err)
	}
}

func TestLoadKubeconfigMergesList(t *testing.T) {
	dir := t.TempDir()
	first := writeFile(t, dir, "first", `
clusters: [{name: c, cluster: {server: "http://first"}}]
contexts: [{name: only-first, context: {cluster: c}}]
`)
	second := writeFile(t, dir, "second", `
current-context: only-first
clusters: [{name: c, cluster: {server: "http://second"}}, {name: d, cluster: {server: "http://d"}}]
contexts: [{name: d, context: {cluster: d}}]
`)
	list := strings.Join([]string{filepath.Join(dir, "absent"), first, second}, string(filepath.ListSeparator))
	cfg, err := LoadKubeconfig(list, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server != "http://first" {
		t.Errorf("server = %q, want the first file's cluster", cfg.Server)
	}
	cfg, err = LoadKubeconfig(list, "d")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server != "http://d" {
		t.Errorf("server = %q, want the second file's cluster d", cfg.Server)
	}
}

func TestBindFlags(t *testing.T) {
	kubeconfig := testKubeconfig(t)
	caFile := writeFile(t, t.TempDir(), "flag-ca.crt", testCAPEM)
	tests := []struct {
		name string
		env  string // $KUBECONFIG
		args []string
		want Config
		err  string
	}{
		{name: "nothing", want: Config{Server: DefaultServer}},
		{name: "server flag only", args: []string{"--server", "http://10.0.0.1:8080"},
			want: Config{Server: "http://10.0.0.1:8080"}},
		{name: "kubeconfig from env", env: kubeconfig,
			want: Config{Server: "https://dev.example:6443", BearerToken: "dev-token", CAData: []byte(testCAPEM)}},
		{name: "kubeconfig flag and context", args: []string{"--kubeconfig", kubeconfig, "--context", "prod"},
			want: Config{Server: "https://prod.example:6443", BearerToken: "file-token", CAFile: filepath.Join(filepath.Dir(kubeconfig), "ca.crt"), Namespace: "shop"}},
		{name: "flags win over kubeconfig", env: kubeconfig,
			args: []string{"--server", "https://other:6443", "--token", "flag-token", "--certificate-authority", caFile},
			want: Config{Server: "https://other:6443", BearerToken: "flag-token", CAFile: caFile}},
		{name: "insecure flag drops kubeconfig CA", env: kubeconfig, args: []string{"--insecure-skip-tls-verify"},
			want: Config{Server: "https://dev.example:6443", BearerToken: "dev-token", Insecure: true}},
		{name: "insecure=false flag wins", env: kubeconfig, args: []string{"--context", "lab", "--insecure-skip-tls-verify=false"},
			want: Config{Server: "https://lab.example:6443"}},
		{name: "CA flag clears kubeconfig insecure", env: kubeconfig, args: []string{"--context", "lab", "--certificate-authority", caFile},
			want: Config{Server: "https://lab.example:6443", CAFile: caFile}},
		{name: "env names a missing file", env: filepath.Join(t.TempDir(), "absent"), want: Config{Server: DefaultServer}},
		{name: "flag names a missing file", args: []string{"--kubeconfig", filepath.Join(t.TempDir(), "absent")}, err: "file does not exist"},
		{name: "context without kubeconfig", args: []string{"--context", "dev"}, err: "needs a kubeconfig"},
		{name: "unknown context", env: kubeconfig, args: []string{"--context", "nope"}, err: `"nope" not found`},
		{name: "CA and insecure", args: []string{"--certificate-authority", caFile, "--insecure-skip-tls-verify"}, err: "contradict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tt.env)
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			resolve := BindFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			got, err := resolve()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Server != tt.want.Server || got.BearerToken != tt.want.BearerToken ||
				got.CAFile != tt.want.CAFile || string(got.CAData) != string(tt.want.CAData) ||
				got.Insecure != tt.want.Insecure || got.Namespace != tt.want.Namespace {
				t.Errorf("got %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}
