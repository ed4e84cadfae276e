package compat

import "syscall"

// procAttr makes the kernel kill a process the tests start (minictl up,
// kubectl) if the test binary dies first, even by the -timeout's panic or
// SIGKILL, so that a failed run leaves nothing running.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
