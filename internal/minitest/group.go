package minitest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Every process minitest starts leads a process group of its own, so that
// it and whatever it starts can be ended together, and dies with the test
// binary (see procAttr). groups holds the groups still running.
var groups struct {
	sync.Mutex
	pgids map[int]string // process group id → what it runs, for messages
}

func trackGroup(pgid int, what string) {
	groups.Lock()
	defer groups.Unlock()
	if groups.pgids == nil {
		groups.pgids = map[int]string{}
	}
	groups.pgids[pgid] = what
}

func untrackGroup(pgid int) {
	groups.Lock()
	defer groups.Unlock()
	delete(groups.pgids, pgid)
}

// killAllGroups sends SIGKILL to every group still tracked.
func killAllGroups() {
	groups.Lock()
	defer groups.Unlock()
	for pgid := range groups.pgids {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// stopGroup ends the process group pgid: SIGTERM to all of it, then SIGKILL
// to whatever is still alive after grace; it returns once none is alive
// (a killed process takes a moment to die), or 5s after the SIGKILL.
func stopGroup(pgid int, grace time.Duration) {
	if !waitGroupGone(pgid, 0) {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		if !waitGroupGone(pgid, grace) {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			waitGroupGone(pgid, 5*time.Second)
		}
	}
}

// waitGroupGone waits up to timeout for process group pgid to have no live
// member, and reports whether it has none.
func waitGroupGone(pgid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for len(groupMembers(pgid)) > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// process is one entry of /proc: enough to name it in a message.
type process struct {
	pid     int
	cmdline string
}

func (p process) String() string { return fmt.Sprintf("%d %s", p.pid, p.cmdline) }

// processes lists the live processes (zombies count as gone: they run
// nothing and hold no pipe) for which keep, given a process's stat fields
// after its command name and its command line, is true. Where there is
// no /proc it finds none.
func processes(keep func(stat []string, cmdline string) bool) []process {
	entries, _ := os.ReadDir("/proc")
	var out []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ...": comm may hold spaces and
		// parentheses, so the fields start after the last ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 3 || fields[0] == "Z" || fields[0] == "X" {
			continue
		}
		raw, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cmdline := strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
		if keep(fields, cmdline) {
			out = append(out, process{pid, cmdline})
		}
	}
	return out
}

// groupMembers lists the live processes of process group pgid.
func groupMembers(pgid int) []process {
	want := strconv.Itoa(pgid)
	return processes(func(stat []string, _ string) bool { return stat[2] == want })
}

// RunGroup runs cmd, which must not have been started, as the leader of a
// process group of its own, with its output (stdout and stderr together)
// in a file rather than a pipe, so that no child that inherits it can keep
// RunGroup waiting. It returns once cmd has exited or ctx is done; either
// way every process left in the group is then ended (SIGTERM, SIGKILL a
// few seconds later). It returns cmd's output and an error if cmd failed,
// if ctx ended it, or if cmd exited leaving processes of its group running
// (a script that does not end what it started).
func RunGroup(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
	out, err := os.CreateTemp("", "minitest-output-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pgid := cmd.Process.Pid
	trackGroup(pgid, strings.Join(cmd.Args, " "))
	defer untrackGroup(pgid)

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var runErr error
	select {
	case runErr = <-exited:
		if left := groupMembers(pgid); len(left) > 0 {
			runErr = errors.Join(runErr, fmt.Errorf("it exited leaving processes running (ended now): %v", left))
		}
		stopGroup(pgid, 3*time.Second)
	case <-ctx.Done():
		stopGroup(pgid, 3*time.Second)
		<-exited
		runErr = fmt.Errorf("ended before it finished: %w", context.Cause(ctx))
	}
	b, err := os.ReadFile(out.Name())
	return b, errors.Join(runErr, err)
}

// Context returns a context that ends shortly before t's deadline (the
// go test -timeout), so that a test can end what it runs and report it
// before the test binary itself is stopped; without a deadline it never
// ends on its own. It is cancelled when the test ends.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	if tt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := tt.Deadline(); ok {
			margin := max(min(time.Until(deadline)/10, time.Minute), 5*time.Second)
			var cancelTimeout context.CancelFunc
			ctx, cancelTimeout = context.WithDeadlineCause(ctx, deadline.Add(-margin),
				fmt.Errorf("the test's deadline (-timeout) is %s away", margin))
			t.Cleanup(cancelTimeout)
		}
	}
	t.Cleanup(cancel)
	return ctx
}

// Main runs the tests of a package that starts processes through
// minitest, then makes sure none of them outlives the test binary:
//
//   - shortly before the -timeout would stop the test binary, every
//     process group minitest started is killed, so that tests waiting on
//     them fail with their output instead of hanging until the timeout;
//   - after the tests, any group still running is killed, and a process
//     still running the minictl binary built for this test binary fails
//     the run, naming it;
//   - the built binary is removed.
//
// Processes also die with the test binary if it is killed outright (the
// parent-death signal, on Linux). Call it from TestMain: os.Exit(minitest.Main(m)).
func Main(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.timeout"); f != nil {
		if timeout, ok := f.Value.(flag.Getter).Get().(time.Duration); ok && timeout > 0 {
			margin := max(min(timeout/20, time.Minute), 5*time.Second)
			watchdog := time.AfterFunc(timeout-margin, func() {
				fmt.Fprintf(os.Stderr, "minitest: %s before the test timeout: killing every process the tests started\n", margin)
				killAllGroups()
			})
			defer watchdog.Stop()
		}
	}
	code := m.Run()
	killAllGroups()
	if dir := builtDir(); dir != "" {
		if left := waitNone(dir, 5*time.Second); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "minitest: processes of %s outlived the tests (killing them now):\n", dir)
			for _, p := range left {
				fmt.Fprintf(os.Stderr, "  %v\n", p)
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
			code = max(code, 1)
		}
		_ = os.RemoveAll(dir)
	}
	return code
}

// waitNone waits up to timeout for no live process to name dir on its
// command line, and returns those that still do.
func waitNone(dir string, timeout time.Duration) []process {
	deadline := time.Now().Add(timeout)
	for {
		left := processes(func(_ []string, cmdline string) bool { return strings.Contains(cmdline, dir) })
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}
