// Package minitest runs the built minictl binary for tests that drive it as
// a user does: the end-to-end tests and the lessons in examples.
//
// Properties:
//   - The binary is built once per test binary, from this module's source,
//     with the race detector when the test binary has it (go test -race),
//     so that a whole minictl up is race-checked too.
//   - Every process started here is stopped when its test ends (SIGTERM,
//     then SIGKILL after 30s), and listens on loopback only.
//   - No process outlives the test binary: each leads a process group of
//     its own and dies with the test binary (Linux's parent-death signal),
//     and a package whose TestMain calls Main also kills them before the
//     -timeout stops the test binary, and fails if one survives the tests.
//   - A process's output can be read while it runs.
package minitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/minictl once per test binary and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "minictl-test-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "minictl")
		args := []string{"build", "-o", binPath}
		if RaceBuilt {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "github.com/minictl/minictl/cmd/minictl")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// builtDir is the directory Binary built into, "" if it built nothing.
func builtDir() string {
	if binPath == "" {
		return ""
	}
	return filepath.Dir(binPath)
}

// FreeAddr returns a loopback address nothing listened on a moment ago,
// for a server the test starts next. Its port lies below the kernel's
// ephemeral range (ip_local_port_range), from which every outgoing
// connection and every ":0" listener takes its port: in the moment
// between this check and the server's own listen, the thousands of
// connections of the tests running beside it cannot take the port, as
// they could one picked with ":0". Only another test picking the same
// port at random in that moment could. When the range leaves no room
// below it, the port is picked with ":0".
func FreeAddr(t testing.TB) string {
	t.Helper()
	if low := ephemeralLow(); low > minFreePort+1000 {
		for range 100 {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(minFreePort+rand.IntN(low-minFreePort)))
			if err != nil {
				continue // taken
			}
			defer ln.Close()
			return ln.Addr().String()
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// minFreePort is the lowest port FreeAddr picks: above the ports minictl
// and its components listen on by default (8080, 2379, 10250, 10257, ...).
const minFreePort = 20000

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default, 32768, when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}

// Buffer collects a process's output; tests read it while the process
// still writes.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Command returns `minictl args...`, not yet started, for a test that
// runs it itself: like every process minitest starts, it will lead a
// process group of its own and die with the test binary. The test must
// still end it (Process.Kill and Wait in a Cleanup).
func Command(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.SysProcAttr = procAttr()
	return cmd
}

// Process is one running minictl command.
type Process struct {
	Cmd    *exec.Cmd
	Stdout *Buffer
	Stderr *Buffer // the same Buffer as Stdout when started with merged output

	name string // the minictl command: up, apiserver, ...

	exited  chan struct{} // closed once the process has exited
	waitErr error         // how it exited; read after exited is closed
}

// Start runs `minictl args...` until the test ends; with merged, stdout and
// stderr go to one Buffer.
func Start(t testing.TB, merged bool, args ...string) *Process {
	t.Helper()
	return start(t, Command(t, args...), merged, args[0])
}

// start runs cmd, a minictl command named name, until the test ends.
func start(t testing.TB, cmd *exec.Cmd, merged bool, name string) *Process {
	t.Helper()
	p := &Process{Cmd: cmd, name: name, Stdout: &Buffer{}, exited: make(chan struct{})}
	p.Stderr = p.Stdout
	if !merged {
		p.Stderr = &Buffer{}
	}
	p.Cmd.Stdout, p.Cmd.Stderr = p.Stdout, p.Stderr
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := p.Cmd.Process.Pid
	trackGroup(pgid, "minictl "+name)
	go func() {
		p.waitErr = p.Cmd.Wait()
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // anything it left behind
		untrackGroup(pgid)
		close(p.exited)
	}()
	t.Cleanup(func() { _ = p.Stop() })
	return p
}

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Dump has a process that seems stuck print every goroutine's stack to its
// standard error and exit (SIGQUIT: the Go runtime's default), waiting up
// to wait for it, so that the test's report says where it was stuck. It
// returns what the process printed before the dump, and the dump as
// Stacks condenses it.
func (p *Process) Dump(wait time.Duration) (before, stacks string) {
	_ = p.Cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.exited:
	case <-time.After(wait):
	}
	before, dump, _ := strings.Cut(p.Stderr.String(), "SIGQUIT: quit\n")
	return before, Stacks(dump)
}

