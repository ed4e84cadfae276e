package apiserver

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// waitFresh blocks until the cache has seen revision rv, asking etcd for a
// progress notification when other resources moved the revision on. It asks
// again every progressRetry: a notification sent while this resource's etcd
// watch was still being set up (just after a start or a relist) reaches
// only the watches that already existed. After freshTimeout it gives up
// with a Timeout (504) whose cause is ResourceVersionTooLarge, as
// kube-apiserver does; but once etcd has lost a history (see
// watchCache.lost), a revision the cache does not reach in time is taken
// for one of the lost history, whose client must list again: 410 Gone.
//
// An uncached resource is read from etcd, which is always fresh: there is
// nothing to wait for.
func (c *watchCache) waitFresh(ctx context.Context, rv int64) error {
	if c.uncached {
		return nil
	}
	deadline := c.clock.NewTimer(freshTimeout)
	defer deadline.Stop()
	retry := c.clock.NewTimer(progressRetry)
	defer func() { retry.Stop() }()
	ask := true
	for {
		c.mu.RLock()
		cur, ready, changed, lost := c.rv, c.ready, c.changed, c.lost
		c.mu.RUnlock()
		if ready && cur >= rv {
			return nil
		}
		if ready && ask {
			ask = false
			_ = c.store.RequestProgress(ctx, c.prefix) // a failure is answered by the retry or the deadline
		}
		select {
		case <-changed:
		case <-retry.C():
			ask = true
			retry = c.clock.NewTimer(progressRetry)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C():
			if lost > 0 {
				return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d: etcd's history up to %d was lost", rv, lost))
			}
			return errTooLargeResourceVersion(rv, cur)
		}
	}
}

const (
	// freshTimeout is how long a read waits for the cache to reach its
	// revision (kube-apiserver's blockTimeout).
	freshTimeout = 3 * time.Second
	// progressRetry is how often waitFresh asks etcd for progress again.
	progressRetry = 100 * time.Millisecond
)

// consistentList lists from the watch cache once it has caught up with
// etcd's current revision: a read as fresh as one from etcd, without
// decoding every object again. An uncached resource is listed from etcd.
// It returns the revision the objects are current at.
func (s *Server) consistentList(ctx context.Context, ri *requestInfo, f *filter) ([]*cachedObject, int64, error) {
	c := ri.cache
	if c.uncached {
		items, rev, err := c.listEtcd(ctx, f)
		if err != nil {
			return nil, 0, ri.store.storageError(err, "")
		}
		return items, rev, nil
	}
	rev, err := s.store.Revision(ctx)
	if err != nil {
		return nil, 0, ri.store.storageError(err, "")
	}
	if err := c.waitFresh(ctx, rev); err != nil {
		return nil, 0, err
	}
	items, rv := c.list(f)
	return items, rv, nil
}

// changes returns a channel closed when the cache next moves: a reader
// that takes it before reading the cache misses no change.
func (c *watchCache) changes() <-chan struct{} {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.changed
}
