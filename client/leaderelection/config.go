package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/clock"
)

// Defaults of Config, kube-controller-manager's values.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
	// JitterFactor spreads the attempts of candidates: a candidate waits
	// between RetryPeriod and (1+JitterFactor)*RetryPeriod between attempts
	// to acquire. RenewDeadline must be more than JitterFactor*RetryPeriod.
	JitterFactor = 1.2
)

// Config configures a LeaderElector. Client, Namespace, Name and Identity
// are required; the rest have defaults.
type Config struct {
	Client *client.RESTClient
	// Namespace and Name are the coordination.k8s.io/v1 Lease the
	// candidates share ("kube-system", "minictl-controller-manager").
	Namespace, Name string
	// Identity names this candidate in the lease's holderIdentity. It must
	// be unique among the candidates (hostname + a random suffix): a
	// candidate that finds its own identity in the lease takes it at once.
	Identity string

	// LeaseDuration is how long, after last seeing the lease change, a
	// candidate waits before taking it over; a whole number of seconds, as
	// leases count seconds. Default 15s.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it
	// stops leading; less than LeaseDuration, so that it stops before
	// anyone can take over. Default 10s.
	RenewDeadline time.Duration
	// RetryPeriod is the wait between attempts to acquire or renew.
	// Default 2s.
	RetryPeriod time.Duration

	// OnStartedLeading runs in its own goroutine once the lease is
	// acquired. ctx is cancelled when leadership ends; the function must
	// then return promptly, as Run waits for it. nil: nothing to run.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading is called by Run, after OnStartedLeading has
	// returned, when leadership ends, whether lost or given up on
	// cancellation. It is not called if leadership never started.
	OnStoppedLeading func()
	// OnNewLeader is called with the identity of each new holder of the
	// lease, this candidate's included, in order, from one goroutine of its
	// own; if holders change faster than it returns, only the latest is
	// reported.
	OnNewLeader func(identity string)

	// ReleaseOnCancel gives the lease up when Run's context is cancelled
	// while leading, so that another candidate takes over at its next
	// attempt instead of after LeaseDuration.
	ReleaseOnCancel bool

	Logger *slog.Logger // nil discards
	// Clock reads the time and times the waits between attempts; nil is
	// the real clock. It must advance with real time (each request's
	// deadline is a real one): it is a seam for skewed clocks, not for a
	// fake one.
	Clock clock.Clock
}

// withDefaults returns cfg with its zero fields defaulted, or an error if
// it is invalid.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Client == nil {
		return cfg, errors.New("leaderelection: Client is required")
	}
	if cfg.Namespace == "" || cfg.Name == "" {
		return cfg, errors.New("leaderelection: the lease's Namespace and Name are required")
	}
	if cfg.Identity == "" {
		return cfg, errors.New("leaderelection: Identity is required")
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewDeadline == 0 {
		cfg.RenewDeadline = DefaultRenewDeadline
	}
	if cfg.RetryPeriod == 0 {
		cfg.RetryPeriod = DefaultRetryPeriod
	}
	switch {
	case cfg.LeaseDuration < time.Second || cfg.LeaseDuration%time.Second != 0:
		return cfg, fmt.Errorf("leaderelection: leaseDuration %v must be a whole number of seconds", cfg.LeaseDuration)
	case cfg.RetryPeriod < 0 || cfg.RenewDeadline < 0:
		return cfg, errors.New("leaderelection: renewDeadline and retryPeriod must be positive")
	case cfg.LeaseDuration <= cfg.RenewDeadline:
		return cfg, fmt.Errorf("leaderelection: leaseDuration %v must be greater than renewDeadline %v", cfg.LeaseDuration, cfg.RenewDeadline)
	case cfg.RenewDeadline <= time.Duration(JitterFactor*float64(cfg.RetryPeriod)):
		return cfg, fmt.Errorf("leaderelection: renewDeadline %v must be greater than retryPeriod*%v (%v)",
			cfg.RenewDeadline, JitterFactor, time.Duration(JitterFactor*float64(cfg.RetryPeriod)))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Clock = clock.Or(cfg.Clock)
	return cfg, nil
}
