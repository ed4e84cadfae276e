//go:build unix

package serving

import (
	"fmt"
	"syscall"
)

// RaiseFileLimit raises the process's soft limit on open descriptors to
// its hard limit and returns the limit now in force.
func RaiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read the open file limit: %w", err)
	}
	if lim.Cur >= lim.Max {
		return lim.Cur, nil
	}
	raised := lim
	raised.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
		return uint64(lim.Cur), fmt.Errorf("raise the open file limit to %d: %w", lim.Max, err)
	}
	return uint64(raised.Cur), nil
}
