package serving

// Descriptors kept out of the connection budget: etcd's WAL, snapshots,
// database and connections, the process's own clients of the API (each
// watch of an in-process informer is a connection) and files opened on
// the way.
const (
	minReserve      = 256
	reserveFraction = 5 // at least one descriptor in five is reserved
)

// ConnectionsFor is the connection budget of a process allowed limit open
// descriptors: the limit less a reserve for everything else.
func ConnectionsFor(limit uint64) int {
	reserve := max(minReserve, limit/reserveFraction)
	if limit < 2*reserve {
		reserve = limit / 2
	}
	return int(min(limit-reserve, 1<<31-1))
}
