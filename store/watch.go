package store

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// EventType says what a WatchEvent changed. The zero value is neither: it is
// the type of progress and error events.
type EventType int

const (
	// Put: the key was created or updated.
	Put EventType = iota + 1
	// Delete: the key was deleted.
	Delete
)

func (t EventType) String() string {
	switch t {
	case Put:
		return "PUT"
	case Delete:
		return "DELETE"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// WatchEvent is one change, one progress notification, or the error that
// ends a watch.
type WatchEvent struct {
	Type EventType
	Key  string
	// Value is the new value of a Put.
	Value []byte
	// PrevValue is the value before the change: set on a Delete and on a
	// Put that updated an existing key, unless the revision just before the
	// change has been compacted.
	PrevValue []byte
	// Revision is the revision of this change; for a progress notification,
	// the revision up to which nothing under the prefix has changed.
	Revision int64
	// Created marks a Put that created the key.
	Created bool
	// Progress marks a progress notification: no change under the prefix
	// up to Revision.
	Progress bool
	// Err is set on the last event of a watch that ended for another reason
	// than its context: it wraps ErrCompacted when fromRevision is older
	// than the oldest revision kept. The channel closes after it.
	Err error
}

// Watch returns every change under prefix with revision >= fromRevision (0
// means changes after now), in revision order, with previous values. While
// nothing under prefix changes it sends progress notifications, once the
// store's revision has reached fromRevision. The channel closes when ctx
// ends, or after an event with Err set. A caller that stops receiving must
// cancel ctx, which ends the watch's goroutine.
//
// A watch outlives etcd's outages: when etcd returns, it resumes where it
// was. It ends with ErrHistoryReset when etcd turns out to have lost the
// history it was following (see ErrHistoryReset), and fails at once with
// it when fromRevision is beyond what the Store has seen of etcd's current
// history: fromRevision - 1 must be a revision the Store reported (of a
// write, a read, or a watch event), which a revision from a lost history
// no longer is.
func (s *Store) Watch(ctx context.Context, prefix string, fromRevision int64) <-chan WatchEvent {
	out := make(chan WatchEvent)
	hist := s.hist.Load()
	if fromRevision-1 > hist.floor.Load() {
		err := fmt.Errorf("store: watch %s from revision %d: etcd is at %d: %w", prefix, fromRevision, hist.floor.Load(), ErrHistoryReset)
		go func() {
			defer close(out)
			select {
			case out <- WatchEvent{Err: err}:
			case <-ctx.Done():
			}
		}()
		return out
	}
	w := s.watches.open(ctx, prefix)
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithProgressNotify()}
	if fromRevision > 0 {
		opts = append(opts, clientv3.WithRev(fromRevision))
	}
	wch := s.client.Watch(w.ctx, prefix, opts...)

	go func() {
		defer close(out)
		defer s.watches.close(w)
		send := func(ev WatchEvent) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for {
			var resp clientv3.WatchResponse
			var ok bool
			select {
			case resp, ok = <-wch:
			case <-ctx.Done():
				// Ended by its owner: return at once rather than wait for
				// etcd's client to close wch. Its in-process client can
				// stall a stream that is sending events while a watch on it
				// is cancelled, and then never closes wch.
				return
			case <-hist.replaced:
				send(WatchEvent{Err: fmt.Errorf("store: watch %s: %w", prefix, ErrHistoryReset)})
				return
			}
			if !ok {
				break
			}
			if err := s.watchError(resp, prefix, fromRevision); err != nil {
				if ctx.Err() == nil {
					send(WatchEvent{Err: err})
				}
				return
			}
			if id := resp.Header.ClusterId; id != 0 && id != hist.clusterID {
				// Resumed on another cluster: none of its events belong here.
				s.replaceHistory(hist, &resp.Header, hist.floor.Load())
				send(WatchEvent{Err: fmt.Errorf("store: watch %s: %w", prefix, ErrHistoryReset)})
				return
			}
			// What a watch reports is committed: a later watch may start
			// from it (see the check above).
			hist.raise(resp.Header.Revision)
			if resp.IsProgressNotify() {
				if !send(WatchEvent{Progress: true, Revision: resp.Header.Revision}) {
					return
				}
				continue
			}
			for _, ev := range resp.Events {
				if !send(watchEvent(ev)) {
					return
				}
			}
		}
		if ctx.Err() == nil {
			send(WatchEvent{Err: fmt.Errorf("store: watch %s: closed by the store", prefix)})
		}
	}()
	return out
}

// RequestProgress asks etcd to send every open watch on prefix, at once, a
// progress notification: such a watch then learns the store's current
// revision even when nothing under its prefix changed, without waiting for
// the periodic one. A watch still being set up when the request arrives may
// miss it; ask again.
func (s *Store) RequestProgress(ctx context.Context, prefix string) error {
	for _, w := range s.watches.on(prefix) {
		if err := s.watches.requestProgress(ctx, s.client, w); err != nil {
			return fmt.Errorf("store: request progress on %s: %w", prefix, err)
		}
	}
	return nil
}

// watches are the Store's open etcd watches, each on a gRPC stream of its
// own.
//
// clientv3 multiplexes every watch whose context carries the same outgoing
// metadata onto one stream. Sharing one stream would tie every watch of the
// Store to the slowest: etcd's in-process client can stall a stream for
// good when a watch on it is cancelled while events are in flight, and
// custom resources come and go, cancelling their watches. So each watch's
// context carries metadata naming that watch alone, and a progress request,
// which etcd answers on the stream it arrives on, is sent on the stream of
// each watch it is meant for.
type watches struct {
	next     atomic.Int64
	mu       sync.Mutex
	byPrefix map[string]map[*openWatch]struct{}
}

// openWatch is one etcd watch and the context that names its stream.
type openWatch struct {
	prefix string
	ctx    context.Context
	cancel context.CancelFunc
	md     metadata.MD

	// mu orders a progress request before the watch's cancellation:
	// clientv3 opens a new stream, never closed, for a progress request
	// whose stream has gone, so none may be sent once closed is set.
	mu     sync.Mutex
	closed bool
}

// progressTimeout bounds one progress request, so that a stalled stream
// delays its own watch's end by at most this much.
const progressTimeout = time.Second

func (ws *watches) open(ctx context.Context, prefix string) *openWatch {
	// Requiring a leader makes a watch on a partitioned member fail instead
	// of going silent. WithRequireLeader replaces the outgoing metadata, so
	// the watch's own name is added after it.
	ctx = metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx),
		"minictl-watch", strconv.FormatInt(ws.next.Add(1), 10))
	md, _ := metadata.FromOutgoingContext(ctx)
	w := &openWatch{prefix: prefix, md: md}
	w.ctx, w.cancel = context.WithCancel(ctx)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.byPrefix == nil {
		ws.byPrefix = make(map[string]map[*openWatch]struct{})
	}
	if ws.byPrefix[prefix] == nil {
		ws.byPrefix[prefix] = make(map[*openWatch]struct{})
	}
	ws.byPrefix[prefix][w] = struct{}{}
	return w
}

