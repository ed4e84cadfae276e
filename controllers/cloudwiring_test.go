package controllers

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// lockedBuffer is a bytes.Buffer the manager's goroutines may log to while
// the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A cloud controller manager with no cloud runs, says why each cloud
// controller does not, and stops cleanly: nothing dereferences the
// missing provider.
func TestCloudManagerWithoutACloudSaysWhy(t *testing.T) {
	env := controllertest.Start(t)
	cfg := DefaultCloudConfig()
	cfg.LeaderElect = false
	cfg.Cloud.AllocateNodeCIDRs = true
	var logs lockedBuffer
	m, err := NewCloudManager(env.Client, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	controllertest.Eventually(t, "service and route disabled", func() (bool, string) {
		s := logs.String()
		return strings.Contains(s, "service is disabled because there is no cloud provider") &&
			strings.Contains(s, "route is disabled because there is no cloud provider"), s
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
