package store

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// history is one etcd history: one cluster, and the revisions it has
// shown. A Store follows one at a time. Revisions within a history only
// grow, so an answer that shows another cluster, or a revision below one
// the history had already committed when the request was sent, means etcd
// lost its data or is another etcd: the Store starts a new history (see
// observe).
type history struct {
	clusterID uint64
	// floor is the highest revision known to be committed in this
	// history: of an answer, or of a watch event or progress notification.
	// A linearizable read or a write sent after floor was read can never
	// report a lower revision.
	floor atomic.Int64
	// replaced is closed when the Store moves on to a new history.
	replaced chan struct{}
}

func newHistory(hdr *etcdserverpb.ResponseHeader) *history {
	h := &history{clusterID: hdr.ClusterId, replaced: make(chan struct{})}
	h.floor.Store(hdr.Revision)
	return h
}

// raise notes that rev is committed in h.
func (h *history) raise(rev int64) {
	for {
		cur := h.floor.Load()
		if rev <= cur || h.floor.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// observe checks the header of an answer to a request sent while the Store
// followed h, whose floor was then floor; reads are linearizable and writes
// go through raft, so within one history the answer's revision is at
// least floor. If it is not, or the answer comes from another cluster, the
// Store starts a new history at the answer.
func (s *Store) observe(h *history, floor int64, hdr *etcdserverpb.ResponseHeader) {
	if hdr == nil {
		return
	}
	if hdr.ClusterId == h.clusterID && hdr.Revision >= floor {
		h.raise(hdr.Revision)
		return
	}
	s.replaceHistory(h, hdr, floor)
}

// replaceHistory makes the history hdr shows the Store's, unless old is no
// longer the current one (another answer replaced it first). Every watch
// begun in old ends with ErrHistoryReset, and what the Store had learned of
// compaction is forgotten.
func (s *Store) replaceHistory(old *history, hdr *etcdserverpb.ResponseHeader, floor int64) {
	s.histMu.Lock()
	defer s.histMu.Unlock()
	if s.hist.Load() != old {
		return // an answer sent before another reset; the new history stands
	}
	s.hist.Store(newHistory(hdr))
	s.compacted.Store(0)
	close(old.replaced)
	if hdr.ClusterId != old.clusterID {
		s.log.Error("etcd is another cluster now: everything read before is gone; watches end and readers must list again",
			slog.String("cluster", fmt.Sprintf("%x", hdr.ClusterId)), slog.String("previousCluster", fmt.Sprintf("%x", old.clusterID)),
			slog.Int64("revision", hdr.Revision))
		return
	}
	s.log.Error("etcd went back in time (wiped, or restored from an older backup): everything read before is gone; watches end and readers must list again",
		slog.Int64("revision", hdr.Revision), slog.Int64("previousRevision", floor))
}

// currentHistory is the history the Store follows now.
func (s *Store) currentHistory() *history { return s.hist.Load() }
