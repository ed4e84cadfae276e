package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
)

// ErrLeaseLost is what Run returns when it stopped leading because the
// lease could not be renewed in time or another candidate holds it.
var ErrLeaseLost = errors.New("leaderelection: lease lost")

// LeaderElector takes part, as one candidate, in the election held on one
// Lease. See the package doc for its guarantees.
type LeaderElector struct {
	cfg    Config
	leases *client.Client[*coordinationv1.Lease]
	log    *slog.Logger
	ran    atomic.Bool

	// Owned by the Run goroutine.
	lease      *coordinationv1.Lease // as last read or written; nil before the first
	observedAt time.Time             // when lease.Spec was first seen as it is now
	reported   string                // the holder last seen, for OnNewLeader
	notify     chan string           // to the OnNewLeader goroutine; holds the latest unreported holder

	mu sync.Mutex
	// holder is lease's holderIdentity, "" when none or no lease seen.
	holder string
	// leading is true from acquiring the lease until leadership ends;
	// while leading, IsLeader is true until validUntil, which is
	// RenewDeadline after the start of the last successful renewal: by
	// then the Run goroutine has stopped leading if it could not renew,
	// and no other candidate can take over before LeaseDuration.
	leading    bool
	validUntil time.Time
	renewedAt  time.Time // start of the last successful acquire or renewal
}

