package minitest

import "syscall"

// procAttr makes a process the leader of a new process group, and has the
// kernel kill it if the test binary dies first (even by SIGKILL).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
