// Package etcdtest runs a real etcd for tests and fails it on purpose, the
// ways etcd fails under a control plane:
//   - Pause: a stopped process (SIGSTOP, a frozen VM). Connections stay
//     open, new ones are accepted, and nothing answers until Resume.
//   - Kill: a dead process. Every connection is cut and new ones are
//     closed at once, until Restart brings etcd back on the same data.
//   - Wipe: etcd lost its data and starts empty: a new cluster whose
//     revisions start again from 1.
//
// The etcd is an embedded member in the test's process, reached through a
// TCP proxy on loopback: URL stays the same through kills, restarts and
// wipes, while the member behind it changes.
package etcdtest

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/minictl/minictl/store"
)

// Etcd is one etcd for a test. Its methods are for the test's goroutine.
type Etcd struct {
	// URL is what clients dial: "http://127.0.0.1:port".
	URL string

	t      testing.TB
	proxy  *proxy
	dir    string
	member *store.Store // nil while killed
}

// startTimeout bounds starting the member.
const startTimeout = 30 * time.Second

// Start starts an empty etcd; it is stopped when the test ends.
func Start(t testing.TB) *Etcd {
	t.Helper()
	p, err := newProxy()
	if err != nil {
		t.Fatalf("etcdtest: proxy: %v", err)
	}
	e := &Etcd{URL: "http://" + p.addr(), t: t, proxy: p, dir: t.TempDir()}
	t.Cleanup(func() {
		p.close()
		e.stopMember()
	})
	e.startMember()
	return e
}

// Member is the running member, reached without the proxy (so even while
// paused); nil while killed.
func (e *Etcd) Member() *store.Store { return e.member }

// Pause holds every byte between clients and etcd, both ways, until
// Resume.
func (e *Etcd) Pause() { e.proxy.pause() }

// Resume lets what Pause held flow again.
func (e *Etcd) Resume() { e.proxy.resume() }

// Kill stops etcd: its connections are cut, new ones are closed at once.
func (e *Etcd) Kill() {
	e.t.Helper()
	e.proxy.setTarget("")
	e.proxy.cutAll()
	e.stopMember()
}

// Restart starts etcd again on the data it had, after Kill.
func (e *Etcd) Restart() {
	e.t.Helper()
	e.startMember()
}

// Wipe kills etcd if it runs and starts it again with no data: a new
// cluster, whose revisions start again from 1. A paused etcd stays
// paused.
func (e *Etcd) Wipe() {
	e.t.Helper()
	if e.member != nil {
		e.Kill()
	}
	e.dir = e.t.TempDir()
	e.startMember()
}

func (e *Etcd) startMember() {
	e.t.Helper()
	if e.member != nil {
		e.t.Fatal("etcdtest: etcd is running already")
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	m, err := store.Open(ctx, store.Config{DataDir: e.dir, ClientURL: "http://127.0.0.1:0", CompactionInterval: -1})
	if err != nil {
		e.t.Fatalf("etcdtest: start etcd in %s: %v", e.dir, err)
	}
	e.member = m
	u, err := url.Parse(m.Endpoints()[0])
	if err != nil {
		e.t.Fatalf("etcdtest: etcd's client URL: %v", err)
	}
	e.proxy.setTarget(u.Host)
}

func (e *Etcd) stopMember() {
	if e.member == nil {
		return
	}
	if err := e.member.Close(); err != nil {
		e.t.Errorf("etcdtest: stop etcd: %v", err)
	}
	e.member = nil
}
