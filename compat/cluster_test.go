package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The tests share one `minictl up` and one kubectl, started and built by
// TestMain; each test works in namespaces of its own.
var env struct {
	dir        string // temporary: binaries, data dir, kubeconfig, kubectl's HOME
	minictl    string
	kubectl    string
	kubeconfig string
	url        string

	// The secure port: TLS, client certificates, tokens and RBAC.
	dataDir         string // up's --data-dir: pki/ca.crt and the rest
	secureURL       string // https://127.0.0.1:PORT
	adminKubeconfig string // the admin's, over TLS, as up writes it
}

// kubectlVersion is what the built kubectl reports: the release its
// source comes from (compat/go.mod).
const kubectlVersion = "v1.36.6"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "minictl-compat-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	env.dir = dir
	if err := build(); err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		return 1
	}
	stop, err := startCluster()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		return 1
	}
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "compat: stop minictl:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// build compiles minictl (in its own module, as users build it) and
// kubectl, both at once.
func build() error {
	env.minictl = filepath.Join(env.dir, "minictl")
	env.kubectl = filepath.Join(env.dir, "kubectl")
	ldflags := strings.Join([]string{
		"-X k8s.io/component-base/version.gitVersion=" + kubectlVersion,
		"-X k8s.io/component-base/version.gitMajor=1",
		"-X k8s.io/component-base/version.gitMinor=36",
		"-X k8s.io/client-go/pkg/version.gitVersion=" + kubectlVersion,
		"-X k8s.io/client-go/pkg/version.gitMajor=1",
		"-X k8s.io/client-go/pkg/version.gitMinor=36",
	}, " ")
	cmds := []*exec.Cmd{
		exec.Command("go", "build", "-o", env.minictl, "./cmd/minictl"),
		exec.Command("go", "build", "-ldflags", ldflags, "-o", env.kubectl, "./cmd/kubectl"),
	}
	cmds[0].Dir = ".."
	errs := make([]error, len(cmds))
	var wg sync.WaitGroup
	for i, c := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := c.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("%s: %v\n%s", strings.Join(c.Args, " "), err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// startCluster starts `minictl up`, waits for /readyz and for its nodes,
// and writes a kubeconfig. stop ends it with SIGTERM, as Ctrl-C does.
func startCluster() (stop func() error, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	env.url = "http://" + addr
	env.dataDir = filepath.Join(env.dir, "data")
	args := []string{"up", "--listen", addr, "--data-dir", env.dataDir,
		"--etcd-client-url", "http://127.0.0.1:0", "--secure-listen", "127.0.0.1:0",
		// --fast plays the cluster's timings out in seconds; a free port
		// for the controller manager keeps parallel test runs apart.
		"--fast", "--controller-manager-address", "127.0.0.1:0"}
	cmd := exec.Command(env.minictl, args...)
	cmd.SysProcAttr = procAttr()
	logs := &syncWriter{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop = func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("minictl up did not stop within 30s of SIGTERM")
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(env.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("minictl up exited: %v\n%s", err, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = stop()
			return nil, fmt.Errorf("minictl up not ready after 60s\n%s", logs.String())
		}
	}
	// The tests run pods, so they start once up's 3 simulated nodes are
	// Ready, not merely once the API answers.
	if err := waitNodesReady(3, 60*time.Second); err != nil {
		_ = stop()
		return nil, fmt.Errorf("%v\n%s", err, logs.String())
	}
	if err := waitSecurePort(logs, 30*time.Second); err != nil {
		_ = stop()
		return nil, fmt.Errorf("%v\n%s", err, logs.String())
	}
	kc, err := exec.Command(env.minictl, "kubeconfig", "--server", env.url).Output()
	if err != nil {
		_ = stop()
		return nil, fmt.Errorf("minictl kubeconfig: %v", err)
	}
	env.kubeconfig = filepath.Join(env.dir, "kubeconfig")
	if err := os.WriteFile(env.kubeconfig, kc, 0o600); err != nil {
		_ = stop()
		return nil, err
	}
	return stop, nil
}

// waitSecurePort waits for up to announce the admin kubeconfig it writes
// once the API is ready, and takes the secure port's URL from what it
// printed before it.
func waitSecurePort(logs *syncWriter, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !strings.Contains(logs.String(), "  kubeconfig:  ") {
		if time.Now().After(deadline) {
			return fmt.Errorf("minictl up did not announce its admin kubeconfig within %s", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "  secure API:  "); ok {
			env.secureURL, _, _ = strings.Cut(rest, " ")
		}
	}
	if !strings.HasPrefix(env.secureURL, "https://") {
		return fmt.Errorf("no secure API URL in minictl up's output")
	}
	env.adminKubeconfig = filepath.Join(env.dataDir, "kubeconfig")
	return nil
}

// waitNodesReady waits until n nodes report Ready=True.
func waitNodesReady(n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	ready := 0
	for time.Now().Before(deadline) {
		var l corev1.NodeList
		if resp, err := http.Get(env.url + "/api/v1/nodes"); err == nil {
			err = json.NewDecoder(resp.Body).Decode(&l)
			resp.Body.Close()
			if err == nil {
				ready = 0
				for _, node := range l.Items {
					for _, c := range node.Status.Conditions {
						if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
							ready++
						}
					}
				}
				if ready >= n {
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%d of %d nodes Ready after %s", ready, n, timeout)
}

// syncWriter is minictl's output: stdout and stderr write to it at once.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// kubectlCmd is kubectl with the test cluster's kubeconfig and a HOME of
// its own (its discovery and OpenAPI cache live there).
func kubectlCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, env.kubectl, args...)
	cmd.SysProcAttr = procAttr()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.kubeconfig, "HOME="+filepath.Join(env.dir, "home"), "KUBE_EDITOR=", "EDITOR=")
	return cmd
}

// result is what one kubectl run printed.
type result struct {
	stdout, stderr string
	err            error
}

// kubectlRun runs kubectl with stdin (may be empty) and a deadline.
func kubectlRun(t *testing.T, stdin string, extraEnv []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := kubectlCmd(ctx, args...)
	cmd.Env = append(cmd.Env, extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// kubectl runs kubectl and fails the test unless it succeeds; it returns
// what kubectl printed on stdout.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	r := kubectlRun(t, "", nil, args...)
	if r.err != nil {
		t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.err, r.stdout, r.stderr)
	}
	return r.stdout
}

// kubectlIn is kubectl with stdin, for `-f -`.
func kubectlIn(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := kubectlRun(t, stdin, nil, args...)
	if r.err != nil {
		t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.err, r.stdout, r.stderr)
	}
	return r.stdout
}

// table is kubectl's tabular output, split into cells.
type table struct {
	header []string
	rows   [][]string
}

// parseTable splits kubectl's output into a header and rows. Columns are
// separated by at least two spaces or start where the header's do, so
// "NOMINATED NODE" stays one column.
func parseTable(t *testing.T, out string) table {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatalf("no table in %q", out)
	}
	starts := columnStarts(lines[0])
	cut := func(line string) []string {
		cells := make([]string, len(starts))
		for i, s := range starts {
			if s >= len(line) {
				continue
			}
			end := len(line)
			if i+1 < len(starts) && starts[i+1] < end {
				end = starts[i+1]
			}
			cells[i] = strings.TrimSpace(line[s:end])
		}
		return cells
	}
	tb := table{header: cut(lines[0])}
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) != "" {
			tb.rows = append(tb.rows, cut(l))
		}
	}
	return tb
}

