package store

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unsafe"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// KeyValue is one key as stored.
type KeyValue struct {
	Key   string
	Value []byte
	// Revision is the revision of the key's last write (etcd's mod revision).
	Revision int64
}

// ListOptions select a page of a List.
type ListOptions struct {
	// Revision reads the state as of this revision; 0 means the latest.
	Revision int64
	// Limit caps the number of items; 0 means all.
	Limit int64
	// StartKey is the first key to return (inclusive); "" means the start of
	// the prefix. To read the next page, pass the last key returned + "\x00"
	// and the first page's Revision.
	StartKey string
}

// ListResult is one page of a List.
type ListResult struct {
	// Items are sorted by key.
	Items []KeyValue
	// Revision is the revision the page was read at: opts.Revision when
	// given, else the store's revision at the time of the read.
	Revision int64
	// More reports that keys after the last item remain.
	More bool
	// RemainingItemCount is how many keys remain after this page.
	RemainingItemCount int64
}

// Create writes key only if it is absent, and returns the write's revision.
// It fails with ErrExists if the key is present.
func (s *Store) Create(ctx context.Context, key string, value []byte) (int64, error) {
	return s.CreateExpiring(ctx, key, value, 0)
}

// CreateExpiring is Create of a key that etcd deletes by itself ttl after
// the write, or up to a minute later (see leases); 0: never.
func (s *Store) CreateExpiring(ctx context.Context, key string, value []byte, ttl time.Duration) (int64, error) {
	o, err := s.start(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: create %s: %w", key, err)
	}
	resp, err := s.leases.put(o.ctx, s.client, ttl, func(opts ...clientv3.OpOption) (*clientv3.TxnResponse, error) {
		return s.client.Txn(o.ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, unsafeString(value), opts...)).
			Commit()
	})
	if err != nil {
		return 0, fmt.Errorf("store: create %s: %w", key, o.fail(err))
	}
	o.done(resp.Header)
	if !resp.Succeeded {
		return 0, fmt.Errorf("store: create %s: %w", key, ErrExists)
	}
	return resp.Header.Revision, nil
}

// CreateAll writes every key of kvs only if none of them is present, in
// one transaction, and returns the write's revision: the keys appear
// together or not at all, with one round trip to etcd. If some are
// present it fails with ErrExists and returns those keys, in kvs' order.
func (s *Store) CreateAll(ctx context.Context, kvs []KeyValue) (int64, []string, error) {
	cmps := make([]clientv3.Cmp, len(kvs))
	puts := make([]clientv3.Op, len(kvs))
	reads := make([]clientv3.Op, len(kvs))
	for i, kv := range kvs {
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(kv.Key), "=", 0)
		puts[i] = clientv3.OpPut(kv.Key, unsafeString(kv.Value))
		reads[i] = clientv3.OpGet(kv.Key, clientv3.WithCountOnly())
	}
	first := ""
	if len(kvs) > 0 {
		first = kvs[0].Key
	}
	o, err := s.start(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("store: create %s: %w", first, err)
	}
	resp, err := s.client.Txn(o.ctx).If(cmps...).Then(puts...).Else(reads...).Commit()
	if err != nil {
		return 0, nil, fmt.Errorf("store: create %s: %w", first, o.fail(err))
	}
	o.done(resp.Header)
	if !resp.Succeeded {
		var present []string
		for i, r := range resp.Responses {
			if r.GetResponseRange().GetCount() > 0 {
				present = append(present, kvs[i].Key)
			}
		}
		return 0, present, fmt.Errorf("store: create %s: %w", strings.Join(present, ", "), ErrExists)
	}
	return resp.Header.Revision, nil, nil
}

// Get reads the latest value of key; ErrNotFound if it is absent.
func (s *Store) Get(ctx context.Context, key string) (*KeyValue, error) {
	o, err := s.start(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: get %s: %w", key, err)
	}
	resp, err := s.client.Get(o.ctx, key)
	if err != nil {
		return nil, fmt.Errorf("store: get %s: %w", key, o.fail(err))
	}
	o.done(resp.Header)
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("store: get %s: %w", key, ErrNotFound)
	}
	kv := resp.Kvs[0]
	return &KeyValue{Key: string(kv.Key), Value: kv.Value, Revision: kv.ModRevision}, nil
}

