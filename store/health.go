package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

const (
	// healthInterval is how often the Store probes etcd.
	healthInterval = time.Second
	// healthTimeout bounds one probe: kube-apiserver's default
	// --etcd-healthcheck-timeout.
	healthTimeout = 2 * time.Second
	// healthKey is the key a probe reads, as etcd's own /health does; it
	// never exists.
	healthKey = "health"
	// failFastAfter is how long etcd must go without answering a probe
	// before requests stop waiting for it. A loaded etcd can miss one
	// probe's deadline and still answer every request: failing all of
	// them for one slow read would turn slowness into an outage.
	failFastAfter = 5 * time.Second
)

// Health reports whether etcd answered the Store's latest probe: nil if
// it did, or an error wrapping ErrUnavailable that says why not. The Store
// probes every second with a linearizable read that must answer within
// two seconds (kube-apiserver's etcd check), so Health turns to an error
// within about three seconds of etcd becoming unreachable, and back to nil
// within a second of its return.
//
// Once etcd has answered no probe for five seconds (failFastAfter), every
// request fails at once with ErrUnavailable instead of waiting for its
// deadline, until a probe is answered again; watches stay open and resume
// where they were when etcd returns. Until then, a request waits for etcd
// as long as its deadline allows, as every kube-apiserver request does.
func (s *Store) Health() error {
	if err := s.unhealthy.Load(); err != nil {
		return *err
	}
	return nil
}

// healthLoop probes etcd every interval until ctx ends, and decides when
// requests stop waiting for it (down).
func (s *Store) healthLoop(ctx context.Context) {
	t := time.NewTicker(healthInterval)
	defer t.Stop()
	var silentSince time.Time // when the first unanswered probe of a run was sent; zero while etcd answers
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		if s.probe(ctx) {
			silentSince = time.Time{}
			s.down.Store(false)
			continue
		}
		if silentSince.IsZero() {
			silentSince = sent
		}
		if time.Since(silentSince) >= failFastAfter {
			s.down.Store(true)
		}
	}
}

// probe reads healthKey, records the outcome in Health and reports
// whether etcd answered. Its answer is
// checked against the Store's history like any other, so a probe is also
// how the Store notices, within a second of etcd's return, that etcd lost
// its data while it was away.
func (s *Store) probe(ctx context.Context) (answered bool) {
	h := s.hist.Load()
	floor := h.floor.Load()
	pctx, cancel := context.WithTimeout(ctx, healthTimeout)
	resp, err := s.client.Get(pctx, healthKey)
	cancel()
	if ctx.Err() != nil {
		return true // closing
	}
	if err == nil {
		s.observe(h, floor, resp.Header)
	}
	s.setHealth(err)
	return err == nil
}

// setHealth records a probe's outcome, and logs when it changes.
func (s *Store) setHealth(err error) {
	if err == nil {
		if was := s.unhealthy.Swap(nil); was != nil {
			s.log.Info("etcd is reachable again")
		}
		return
	}
	err = fmt.Errorf("%w: %v", ErrUnavailable, err)
	if was := s.unhealthy.Swap(&err); was == nil {
		s.log.Warn("etcd is unreachable: requests fail until it answers again", slog.Any("err", err))
	}
}