// columnStarts finds where each header column begins: after a run of two
// or more spaces.
func columnStarts(header string) []int {
	starts := []int{0}
	for i := 1; i < len(header); i++ {
		if header[i] != ' ' && header[i-1] == ' ' && i >= 2 && header[i-2] == ' ' {
			starts = append(starts, i)
		}
	}
	return starts
}

// col returns the cell of column name in row.
func (tb table) col(t *testing.T, row []string, name string) string {
	t.Helper()
	for i, h := range tb.header {
		if h == name {
			return row[i]
		}
	}
	t.Fatalf("no column %q in %v", name, tb.header)
	return ""
}

// find returns the row whose column col is value.
func (tb table) find(t *testing.T, col, value string) []string {
	t.Helper()
	for _, r := range tb.rows {
		if tb.col(t, r, col) == value {
			return r
		}
	}
	t.Fatalf("no row with %s=%s in %v", col, value, tb.rows)
	return nil
}

func wantHeader(t *testing.T, tb table, want ...string) {
	t.Helper()
	if strings.Join(tb.header, "|") != strings.Join(want, "|") {
		t.Errorf("header %q, want %q", tb.header, want)
	}
}

// eventually retries check until it passes or the deadline goes by;
// check says what it saw.
func eventually(t *testing.T, within time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, saw := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last saw:\n%s", what, within, saw)
		}
		time.Sleep(200 * time.Millisecond) // polling interval, not synchronisation
	}
}
