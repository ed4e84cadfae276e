package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

// runMinictl runs `minictl args...` to its end and returns its stdout,
// stderr and exit code.
func runMinictl(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := minitest.Command(t, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr minitest.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestCLITwoUpsOnOneDataDir starts a second `minictl up` on the data dir
// a first one uses: it fails, naming the first one's PID, and the first
// one goes on serving. (Failing at once is not timed here; a second up
// that did not see the lock would go on running, which the bound catches.)
func TestCLITwoUpsOnOneDataDir(t *testing.T) {
	dir := t.TempDir()
	first := up(t, minitest.FreeAddr(t), dir, durableUpArgs...)
	second := minitest.StartUp(t, minitest.FreeAddr(t), dir)
	select {
	case <-second.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("the second up on one data dir is still running after 30s\n%s", second.Stderr)
	}
	want := fmt.Sprintf("data dir %s is in use by minictl (pid %d)", dir, first.Cmd.Process.Pid)
	if got := second.Stderr.String(); !strings.Contains(got, want) || strings.Count(got, "\n") > 1 {
		t.Errorf("second up said %q; want one line with %q", got, want)
	}
	if code, _ := first.do("GET", "/api/v1/namespaces/default", "", ""); code != http.StatusOK {
		t.Errorf("the first up answers %d after the second failed", code)
	}
}

// TestCLIFlagErrors: a mistyped flag is a short error with the flag
// meant, a bad value names its flag, and help and version answer.
func TestCLIFlagErrors(t *testing.T) {
	_, stderr, code := runMinictl(t, nil, "up", "--nodez", "3")
	if code == 0 || strings.Count(stderr, "\n") > 3 || !strings.Contains(stderr, "did you mean --nodes?") {
		t.Errorf("up --nodez 3: exit %d, stderr (at most 3 lines, with did you mean --nodes?):\n%s", code, stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "--nodes=-1"}, `invalid value "-1" for --nodes`},
		{[]string{"up", "--node-lease-renew-interval", "0s"}, "--node-lease-renew-interval: must be greater than 0"},
		{[]string{"up", "--cluster-cidr", "10.0.0.0/99"}, "--cluster-cidr"},
		{[]string{"up", "--controller-manager-address", "nowhere"}, "--controller-manager-address"},
		{[]string{"up", "-nodes", "3"}, "long flags take two dashes: --nodes"},
	} {
		_, stderr, code := runMinictl(t, nil, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") > 3 {
			t.Errorf("%v: exit %d, stderr %q; want a short error with %q", c.args, code, stderr, c.want)
		}
	}
	stdout, _, code := runMinictl(t, nil, "up", "-h")
	if code != 0 || !strings.Contains(stdout, "--nodes int") || !regexp.MustCompile(`(?m)^\s+--controller-manager\s+run the controller manager`).MatchString(stdout) {
		t.Errorf("up -h: exit %d, want --nodes int and a bare boolean --controller-manager in:\n%s", code, stdout)
	}
	stdout, _, code = runMinictl(t, nil, "version")
	if code != 0 || !strings.Contains(stdout, "Kubernetes API: v1.") || !strings.Contains(stdout, "Go: go1.") {
		t.Errorf("version: exit %d, %q", code, stdout)
	}
}

// TestCLICompletion: every shell's completion script comes out, and
// bash's is a valid bash script.
func TestCLICompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		stdout, stderr, code := runMinictl(t, nil, "completion", shell)
		if code != 0 || !strings.Contains(stdout, "minictl") {
			t.Fatalf("completion %s: exit %d\n%s", shell, code, stderr)
		}
		if shell != "bash" {
			continue
		}
		path := filepath.Join(t.TempDir(), "minictl.bash")
		if err := os.WriteFile(path, []byte(stdout), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("bash", "-n", path).CombinedOutput(); err != nil {
			t.Errorf("bash -n: %v\n%s", err, out)
		}
	}
	stdout, _, _ := runMinictl(t, nil, "__complete", "up", "--nod")
	if !strings.Contains(stdout, "--nodes") {
		t.Errorf("completing up --nod gave %q, want --nodes", stdout)
	}
}

