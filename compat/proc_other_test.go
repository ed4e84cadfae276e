//go:build !linux

package compat

import "syscall"

// procAttr: only Linux has a parent-death signal; elsewhere TestMain's
// stop is what ends minictl up.
func procAttr() *syscall.SysProcAttr { return nil }
