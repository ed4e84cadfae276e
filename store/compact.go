package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Compact discards the history before rev: afterwards, reads at revisions
// below rev and watches from below rev fail with ErrCompacted. The latest
// value of every key is kept. It returns once etcd has physically removed
// the old revisions, and fails with ErrCompacted if rev is already
// compacted.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	o, err := s.start(ctx)
	if err != nil {
		return fmt.Errorf("store: compact to %d: %w", rev, err)
	}
	resp, err := s.client.Compact(o.ctx, rev, clientv3.WithCompactPhysical())
	if err != nil {
		err = o.fail(err)
		if errors.Is(err, ErrCompacted) {
			s.noteCompacted(rev)
		}
		return fmt.Errorf("store: compact to %d: %w", rev, err)
	}
	o.done(resp.Header)
	s.noteCompacted(rev)
	return nil
}

// CompactedRevision returns the highest revision this Store compacted to, or
// learned etcd had compacted to (at Open, or from a watch); 0 if none.
// Revisions below it are gone.
func (s *Store) CompactedRevision() int64 { return s.compacted.Load() }

// noteCompacted raises CompactedRevision to rev.
func (s *Store) noteCompacted(rev int64) {
	for {
		cur := s.compacted.Load()
		if rev <= cur || s.compacted.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// compactLoop compacts, every interval, to the revision that was current at
// the previous tick, as kube-apiserver does: history younger than one
// interval is always kept. It returns when ctx ends.
func (s *Store) compactLoop(ctx context.Context, interval time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var last int64 // the revision at the previous tick
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		last = s.compactTick(ctx, last)
	}
}

// compactTick compacts to last, if that is news, and returns the revision
// to compact to at the next tick.
func (s *Store) compactTick(ctx context.Context, last int64) int64 {
	cur, err := s.Revision(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("store: periodic compaction: read revision", slog.Any("err", err))
		}
		return last // compact to it next time: it is only older then
	}
	if last <= s.CompactedRevision() || last > cur {
		return cur // nothing new, or etcd's history was replaced since
	}
	switch err := s.Compact(ctx, last); {
	case err == nil:
		s.log.Debug("store: compacted", slog.Int64("revision", last), slog.Int64("current", cur))
	case errors.Is(err, ErrCompacted), ctx.Err() != nil:
		// Someone compacted further already, or we are closing.
	default:
		s.log.Warn("store: periodic compaction", slog.Int64("revision", last), slog.Any("err", err))
	}
	return cur
}

// learnCompacted finds the oldest revision etcd still keeps and notes it as
// compacted. etcd has no call that reports it, so it bisects over reads:
// reading at revision r fails exactly when r is below the compacted one.
func (s *Store) learnCompacted(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.requestTimeout)
	defer cancel()
	cur, err := s.Revision(ctx)
	if err != nil {
		return err
	}
	lo, hi := int64(1), cur // every revision < lo is compacted; hi is readable
	for lo < hi {
		mid := lo + (hi-lo)/2
		_, err := s.client.Get(ctx, "\x00", clientv3.WithRev(mid), clientv3.WithCountOnly())
		switch {
		case err == nil:
			hi = mid
		case errors.Is(err, rpctypes.ErrCompacted):
			lo = mid + 1
		default:
			return fmt.Errorf("find compacted revision: %w", err)
		}
	}
	if lo > 1 {
		s.noteCompacted(lo)
	}
	return nil
}