// TestCLIEtcdGet reads a pod's key and value out of the running cluster's
// etcd with minictl etcd get.
func TestCLIEtcdGet(t *testing.T) {
	dir := t.TempDir()
	// The controller manager makes the ServiceAccount a pod needs.
	c := up(t, minitest.FreeAddr(t), dir, "--nodes", "0")
	createPod(t, c)
	stdout, stderr, code := runMinictl(t, nil, "etcd", "get", "--data-dir", dir, "--prefix", "/registry/core/pods/", "--keys-only")
	if code != 0 || strings.TrimSpace(stdout) != "/registry/core/pods/default/web" {
		t.Errorf("etcd get --prefix --keys-only: exit %d, %q, %s", code, stdout, stderr)
	}
	stdout, stderr, code = runMinictl(t, nil, "etcd", "get", "--data-dir", dir, "/registry/core/pods/default/web")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 2 || lines[0] != "/registry/core/pods/default/web" || !strings.HasPrefix(lines[1], `{"kind":"Pod"`) {
		t.Errorf("etcd get KEY: exit %d, %q, %s", code, stdout, stderr)
	}
}

// TestCLIQuietStartAndStop: a normal start and stop print the banner
// first, then the timeline, and no line that says failed or error.
func TestCLIQuietStartAndStop(t *testing.T) {
	addr := minitest.FreeAddr(t)
	p := minitest.Up(t, true, addr, t.TempDir(), "--fast", "--nodes", "2")
	p.WaitNodesReady(t, "http://"+addr, 2, 60*time.Second)
	if err := p.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	out := p.Stdout.String()
	if !strings.HasPrefix(out, "minictl is up") {
		t.Errorf("output does not start with the banner:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if low := strings.ToLower(l); strings.Contains(low, "failed") || strings.Contains(low, "error") {
			t.Errorf("noise: %q", l)
		}
	}
}

// TestCLISIGTERMDuringStartup stops `minictl up` with SIGTERM at 10
// random moments of its start: each stop takes less than 5s, and the next
// start on the data dir works and has what was written.
func TestCLISIGTERMDuringStartup(t *testing.T) {
	dir := t.TempDir()
	addr := minitest.FreeAddr(t)
	c := up(t, addr, dir, "--nodes", "0")
	createPod(t, c)
	c.stop()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range 10 {
		p := startUp(t, addr, dir)
		time.Sleep(time.Duration(r.IntN(1500)) * time.Millisecond)
		stopWithin5s(t, p, fmt.Sprintf("start %d", i))
	}
	c = up(t, addr, dir, durableUpArgs...)
	if code, pod := c.do("GET", "/api/v1/namespaces/default/pods/web", "", ""); code != http.StatusOK {
		t.Errorf("after the stops, pod web: %d %v", code, pod)
	}
}

// TestCLIStopIgnoresUnusedConnections opens a connection to each of up's
// ports and sends nothing on it, as a client does that dialled and gave
// up on its request: the stop that follows still takes less than 5s,
// the time net/http alone would give each one to send its first request.
func TestCLIStopIgnoresUnusedConnections(t *testing.T) {
	addr := minitest.FreeAddr(t)
	c := up(t, addr, t.TempDir(), "--nodes", "0")
	for _, prefix := range []string{"API server:", "secure API:", "cloud:", "controllers:", "cloud controllers:"} {
		line := waitBannerLine(t, c.Process, prefix)
		hostPort := regexp.MustCompile(`https?://(127\.0\.0\.1:\d+)`).FindStringSubmatch(line)
		if hostPort == nil {
			t.Fatalf("no address in %q", line)
		}
		conn, err := net.Dial("tcp", hostPort[1])
		if err != nil {
			t.Fatalf("%s %s: %v", prefix, hostPort[1], err)
		}
		defer conn.Close()
	}
	stopWithin5s(t, c.Process, "up")
}

// stopWithin5s sends p SIGTERM and fails the test, with what p printed and
// where its goroutines were, if p has not exited 5s later.
func stopWithin5s(t *testing.T, p *minitest.Process, what string) {
	t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(5 * time.Second):
		printed, stacks := p.Dump(10 * time.Second)
		t.Fatalf("%s: not stopped 5s after SIGTERM; it printed:\n%s--- where its goroutines were:\n%s", what, printed, stacks)
	}
}