// close cancels w's etcd watch, which ends its stream.
func (ws *watches) close(w *openWatch) {
	w.mu.Lock()
	w.closed = true
	w.cancel()
	w.mu.Unlock()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.byPrefix[w.prefix], w)
	if len(ws.byPrefix[w.prefix]) == 0 {
		delete(ws.byPrefix, w.prefix)
	}
}

// on returns the open watches on prefix.
func (ws *watches) on(prefix string) []*openWatch {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := make([]*openWatch, 0, len(ws.byPrefix[prefix]))
	for w := range ws.byPrefix[prefix] {
		out = append(out, w)
	}
	return out
}

// requestProgress asks etcd for a progress notification on w's stream,
// unless w has closed.
func (ws *watches) requestProgress(ctx context.Context, c *clientv3.Client, w *openWatch) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(ctx, w.md), progressTimeout)
	defer cancel()
	return c.RequestProgress(ctx)
}

// watchError returns why resp ends the watch, or nil if it does not.
func (s *Store) watchError(resp clientv3.WatchResponse, prefix string, fromRevision int64) error {
	if resp.CompactRevision != 0 {
		s.noteCompacted(resp.CompactRevision)
		return fmt.Errorf("%w: watch %s from revision %d: oldest kept is %d", ErrCompacted, prefix, fromRevision, resp.CompactRevision)
	}
	if err := resp.Err(); err != nil {
		return fmt.Errorf("store: watch %s: %w", prefix, err)
	}
	if resp.Canceled {
		return fmt.Errorf("store: watch %s: canceled by etcd", prefix)
	}
	return nil
}

func watchEvent(ev *clientv3.Event) WatchEvent {
	out := WatchEvent{Key: string(ev.Kv.Key), Revision: ev.Kv.ModRevision}
	switch ev.Type {
	case mvccpb.PUT:
		out.Type = Put
		out.Value = ev.Kv.Value
		out.Created = ev.IsCreate()
	case mvccpb.DELETE:
		out.Type = Delete
	}
	if ev.PrevKv != nil {
		out.PrevValue = ev.PrevKv.Value
	}
	return out
}
