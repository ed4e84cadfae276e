//go:build !unix

package serving

// RaiseFileLimit reports no limit where the system has no RLIMIT_NOFILE:
// the connection budget is then ConnectionsFor(1<<20).
func RaiseFileLimit() (uint64, error) { return 1 << 20, nil }