// TestCLIDefaultPortsTaken takes each of up's default ports in turn: up
// starts on a free port instead, says so in its banner, and answers
// there.
func TestCLIDefaultPortsTaken(t *testing.T) {
	ports := []struct {
		flag, addr, line string
		path             string // what answers on the new address
	}{
		{"listen", "127.0.0.1:8080", "API server:", "/readyz"},
		{"secure-listen", "127.0.0.1:6443", "secure API:", "/readyz"},
		{"etcd-client-url", "127.0.0.1:2379", "etcd:", "/health"},
		{"controller-manager-address", "127.0.0.1:10257", "controllers:", "/healthz"},
		{"cloud-controller-manager-address", "127.0.0.1:10258", "cloud controllers:", "/healthz"},
		{"cloud-listen", "127.0.0.1:8090", "cloud:", "/v1/instances"},
	}
	others := map[string]string{
		"listen": "127.0.0.1:0", "secure-listen": "127.0.0.1:0", "etcd-client-url": "http://127.0.0.1:0",
		"controller-manager-address": "127.0.0.1:0", "cloud-controller-manager-address": "127.0.0.1:0", "cloud-listen": "127.0.0.1:0",
	}
	for _, port := range ports {
		t.Run(port.flag, func(t *testing.T) {
			// Held here, unless something else holds it already.
			if ln, err := net.Listen("tcp", port.addr); err == nil {
				defer ln.Close()
			}
			args := []string{"up", "--data-dir", t.TempDir(), "--nodes", "0"}
			for flag, v := range others {
				if flag != port.flag {
					args = append(args, "--"+flag, v)
				}
			}
			p := minitest.Start(t, false, args...)
			line := waitBannerLine(t, p, port.line)
			if !strings.Contains(line, port.addr+" was taken") {
				t.Errorf("banner line %q does not say %s was taken", line, port.addr)
			}
			// The first URL of the line is the listener's, in every line.
			url := regexp.MustCompile(`https?://127\.0\.0\.1:\d+`).FindString(line)
			if url == "" || strings.HasSuffix(url, port.addr) {
				t.Fatalf("no new address in %q", line)
			}
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
			resp, err := hc.Get(url + port.path)
			if err != nil {
				t.Fatalf("%s%s: %v", url, port.path, err)
			}
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				t.Errorf("%s%s: %s", url, port.path, resp.Status)
			}
			if err := p.Stop(); err != nil {
				t.Errorf("stop: %v\n%s", err, p.Stderr)
			}
		})
	}
}

// waitBannerLine waits for the banner line that starts with prefix.
func waitBannerLine(t *testing.T, p *minitest.Process, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range strings.Split(p.Stdout.String(), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				return strings.TrimSpace(l)
			}
		}
		select {
		case <-p.Exited():
			t.Fatalf("up exited before its banner:\n%s\n%s", p.Stdout, p.Stderr)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("no banner line %q:\n%s", prefix, p.Stdout)
	return ""
}

// TestCLIKubeconfigMerge merges the running cluster into a kubeconfig
// with three contexts: they are unchanged, and the new current context
// reaches the cluster over TLS.
func TestCLIKubeconfigMerge(t *testing.T) {
	dir := t.TempDir()
	up(t, minitest.FreeAddr(t), dir, durableUpArgs...)
	const existing = `apiVersion: v1
kind: Config
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
- context: {cluster: one, user: one}
  name: one
- context: {cluster: two, user: two}
  name: two
- context: {cluster: three, user: three}
  name: three
current-context: two
users:
- name: one
  user: {token: "1"}
- name: two
  user: {token: "2"}
- name: three
  user: {token: "3"}
`
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(existing), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runMinictl(t, []string{"KUBECONFIG=" + path}, "kubeconfig", "--merge", "--data-dir", dir)
	if code != 0 {
		t.Fatalf("kubeconfig --merge: exit %d: %s", code, stderr)
	}
	got, _ := os.ReadFile(path)
	for _, l := range strings.Split(existing, "\n") {
		if !strings.Contains(string(got), l) && l != "current-context: two" {
			t.Errorf("line %q lost:\n%s", l, got)
		}
	}
	for _, name := range []string{"one", "two", "three"} {
		cfg, err := client.LoadKubeconfig(path, name)
		if err != nil || cfg.Server != "https://"+name+".example:6443" || cfg.BearerToken == "" {
			t.Errorf("context %s after the merge: %+v, %v", name, cfg, err)
		}
	}
	cfg, err := client.LoadKubeconfig(path, "")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body, err := rc.Stream(context.Background(), "/api/v1/namespaces/default", nil)
	if err != nil {
		t.Fatalf("the merged context does not reach the cluster (%s): %v", cfg.Server, err)
	}
	body.Close()
	if !strings.HasPrefix(cfg.Server, "https://127.0.0.1:") {
		t.Errorf("merged server %q, want the secure port", cfg.Server)
	}
	if _, err := strconv.Atoi(strings.TrimPrefix(cfg.Server, "https://127.0.0.1:")); err != nil {
		t.Errorf("merged server %q", cfg.Server)
	}
}

// createPod creates pod web in default, once the default ServiceAccount
// it needs is there.
func createPod(t *testing.T, c *cluster) {
	t.Helper()
	eventually(t, "pod web created", func() (bool, string) {
		code, out := c.do("POST", "/api/v1/namespaces/default/pods", "application/json", podJSON)
		return code == http.StatusCreated, fmt.Sprintf("%d %v", code, out["message"])
	})
}
