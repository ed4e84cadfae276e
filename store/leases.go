package store

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leases are the etcd leases that make keys expire (CreateExpiring,
// UpdateExpiring), as kube-apiserver's leaseManager keeps them for Events
// (--event-ttl). A lease of its own for every write would double the
// writes and leave etcd a lease to track for every Event; instead the
// writes of one ttl share a lease while it was granted less than
// leaseReuse ago (a twentieth of ttl, at most a minute) and holds fewer
// than leaseMaxKeys keys. The lease is granted for ttl plus leaseReuse, so
// that a key written at the end of the reuse still lives ttl: a key
// expires between ttl and ttl plus leaseReuse after its last write.
type leases struct {
	mu    sync.Mutex
	byTTL map[time.Duration]*lease
}

// lease is the lease the writes of one ttl currently share.
type lease struct {
	id      clientv3.LeaseID
	granted time.Time
	keys    int
}

const (
	// leaseReuse is the longest one lease is handed out for
	// (kube-apiserver's leaseReuseDurationSeconds).
	leaseReuse = time.Minute
	// leaseMaxKeys is the most keys put with one lease
	// (kube-apiserver's defaultLeaseMaxObjectCount).
	leaseMaxKeys = 1000
)

// reuseFor is how long a lease for ttl is handed out.
func reuseFor(ttl time.Duration) time.Duration { return min(ttl/20, leaseReuse) }

// put runs write, a transaction that puts one key, with the options that
// make its key expire after ttl (none for 0). Should the lease have gone
// (revoked, or lost with etcd's data), it is granted anew and the write
// tried once more.
func (ls *leases) put(ctx context.Context, c *clientv3.Client, ttl time.Duration, write func(...clientv3.OpOption) (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error) {
	if ttl <= 0 {
		return write()
	}
	for try := 0; ; try++ {
		id, err := ls.get(ctx, c, ttl)
		if err != nil {
			return nil, err
		}
		resp, err := write(clientv3.WithLease(id))
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && try == 0 {
			ls.drop(ttl, id)
			continue
		}
		return resp, err
	}
}

// get returns the lease a key written now with ttl shares, granting a new
// one when the current one is too old or too full.
func (ls *leases) get(ctx context.Context, c *clientv3.Client, ttl time.Duration) (clientv3.LeaseID, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now := time.Now()
	reuse := reuseFor(ttl)
	if l := ls.byTTL[ttl]; l != nil && now.Sub(l.granted) < reuse && l.keys < leaseMaxKeys {
		l.keys++
		return l.id, nil
	}
	seconds := int64((ttl + reuse + time.Second - 1) / time.Second)
	resp, err := c.Grant(ctx, seconds)
	if err != nil {
		return 0, err
	}
	if ls.byTTL == nil {
		ls.byTTL = map[time.Duration]*lease{}
	}
	ls.byTTL[ttl] = &lease{id: resp.ID, granted: now, keys: 1}
	return resp.ID, nil
}

// drop forgets id, the lease of ttl, which etcd no longer has.
func (ls *leases) drop(ttl time.Duration, id clientv3.LeaseID) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l := ls.byTTL[ttl]; l != nil && l.id == id {
		delete(ls.byTTL, ttl)
	}
}
