//go:build unix && !linux

package minitest

import "syscall"

// procAttr makes a process the leader of a new process group. Only Linux
// has a parent-death signal; elsewhere Main's clean-up is what there is.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
