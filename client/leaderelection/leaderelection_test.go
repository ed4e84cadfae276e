package leaderelection_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/leaderelection"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/internal/testenv"
)

// Short durations, so that handovers take a second or two.
const (
	leaseDuration = 1 * time.Second
	renewDeadline = 700 * time.Millisecond
	retryPeriod   = 200 * time.Millisecond
)

type fixture struct {
	env    *testenv.Env
	rc     *client.RESTClient
	leases *client.Client[*coordinationv1.Lease]
}

func setup(t *testing.T) *fixture {
	t.Helper()
	env := testenv.Start(t)
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{env: env, rc: rc, leases: client.For[*coordinationv1.Lease](rc)}
}

func (f *fixture) lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l, err := f.leases.Get(context.Background(), "kube-system", "test-lease")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// candidate is one LeaderElector running in a goroutine, with its
// callbacks turned into channels.
type candidate struct {
	*leaderelection.LeaderElector
	id         string
	cancel     context.CancelFunc
	started    chan struct{} // closed when OnStartedLeading runs
	leaderDone chan struct{} // closed when OnStartedLeading's context ends
	stopped    chan struct{} // closed when OnStoppedLeading is called
	done       chan struct{} // closed when Run returns
	err        error         // what Run returned, once done

	mu      sync.Mutex
	leaders []string // reported by OnNewLeader
}

// start runs a candidate until the test ends; edit may change its config.
func (f *fixture) start(t *testing.T, id string, edit func(*leaderelection.Config)) *candidate {
	t.Helper()
	c := &candidate{
		id: id, started: make(chan struct{}), leaderDone: make(chan struct{}),
		stopped: make(chan struct{}), done: make(chan struct{}),
	}
	cfg := leaderelection.Config{
		Client: f.rc, Namespace: "kube-system", Name: "test-lease", Identity: id,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		OnStartedLeading: func(ctx context.Context) {
			close(c.started)
			<-ctx.Done()
			close(c.leaderDone)
		},
		OnStoppedLeading: func() { close(c.stopped) },
		OnNewLeader: func(identity string) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.leaders = append(c.leaders, identity)
		},
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})).With("candidate", id),
	}
	if edit != nil {
		edit(&cfg)
	}
	le, err := leaderelection.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.LeaderElector = le
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		c.err = le.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-c.done })
	return c
}

func (c *candidate) reportedLeaders() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.leaders)
}

// await waits for ch to close, failing the test after d.
func await(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
	}
}

// mustBeClosed fails the test unless ch is closed now.
func mustBeClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	default:
		t.Fatalf("%s: has not happened", what)
	}
}

// eventually waits until cond holds, failing the test after d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pool is the candidates a test has started, for watchLeaders.
type pool struct {
	mu    sync.Mutex
	cands []*candidate
}

func (p *pool) add(cs ...*candidate) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cands = append(p.cands, cs...)
}

func (p *pool) all() []*candidate {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.cands)
}

// watchLeaders samples IsLeader of every candidate in p until the test ends
// and fails the test if two ever lead at once.
func watchLeaders(t *testing.T, p *pool) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var samples atomic.Int64
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var leading []string
			for _, c := range p.all() {
				if c.IsLeader() {
					leading = append(leading, c.id)
				}
			}
			if len(leading) > 1 {
				t.Errorf("two leaders at once: %v", leading)
				return
			}
			samples.Add(1)
			time.Sleep(200 * time.Microsecond)
		}
	})
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
		t.Logf("sampled IsLeader of %d candidates %d times", len(p.all()), samples.Load())
	})
}

// watch is watchLeaders of a fixed set.
func watch(t *testing.T, cands ...*candidate) {
	p := &pool{}
	p.add(cands...)
	watchLeaders(t, p)
}