// New checks cfg, fills in its defaults and returns a candidate ready to
// Run.
func New(cfg Config) (*LeaderElector, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &LeaderElector{
		cfg:    cfg,
		leases: client.For[*coordinationv1.Lease](cfg.Client),
		log:    cfg.Logger.With("lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity),
	}, nil
}

// IsLeader reports whether this candidate leads now: it holds the lease and
// is within RenewDeadline of its last renewal. A manager publishes it as the
// leader_election_master_status gauge.
func (le *LeaderElector) IsLeader() bool {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.leading && le.cfg.Clock.Now().Before(le.validUntil)
}

// GetLeader returns the holder of the lease as last seen, "" when there is
// none (not yet seen, or released).
func (le *LeaderElector) GetLeader() string {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.holder
}

// Check is a health check for a manager's /healthz: it fails when this
// candidate believes it leads but has not renewed for LeaseDuration plus
// maxTolerableExpiredLease, which means its Run goroutine is stuck. A
// candidate that does not lead is healthy.
func (le *LeaderElector) Check(maxTolerableExpiredLease time.Duration) error {
	le.mu.Lock()
	defer le.mu.Unlock()
	if !le.leading {
		return nil
	}
	if since := le.cfg.Clock.Now().Sub(le.renewedAt); since > le.cfg.LeaseDuration+maxTolerableExpiredLease {
		return fmt.Errorf("leaderelection: lease %s/%s not renewed for %v", le.cfg.Namespace, le.cfg.Name, since.Round(time.Millisecond))
	}
	return nil
}

// Run takes part in the election until ctx is done or leadership is lost:
//
//  1. Try to acquire the lease every RetryPeriod (with jitter).
//  2. Once acquired, start OnStartedLeading in a goroutine and renew the
//     lease every RetryPeriod.
//  3. When a renewal has not succeeded within RenewDeadline, or ctx is
//     done: stop leading (IsLeader turns false), cancel OnStartedLeading's
//     context and wait for it to return.
//  4. With ReleaseOnCancel, if ctx is done, release the lease.
//  5. Call OnStoppedLeading and return.
//
// Run returns nil when ctx is done and ErrLeaseLost when leadership was
// lost. A LeaderElector runs once; a second Run returns an error.
func (le *LeaderElector) Run(ctx context.Context) error {
	if !le.ran.CompareAndSwap(false, true) {
		return errors.New("leaderelection: Run called twice")
	}
	if le.cfg.OnNewLeader != nil {
		le.notify = make(chan string, 1)
		var wg sync.WaitGroup
		wg.Go(func() {
			for id := range le.notify {
				le.cfg.OnNewLeader(id)
			}
		})
		defer wg.Wait()
		defer close(le.notify)
	}

	le.log.Info("leaderelection: trying to acquire the lease")
	if !le.acquire(ctx) {
		return nil
	}
	le.log.Info("leaderelection: acquired the lease, started leading")
	leaderCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	led := make(chan struct{})
	go func() {
		defer close(led)
		if le.cfg.OnStartedLeading != nil {
			le.cfg.OnStartedLeading(leaderCtx)
		}
	}()

	err := le.renew(ctx)
	le.mu.Lock()
	le.leading = false
	le.mu.Unlock()
	cancel()
	if err != nil {
		le.log.Warn("leaderelection: stopped leading", "err", err)
	} else {
		le.log.Info("leaderelection: stopped leading: cancelled")
	}
	<-led
	if err == nil && le.cfg.ReleaseOnCancel {
		le.release(ctx)
	}
	if le.cfg.OnStoppedLeading != nil {
		le.cfg.OnStoppedLeading()
	}
	return err
}

// acquire tries to acquire the lease until it does (true) or ctx is done
// (false).
func (le *LeaderElector) acquire(ctx context.Context) bool {
	for {
		start := le.cfg.Clock.Now()
		actx, cancel := context.WithTimeout(ctx, le.cfg.RenewDeadline)
		ok := le.tryAcquireOrRenew(actx, start, false)
		cancel()
		if ctx.Err() != nil {
			return false
		}
		if ok {
			le.mu.Lock()
			le.leading, le.renewedAt, le.validUntil = true, start, start.Add(le.cfg.RenewDeadline)
			le.mu.Unlock()
			return true
		}
		jitter := time.Duration(rand.Float64() * JitterFactor * float64(le.cfg.RetryPeriod))
		if !le.sleep(ctx, le.cfg.RetryPeriod+jitter) {
			return false
		}
	}
}

// renew renews the lease every RetryPeriod until ctx is done (nil) or a
// renewal has failed until RenewDeadline after the last good one, or
// another candidate holds the lease (ErrLeaseLost).
func (le *LeaderElector) renew(ctx context.Context) error {
	for {
		if !le.sleep(ctx, le.cfg.RetryPeriod) {
			return nil
		}
		for renewed := false; !renewed; {
			start := le.cfg.Clock.Now()
			le.mu.Lock()
			until := le.validUntil
			le.mu.Unlock()
			if !start.Before(until) {
				return fmt.Errorf("%w: not renewed within %v", ErrLeaseLost, le.cfg.RenewDeadline)
			}
			rctx, cancel := context.WithTimeout(ctx, until.Sub(start))
			ok := le.tryAcquireOrRenew(rctx, start, true)
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			if ok {
				if renewed = le.extend(start); !renewed {
					return fmt.Errorf("%w: renewed after the deadline", ErrLeaseLost)
				}
				le.log.Debug("leaderelection: renewed the lease")
				continue
			}
			if h := le.GetLeader(); h != le.cfg.Identity {
				return fmt.Errorf("%w: held by %q", ErrLeaseLost, h)
			}
			if !le.sleep(ctx, min(le.cfg.RetryPeriod, until.Sub(le.cfg.Clock.Now()))) {
				return nil
			}
		}
	}
}

// extend records a renewal that started at start, unless IsLeader has
// already turned false meanwhile: then leadership is over whatever the
// server says.
func (le *LeaderElector) extend(start time.Time) bool {
	le.mu.Lock()
	defer le.mu.Unlock()
	if !le.cfg.Clock.Now().Before(le.validUntil) {
		return false
	}
	le.renewedAt, le.validUntil = start, start.Add(le.cfg.RenewDeadline)
	return true
}

// sleep waits for d or until ctx is done, and reports whether ctx is still
// live.
func (le *LeaderElector) sleep(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(ctx, le.cfg.Clock, d)
}
