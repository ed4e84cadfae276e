package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// startMembers starts a new cluster of n members in dirs of their own, as
// n `minictl etcd` would, and waits until every member is ready. Each is
// closed when the test ends, unless the test closed it first.
func startMembers(t *testing.T, n int) ([]MemberConfig, []*Member) {
	t.Helper()
	cfgs := make([]MemberConfig, n)
	var cluster []string
	for i := range cfgs {
		peer, err := resolvePort(&url.URL{Scheme: "http", Host: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		cfgs[i] = MemberConfig{
			Name:       fmt.Sprintf("etcd-%d", i+1),
			DataDir:    t.TempDir(),
			ClientURLs: []url.URL{{Scheme: "http", Host: "127.0.0.1:0"}},
			PeerURLs:   []url.URL{*peer},
			// Short, but long enough that a loaded test machine does not
			// call elections for nothing.
			HeartbeatInterval:      50 * time.Millisecond,
			ElectionTimeout:        500 * time.Millisecond,
			ProgressNotifyInterval: testProgressInterval,
		}
		cluster = append(cluster, cfgs[i].Name+"="+peer.String())
	}
	members := make([]*Member, n)
	for i := range cfgs {
		cfgs[i].InitialCluster = strings.Join(cluster, ",")
		members[i] = startMember(t, cfgs[i])
	}
	for _, m := range members {
		waitReady(t, m)
	}
	return cfgs, members
}

func startMember(t *testing.T, cfg MemberConfig) *Member {
	t.Helper()
	m, err := StartMember(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func waitReady(t *testing.T, m *Member) {
	t.Helper()
	select {
	case <-m.Ready():
	case err := <-m.Err():
		t.Fatalf("member failed: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("member not ready after 30s")
	}
}

// TestMemberCluster runs a cluster of three members, closes its leader
// under a client of all three, and restarts it: the client's writes carry
// on with the two left, and the restarted member catches up with what it
// missed.
func TestMemberCluster(t *testing.T) {
	cfgs, members := startMembers(t, 3)
	var endpoints []string
	for _, m := range members {
		endpoints = append(endpoints, m.ClientURLs()...)
	}
	s := openStore(t, Config{Endpoints: endpoints})
	before := mustCreate(t, s, "/registry/a", "1")

	leader := -1
	for i, m := range members {
		if m.etcd.Server.Leader() == m.etcd.Server.MemberID() {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no member leads")
	}
	members[leader].Close()

	// Writes may fail while the two left elect a leader, and succeed
	// within a few election timeouts.
	deadline := time.Now().Add(20 * time.Second)
	var after int64
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		rev, err := s.Create(ctx, "/registry/b", []byte("2"))
		cancel()
		if err == nil {
			after = rev
			break
		}
		if errors.Is(err, ErrExists) { // an earlier try went through after all
			kv, err := s.Get(testCtx(t), "/registry/b")
			if err != nil {
				t.Fatal(err)
			}
			after = kv.Revision
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write succeeded within 20s of the leader's close: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if after <= before {
		t.Errorf("revision went from %d to %d across the failover", before, after)
	}

	// Restarted on its data dir, the old leader rejoins and catches up.
	restarted := startMember(t, cfgs[leader])
	waitReady(t, restarted)
	alone := openStore(t, Config{Endpoints: restarted.ClientURLs()})
	deadline = time.Now().Add(20 * time.Second)
	for {
		kv, err := alone.Get(testCtx(t), "/registry/b")
		if err == nil {
			if string(kv.Value) != "2" || kv.Revision != after {
				t.Fatalf("restarted member has /registry/b = %q at %d, want %q at %d", kv.Value, kv.Revision, "2", after)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted member does not have the write it missed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStartMemberNeedsNameAndURLs(t *testing.T) {
	for _, cfg := range []MemberConfig{
		{DataDir: t.TempDir(), ClientURLs: []url.URL{{Scheme: "http", Host: "127.0.0.1:0"}}, PeerURLs: []url.URL{{Scheme: "http", Host: "127.0.0.1:0"}}},
		{Name: "a", DataDir: t.TempDir()},
	} {
		if m, err := StartMember(cfg); err == nil {
			m.Close()
			t.Errorf("StartMember(%+v) started", cfg)
		}
	}
}