// Stop sends SIGTERM and waits for the process to exit, killing it after
// 30s; it returns how the process exited (nil for a clean exit). Stopping
// a process that has exited returns how it did.
func (p *Process) Stop() error {
	select {
	case <-p.exited:
		return p.waitErr
	default:
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.waitErr
	case <-time.After(30 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("did not stop within 30s of SIGTERM (killed): %v", p.waitErr)
	}
}

// WaitReady waits until url + "/readyz" answers 200; the test fails if the
// process exits first or timeout passes.
func (p *Process) WaitReady(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	p.waitFor(t, "ready", timeout, func() bool {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// WaitNodesReady waits until n nodes of the cluster at url report
// Ready=True; the test fails if the process exits first or timeout passes.
func (p *Process) WaitNodesReady(t testing.TB, url string, n int, timeout time.Duration) {
	t.Helper()
	p.waitFor(t, fmt.Sprintf("%d nodes Ready", n), timeout, func() bool {
		ready, err := ReadyNodes(url)
		return err == nil && ready >= n
	})
}

// ReadyNodes counts the nodes of the cluster at url that report
// Ready=True.
func ReadyNodes(url string) (int, error) {
	resp, err := http.Get(url + "/api/v1/nodes")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("list nodes: %s", resp.Status)
	}
	var l corev1.NodeList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return 0, err
	}
	ready := 0
	for _, node := range l.Items {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return ready, nil
}

// waitFor asks cond every 50ms until it holds; the test fails, naming
// what it waited for, if the process exits first or timeout passes.
func (p *Process) waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case <-p.exited:
			t.Fatalf("minictl %s exited before %s: %v\n%s", p.name, what, p.waitErr, p.Stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("minictl %s not %s after %s\n%s", p.name, what, timeout, p.Stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Up starts `minictl up` on addr with its data in dataDir, every other
// port on loopback picked free, plus args, and returns once it is up (see
// waitUp).
func Up(t testing.TB, merged bool, addr, dataDir string, args ...string) *Process {
	t.Helper()
	p := Start(t, merged, upArgs(addr, dataDir, args)...)
	p.waitUp(t, addr, args)
	return p
}

// waitUp waits until the `minictl up` on addr is as a user finds it once
// its banner is out: the API ready, the banner printed to its end (its
// last line, "Try: curl ...", is written after /readyz answers), and,
// when it runs a controller manager, the default namespace's
// ServiceAccount made, without which a pod cannot be created (the
// ServiceAccount admission plugin waits only about a second for it, as
// kube's does; on a busy machine the controller takes longer).
func (p *Process) waitUp(t testing.TB, addr string, args []string) {
	t.Helper()
	url := "http://" + addr
	p.WaitReady(t, url, 60*time.Second)
	p.waitFor(t, "done printing its banner", 60*time.Second, func() bool {
		return strings.Contains(p.Stdout.String(), "Try: curl "+url)
	})
	if slices.Contains(args, "--controller-manager=false") {
		return
	}
	p.waitFor(t, "serving the default ServiceAccount", 60*time.Second, func() bool {
		resp, err := http.Get(url + "/api/v1/namespaces/default/serviceaccounts/default")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// StartUp is Up without waiting for ready (its output not merged): for a
// test that kills it before it is.
func StartUp(t testing.TB, addr, dataDir string, args ...string) *Process {
	t.Helper()
	return Start(t, false, upArgs(addr, dataDir, args)...)
}

// UpWithFileLimit is Up with the process allowed at most nofile open
// files (soft and hard limits, as `ulimit -n` sets them).
func UpWithFileLimit(t testing.TB, nofile int, addr, dataDir string, args ...string) *Process {
	t.Helper()
	all := upArgs(addr, dataDir, args)
	cmd := Command(t, all...)
	// The shell sets the limit and becomes minictl: same process, same
	// group, same parent-death signal.
	cmd.Args = append([]string{"sh", "-c", `ulimit -n "$0" && exec "$@"`, strconv.Itoa(nofile), cmd.Path}, all...)
	cmd.Path = "/bin/sh"
	p := start(t, cmd, false, "up")
	p.waitUp(t, addr, args)
	return p
}

func upArgs(addr, dataDir string, args []string) []string {
	return append([]string{"up", "--listen", addr, "--data-dir", dataDir,
		"--secure-listen", "127.0.0.1:0",
		"--etcd-client-url", "http://127.0.0.1:0", "--controller-manager-address", "127.0.0.1:0",
		"--cloud-listen", "127.0.0.1:0"}, args...)
}
