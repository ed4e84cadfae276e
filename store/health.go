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
)

// Health reports whether etcd answered the Store's latest probe: nil if
// it did, or an error wrapping ErrUnavailable that says why not. The Store
// probes every second with a linearizable read that must answer within
// two seconds (kube-apiserver's etcd check), so Health turns to an error
// within about three seconds of etcd becoming unreachable, and back to nil
// within a second of its return.
//
// While Health is an error, every request fails at once with it instead
// of waiting for its deadline; watches stay open and resume where they
// were when etcd returns.
func (s *Store) Health() error {
	if err := s.unhealthy.Load(); err != nil {
		return *err
	}
	return nil
}

// healthLoop probes etcd every interval until ctx ends.
func (s *Store) healthLoop(ctx context.Context) {
	t := time.NewTicker(healthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.probe(ctx)
	}
}

// probe reads healthKey and records the outcome in Health. Its answer is
// checked against the Store's history like any other, so a probe is also
// how the Store notices, within a second of etcd's return, that etcd lost
// its data while it was away.
func (s *Store) probe(ctx context.Context) {
	h := s.hist.Load()
	floor := h.floor.Load()
	pctx, cancel := context.WithTimeout(ctx, healthTimeout)
	resp, err := s.client.Get(pctx, healthKey)
	cancel()
	if ctx.Err() != nil {
		return // closing
	}
	if err == nil {
		s.observe(h, floor, resp.Header)
	}
	s.setHealth(err)
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