// List reads the keys in [max(prefix, opts.StartKey), end of prefix), sorted
// by key. A prefix that names a folder should end in "/", so that
// "/registry/pods/" does not also match "/registry/podsx/". It fails with
// ErrCompacted if opts.Revision has been compacted, and ErrFutureRevision if
// it has not been written yet.
func (s *Store) List(ctx context.Context, prefix string, opts ListOptions) (*ListResult, error) {
	start, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	if opts.StartKey > start {
		start = opts.StartKey
	}
	if start == "" {
		start = "\x00" // etcd has no empty key; this is the first one possible
	}
	// etcd returns a range in key order. A StartKey past the prefix makes
	// an empty range, which still checks the revision.
	rev := opts.Revision
	o, err := s.start(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: list %s at revision %d: %w", prefix, rev, err)
	}
	resp, err := s.client.Get(o.ctx, start, clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithLimit(opts.Limit))
	if err != nil {
		return nil, fmt.Errorf("store: list %s at revision %d: %w", prefix, rev, o.fail(err))
	}
	o.done(resp.Header)
	out := &ListResult{
		Items:    make([]KeyValue, 0, len(resp.Kvs)),
		Revision: pick(rev, resp.Header.Revision),
		More:     resp.More,
	}
	for _, kv := range resp.Kvs {
		out.Items = append(out.Items, KeyValue{Key: string(kv.Key), Value: kv.Value, Revision: kv.ModRevision})
	}
	if resp.More {
		out.RemainingItemCount = resp.Count - int64(len(resp.Kvs))
	}
	return out, nil
}

// Update replaces key's value if its revision is still expectedRevision, and
// returns the write's revision. It fails with ErrNotFound if the key is
// absent and ErrConflict if it is at another revision.
func (s *Store) Update(ctx context.Context, key string, value []byte, expectedRevision int64) (int64, error) {
	return s.UpdateExpiring(ctx, key, value, expectedRevision, 0)
}

// UpdateExpiring is Update that makes key expire ttl after this write, or
// up to a minute later (see leases), whatever an earlier write said; 0:
// never.
func (s *Store) UpdateExpiring(ctx context.Context, key string, value []byte, expectedRevision int64, ttl time.Duration) (int64, error) {
	o, err := s.start(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: update %s: %w", key, err)
	}
	resp, err := s.leases.put(o.ctx, s.client, ttl, func(opts ...clientv3.OpOption) (*clientv3.TxnResponse, error) {
		return s.client.Txn(o.ctx).
			If(
				clientv3.Compare(clientv3.CreateRevision(key), ">", 0),
				clientv3.Compare(clientv3.ModRevision(key), "=", expectedRevision),
			).
			Then(clientv3.OpPut(key, unsafeString(value), opts...)).
			Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
			Commit()
	})
	if err != nil {
		return 0, fmt.Errorf("store: update %s: %w", key, o.fail(err))
	}
	o.done(resp.Header)
	if !resp.Succeeded {
		return 0, fmt.Errorf("store: update %s: %w", key, failedPrecondition(resp, expectedRevision))
	}
	return resp.Header.Revision, nil
}

// Delete removes key and returns the delete's revision. With
// expectedRevision 0 it deletes whatever revision the key is at; otherwise
// only that revision, failing with ErrConflict if the key is at another. It
// fails with ErrNotFound if the key is absent.
func (s *Store) Delete(ctx context.Context, key string, expectedRevision int64) (int64, error) {
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), ">", 0)}
	if expectedRevision != 0 {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", expectedRevision))
	}
	o, err := s.start(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: delete %s: %w", key, err)
	}
	resp, err := s.client.Txn(o.ctx).
		If(cmps...).
		Then(clientv3.OpDelete(key)).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("store: delete %s: %w", key, o.fail(err))
	}
	o.done(resp.Header)
	if !resp.Succeeded {
		return 0, fmt.Errorf("store: delete %s: %w", key, failedPrecondition(resp, expectedRevision))
	}
	return resp.Header.Revision, nil
}

// Revision returns the store's current revision: that of the latest write.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	o, err := s.start(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: revision: %w", err)
	}
	resp, err := s.client.Get(o.ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("store: revision: %w", o.fail(err))
	}
	o.done(resp.Header)
	return resp.Header.Revision, nil
}

// failedPrecondition explains why an Update or Delete transaction took its
// Else branch, which read the key.
func failedPrecondition(resp *clientv3.TxnResponse, expected int64) error {
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return ErrNotFound
	}
	return fmt.Errorf("%w: expected revision %d, key is at %d", ErrConflict, expected, kvs[0].ModRevision)
}

// pick returns a unless it is zero, else b.
func pick(a, b int64) int64 {
	if a != 0 {
		return a
	}
	return b
}

// unsafeString is value as a string without copying it. clientv3.OpPut
// takes its value as a string and copies it into the request at once, so
// converting with string(value) would copy an object's bytes twice per
// write. value must not change until OpPut returns: Create and Update
// only read it.
func unsafeString(value []byte) string {
	return unsafe.String(unsafe.SliceData(value), len(value))
}
