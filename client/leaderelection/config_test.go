package leaderelection_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/leaderelection"
)

func TestNewChecksConfig(t *testing.T) {
	rc, err := client.New(&client.Config{Server: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	valid := func(edit func(*leaderelection.Config)) leaderelection.Config {
		cfg := leaderelection.Config{Client: rc, Namespace: "kube-system", Name: "l", Identity: "a"}
		if edit != nil {
			edit(&cfg)
		}
		return cfg
	}
	tests := []struct {
		name    string
		cfg     leaderelection.Config
		wantErr string // "" = valid
	}{
		{"defaults", valid(nil), ""},
		{"short durations", valid(func(c *leaderelection.Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = time.Second, 700*time.Millisecond, 200*time.Millisecond
		}), ""},
		{"no client", valid(func(c *leaderelection.Config) { c.Client = nil }), "Client is required"},
		{"no namespace", valid(func(c *leaderelection.Config) { c.Namespace = "" }), "Namespace and Name"},
		{"no name", valid(func(c *leaderelection.Config) { c.Name = "" }), "Namespace and Name"},
		{"no identity", valid(func(c *leaderelection.Config) { c.Identity = "" }), "Identity is required"},
		{"lease not longer than renew deadline", valid(func(c *leaderelection.Config) {
			c.LeaseDuration, c.RenewDeadline = 10*time.Second, 10*time.Second
		}), "leaseDuration 10s must be greater than renewDeadline 10s"},
		{"renew deadline within jittered retry", valid(func(c *leaderelection.Config) {
			c.RenewDeadline, c.RetryPeriod = 2400*time.Millisecond, 2*time.Second
		}), "renewDeadline 2.4s must be greater than retryPeriod*1.2"},
		{"fractional lease", valid(func(c *leaderelection.Config) { c.LeaseDuration = 1500 * time.Millisecond }), "whole number of seconds"},
		{"sub-second lease", valid(func(c *leaderelection.Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 500*time.Millisecond, 300*time.Millisecond, 100*time.Millisecond
		}), "whole number of seconds"},
		{"negative retry", valid(func(c *leaderelection.Config) { c.RetryPeriod = -time.Second }), "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := leaderelection.New(tt.cfg)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("New: %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("New: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRunOnce(t *testing.T) {
	rc, err := client.New(&client.Config{Server: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	le, err := leaderelection.New(leaderelection.Config{Client: rc, Namespace: "kube-system", Name: "l", Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := le.Run(ctx); err != nil {
		t.Errorf("Run with a cancelled context: %v, want nil", err)
	}
	if err := le.Run(context.Background()); err == nil {
		t.Errorf("second Run: no error")
	}
	if le.IsLeader() || le.GetLeader() != "" {
		t.Errorf("IsLeader %v, GetLeader %q; want false, \"\"", le.IsLeader(), le.GetLeader())
	}
}