func TestAcquireAndRenew(t *testing.T) {
	f := setup(t)
	a := f.start(t, "a", nil)
	await(t, a.started, 5*time.Second, "a starts leading")
	if !a.IsLeader() || a.GetLeader() != "a" {
		t.Fatalf("IsLeader %v, GetLeader %q; want true, a", a.IsLeader(), a.GetLeader())
	}
	if err := a.Check(0); err != nil {
		t.Errorf("Check of a fresh leader: %v", err)
	}

	l := f.lease(t)
	spec := l.Spec
	if *spec.HolderIdentity != "a" || *spec.LeaseDurationSeconds != 1 || *spec.LeaseTransitions != 0 ||
		spec.AcquireTime == nil || spec.RenewTime == nil {
		t.Fatalf("lease spec %+v; want holder a, 1s, 0 transitions, acquire and renew times", spec)
	}
	firstRenew := spec.RenewTime.Time
	eventually(t, 5*time.Second, "renewTime advances", func() bool {
		s := f.lease(t).Spec
		return s.RenewTime.After(firstRenew) && s.AcquireTime.Equal(spec.AcquireTime)
	})
	eventually(t, 5*time.Second, "OnNewLeader reports a", func() bool { return slices.Equal(a.reportedLeaders(), []string{"a"}) })
}

