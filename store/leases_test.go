package store

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// leaseOf is the lease key is held by (0: none).
func leaseOf(t *testing.T, s *Store, key string) clientv3.LeaseID {
	t.Helper()
	resp, err := s.client.Get(testCtx(t), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get %s: %v (%d keys)", key, err, len(resp.Kvs))
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

// Keys written to expire share a lease, as kube-apiserver's Events do, and
// etcd deletes them when it runs out; other keys stay.
func TestExpiringKeys(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{})
	ctx := testCtx(t)

	const a, b, kept = "/registry/core/events/default/a", "/registry/core/events/default/b", "/registry/core/configmaps/default/kept"
	if _, err := s.CreateExpiring(ctx, a, []byte(`{"v":1}`), time.Hour); err != nil {
		t.Fatalf("create %s: %v", a, err)
	}
	rev, err := s.CreateExpiring(ctx, b, []byte(`{"v":1}`), time.Hour)
	if err != nil {
		t.Fatalf("create %s: %v", b, err)
	}
	mustCreate(t, s, kept, `{}`)
	if la, lb := leaseOf(t, s, a), leaseOf(t, s, b); la == 0 || la != lb {
		t.Errorf("leases %x and %x, want one shared by both writes", la, lb)
	}
	if l := leaseOf(t, s, kept); l != 0 {
		t.Errorf("a key written to stay has lease %x", l)
	}
	ttl, err := s.client.TimeToLive(ctx, leaseOf(t, s, a))
	if err != nil {
		t.Fatalf("lease TTL: %v", err)
	}
	if got := time.Duration(ttl.GrantedTTL) * time.Second; got < time.Hour || got > time.Hour+leaseReuse {
		t.Errorf("the lease is granted for %v, want between the ttl and the ttl plus %v", got, leaseReuse)
	}

	// An update with a short ttl moves the key to a lease of that ttl;
	// a plain update takes the key off any lease.
	if _, err := s.UpdateExpiring(ctx, b, []byte(`{"v":2}`), rev, 2*time.Second); err != nil {
		t.Fatalf("update %s: %v", b, err)
	}
	if lb := leaseOf(t, s, b); lb == 0 || lb == leaseOf(t, s, a) {
		t.Errorf("after an update with another ttl, %s holds lease %x", b, lb)
	}
	kv, err := s.Get(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, a, []byte(`{"v":2}`), kv.Revision); err != nil {
		t.Fatalf("update %s: %v", a, err)
	}
	if l := leaseOf(t, s, a); l != 0 {
		t.Errorf("after a plain update, %s holds lease %x", a, l)
	}

	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := s.Get(ctx, b)
		if errors.Is(err, ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still there (err %v) 15s after it was written to expire in 2s", b, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, k := range []string{a, kept} {
		if _, err := s.Get(ctx, k); err != nil {
			t.Errorf("%s, written to stay, is gone: %v", k, err)
		}
	}
}
