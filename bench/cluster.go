package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// cluster is one running `minictl up` process.
type cluster struct {
	cmd     *exec.Cmd
	URL     string // http://127.0.0.1:port
	EtcdURL string
	DataDir string
	// Ready is how long the process took from exec to the first 200 on
	// /readyz.
	Ready time.Duration

	ownDir   bool
	logDir   string // where stop keeps the stderr log; "" removes it
	stderr   *os.File
	exited   chan struct{}
	exitErr  error
	stopOnce sync.Once
}

// clusterOptions say how to start one.
type clusterOptions struct {
	// DataDir is reused when set (a restart); otherwise a new temp dir is
	// made and removed on stop.
	DataDir string
	// Args are added to `up`'s flags: --nodes 20, ...
	Args []string
	// Profiling starts minictl with --profiling (pprof on the API port).
	Profiling bool
}

// startCluster execs `minictl up` on a free loopback port and returns once
// /readyz answers 200.
func (h *harness) startCluster(ctx context.Context, o clusterOptions) (*cluster, error) {
	c := &cluster{DataDir: o.DataDir, exited: make(chan struct{}), logDir: h.logDir}
	if c.DataDir == "" {
		dir, err := os.MkdirTemp(h.tmp, "data-")
		if err != nil {
			return nil, err
		}
		c.DataDir, c.ownDir = dir, true
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	c.URL = "http://" + addr
	args := []string{"up", "--listen", addr, "--data-dir", c.DataDir,
		"--etcd-client-url", "http://127.0.0.1:0", "--controller-manager-address", "127.0.0.1:0",
		"--secure-listen", "127.0.0.1:0", "--cloud-listen", "127.0.0.1:0", "--cloud-controller-manager-address", "127.0.0.1:0"}
	if o.Profiling {
		args = append(args, "--profiling")
	}
	args = append(args, o.Args...)
	stderr, err := os.CreateTemp(h.tmp, "minictl-stderr-")
	if err != nil {
		return nil, err
	}
	c.stderr = stderr
	c.cmd = exec.Command(h.bin, args...)
	c.cmd.Stderr = stderr
	// Stdout goes through a pipe of our own rather than StdoutPipe, which
	// must be read to the end before Wait is called: here Wait runs at
	// once, copies stdout into the pipe until the process ends, and then
	// the pipe is closed, which ends the reader.
	stdout, stdoutW := io.Pipe()
	c.cmd.Stdout = stdoutW
	etcdURL := make(chan string, 1)
	start := time.Now()
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", h.bin, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if v, ok := strings.CutPrefix(line, "etcd:"); ok && !sent {
				etcdURL <- strings.TrimSpace(v)
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		c.exitErr = c.cmd.Wait()
		stdoutW.Close()
		close(c.exited)
	}()

	deadline := time.Now().Add(120 * time.Second)
	probe := &http.Client{Timeout: time.Second}
	for {
		resp, err := probe.Get(c.URL + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				c.Ready = time.Since(start)
				break
			}
		}
		select {
		case <-c.exited:
			return nil, fmt.Errorf("minictl up exited early: %v\n%s", c.exitErr, c.tail())
		case <-ctx.Done():
			c.stop()
			return nil, ctx.Err()
		default:
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("minictl up not ready after 120s\n%s", c.tail())
		}
		time.Sleep(2 * time.Millisecond)
	}
	select {
	case c.EtcdURL = <-etcdURL:
	case <-time.After(5 * time.Second):
		c.stop()
		return nil, errors.New("minictl up did not print its etcd URL")
	}
	return c, nil
}

// stop sends SIGTERM, waits for the process (killing it after 30s), and
// removes the data dir the cluster made.
func (c *cluster) stop() {
	c.stopOnce.Do(func() {
		if c.logDir != "" {
			if _, body, err := do(context.Background(), http.MethodGet, c.URL+"/metrics", "", nil); err == nil {
				_ = os.WriteFile(filepath.Join(c.logDir, filepath.Base(c.stderr.Name())+".metrics"), body, 0o644)
			}
		}
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
		c.stderr.Close()
		if c.logDir != "" {
			_ = os.Rename(c.stderr.Name(), filepath.Join(c.logDir, filepath.Base(c.stderr.Name())+".log"))
		}
		os.Remove(c.stderr.Name())
		if c.ownDir {
			os.RemoveAll(c.DataDir)
		}
	})
}

// etcd is a client of the cluster's embedded etcd, as the raw puts and
// the stored-pod writes reach it: over its client URL, from outside.
func (c *cluster) etcd() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{c.EtcdURL}, DialTimeout: 5 * time.Second})
}

// keepData makes stop leave the data dir, for a restart on it.
func (c *cluster) keepData() { c.ownDir = false }

// tail is the end of the process's stderr, for error messages.
func (c *cluster) tail() string {
	data, _ := os.ReadFile(c.stderr.Name())
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

// rssMB is the process's resident set (VmRSS) in MB.
func (c *cluster) rssMB() (float64, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(c.cmd.Process.Pid), "status"))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			kb, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return 0, err
			}
			return kb / 1024, nil
		}
	}
	return 0, errors.New("no VmRSS in /proc/<pid>/status")
}

// cpuTime is the CPU time (user + system) the process has used so far,
// from /proc/<pid>/stat, at clock-tick (10ms) resolution.
func (c *cluster) cpuTime() time.Duration {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(c.cmd.Process.Pid), "stat"))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	rest := string(data[bytes.LastIndexByte(data, ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// harnessCPU is the CPU time this process (the load generator) has used.
func harnessCPU() time.Duration { return rusageCPU(syscall.RUSAGE_SELF) }

// rusageCPU is the user and system CPU getrusage reports for who
// (RUSAGE_SELF or RUSAGE_CHILDREN); 0 if it fails.
func rusageCPU(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// metric reads one sample from /metrics: name with its labels exactly as
// printed, e.g. `minictl_etcd_watches{resource="pods"}`. Missing is 0.
func (c *cluster) metric(ctx context.Context, series string) (float64, error) {
	_, body, err := do(ctx, http.MethodGet, c.URL+"/metrics", "", nil)
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(body) {
		if v, ok := bytes.CutPrefix(line, []byte(series+" ")); ok {
			return strconv.ParseFloat(strings.TrimSpace(string(v)), 64)
		}
	}
	return 0, nil
}

// profile fetches a pprof profile from a cluster started with Profiling,
// into dir/name.pprof. seconds > 0 asks for a CPU profile of that length.
func (c *cluster) profile(ctx context.Context, dir, name, kind string, seconds int) error {
	u := c.URL + "/debug/pprof/" + kind
	if seconds > 0 {
		u += "?seconds=" + strconv.Itoa(seconds)
	}
	code, body, err := do(ctx, http.MethodGet, u, "", nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", u, code, body)
	}
	return os.WriteFile(filepath.Join(dir, name+".pprof"), body, 0o644)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