func TestSecondCandidateWaitsWhileFirstRenews(t *testing.T) {
	f := setup(t)
	a := f.start(t, "a", nil)
	await(t, a.started, 5*time.Second, "a starts leading")
	// b's clock is an hour ahead: to b, a's renewTime is an hour old, which
	// must not matter.
	b := f.start(t, "b", func(c *leaderelection.Config) {
		c.Clock = skewed{by: time.Hour}
	})
	watch(t, a, b)

	deadline := time.Now().Add(3 * leaseDuration)
	for time.Now().Before(deadline) {
		select {
		case <-b.started:
			t.Fatal("b started leading while a renews")
		default:
		}
		if !a.IsLeader() {
			t.Fatal("a stopped leading")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b.GetLeader() != "a" || !slices.Equal(b.reportedLeaders(), []string{"a"}) {
		t.Errorf("b sees leader %q, was told %v; want a", b.GetLeader(), b.reportedLeaders())
	}
}

// Longer durations for the handover tests, so that "at once" and "after
// LeaseDuration" are far apart.
func slowLease(c *leaderelection.Config) {
	c.LeaseDuration, c.RenewDeadline = 2*time.Second, 1400*time.Millisecond
}

func TestReleaseOnCancelHandsOverAtOnce(t *testing.T) {
	f := setup(t)
	a := f.start(t, "a", func(c *leaderelection.Config) { slowLease(c); c.ReleaseOnCancel = true })
	await(t, a.started, 5*time.Second, "a starts leading")
	b := f.start(t, "b", slowLease)
	watch(t, a, b)
	eventually(t, 5*time.Second, "b sees a lead", func() bool { return b.GetLeader() == "a" })

	cancelled := time.Now()
	a.cancel()
	await(t, a.done, 5*time.Second, "a's Run returns")
	mustBeClosed(t, a.stopped, "a's OnStoppedLeading")
	mustBeClosed(t, a.leaderDone, "a's leader context ends")
	if a.err != nil || a.IsLeader() {
		t.Errorf("a: Run returned %v, IsLeader %v; want nil, false", a.err, a.IsLeader())
	}
	await(t, b.started, 5*time.Second, "b starts leading")
	if took := time.Since(cancelled); took > 1500*time.Millisecond {
		t.Errorf("b took over %v after a released; want well under the lease duration of 2s", took)
	}
	l := f.lease(t)
	if *l.Spec.HolderIdentity != "b" || *l.Spec.LeaseTransitions != 1 {
		t.Errorf("lease held by %q after %d transitions; want b after 1", *l.Spec.HolderIdentity, *l.Spec.LeaseTransitions)
	}
	eventually(t, 5*time.Second, "b is told a, then b", func() bool { return slices.Equal(b.reportedLeaders(), []string{"a", "b"}) })
}

func TestTakeoverWithoutReleaseWaitsLeaseDuration(t *testing.T) {
	f := setup(t)
	a := f.start(t, "a", slowLease)
	await(t, a.started, 5*time.Second, "a starts leading")
	b := f.start(t, "b", slowLease)
	watch(t, a, b)
	eventually(t, 5*time.Second, "b sees a lead", func() bool { return b.GetLeader() == "a" })

	cancelled := time.Now()
	a.cancel()
	await(t, a.done, 5*time.Second, "a's Run returns")
	mustBeClosed(t, a.stopped, "a's OnStoppedLeading")
	if *f.lease(t).Spec.HolderIdentity != "a" {
		t.Fatal("a released the lease without ReleaseOnCancel")
	}
	await(t, b.started, 10*time.Second, "b starts leading")
	// a renewed at most a retry period (and a request) before the cancel;
	// b must wait the lease duration from seeing that renewal.
	if took, least := time.Since(cancelled), 2*time.Second-retryPeriod-100*time.Millisecond; took < least {
		t.Errorf("b took over %v after a stopped renewing; want at least %v", took, least)
	}
	if l := f.lease(t); *l.Spec.HolderIdentity != "b" || *l.Spec.LeaseTransitions != 1 {
		t.Errorf("lease held by %q after %d transitions; want b after 1", *l.Spec.HolderIdentity, *l.Spec.LeaseTransitions)
	}
}

func TestLeaderThatCannotRenewStops(t *testing.T) {
	f := setup(t)
	a := f.start(t, "a", nil)
	await(t, a.started, 5*time.Second, "a starts leading")
	f.env.StopServer()
	stoppedServer := time.Now()
	// a stops within RenewDeadline of its last renewal, which was before the
	// server stopped; the slack is for a loaded machine.
	await(t, a.stopped, renewDeadline+retryPeriod+time.Second, "a's OnStoppedLeading")
	t.Logf("a stopped leading %v after the server stopped", time.Since(stoppedServer).Round(time.Millisecond))
	mustBeClosed(t, a.leaderDone, "a's leader context ends")
	await(t, a.done, 5*time.Second, "a's Run returns")
	if !errors.Is(a.err, leaderelection.ErrLeaseLost) || a.IsLeader() {
		t.Errorf("Run returned %v, IsLeader %v; want ErrLeaseLost, false", a.err, a.IsLeader())
	}
}

func TestReleasedLease(t *testing.T) {
	f := setup(t)
	a := f.start(t, "a", func(c *leaderelection.Config) { c.ReleaseOnCancel = true })
	await(t, a.started, 5*time.Second, "a starts leading")
	a.cancel()
	await(t, a.done, 5*time.Second, "a's Run returns")
	s := f.lease(t).Spec
	if *s.HolderIdentity != "" || *s.LeaseDurationSeconds != 1 || *s.LeaseTransitions != 0 {
		t.Errorf("released lease: holder %q, %ds, %d transitions; want \"\", 1s, 0", *s.HolderIdentity, *s.LeaseDurationSeconds, *s.LeaseTransitions)
	}
	if a.GetLeader() != "" {
		t.Errorf("GetLeader after releasing = %q, want \"\"", a.GetLeader())
	}
}

// Candidates come and go: each round, the leader stops and one of the
// candidates that were waiting takes over, then a fresh candidate joins.
// Some release the lease, some let it expire; no two ever lead at once.
func TestNeverTwoLeaders(t *testing.T) {
	f := setup(t)
	release := func(c *leaderelection.Config) { c.ReleaseOnCancel = true }
	cands := []*candidate{f.start(t, "c0", release), f.start(t, "c1", nil), f.start(t, "c2", release)}
	var p pool
	p.add(cands...)
	watchLeaders(t, &p)
	leaderOf := func(cs []*candidate) *candidate {
		for _, c := range cs {
			if c.IsLeader() {
				return c
			}
		}
		return nil
	}
	var leader *candidate
	eventually(t, 10*time.Second, "someone leads", func() bool { leader = leaderOf(cands); return leader != nil })
	for round := range 3 {
		t.Logf("round %d: %s leads", round, leader.id)
		leader.cancel()
		await(t, leader.done, 5*time.Second, leader.id+"'s Run returns")
		cands = slices.DeleteFunc(cands, func(c *candidate) bool { return c == leader })
		eventually(t, 10*time.Second, "a waiting candidate takes over", func() bool { leader = leaderOf(cands); return leader != nil })
		next := f.start(t, fmt.Sprintf("c%d", round+3), []func(*leaderelection.Config){release, nil}[round%2])
		cands = append(cands, next)
		p.add(next)
	}
	if n := *f.lease(t).Spec.LeaseTransitions; n != 3 {
		t.Errorf("leaseTransitions = %d after three handovers, want 3", n)
	}
}

// skewed is the real clock, off by a fixed amount.
type skewed struct {
	clock.Real
	by time.Duration
}

func (s skewed) Now() time.Time { return time.Now().Add(s.by) }
