package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// podTracker follows every pod of one namespace through a watch, and
// records the moment each condition a scenario waits for first holds.
type podTracker struct {
	mu      sync.Mutex
	pods    map[string]*podState
	waiters []*waiter
	err     error
	cancel  context.CancelFunc
	done    chan struct{}
}

type podState struct {
	phase    string
	deleting bool // deletionTimestamp is set
}

// waiter is one condition; at is set, and ch closed, when it first holds.
type waiter struct {
	cond func(t *podTracker) bool
	at   time.Time
	ch   chan struct{}
}

// trackPods starts a watch on the pods of ns from now (the current
// resourceVersion, after a list from etcd).
func trackPods(ctx context.Context, c *cluster, ns string) (*podTracker, error) {
	url := podsURL(c, ns)
	rv, err := listRV(ctx, url)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"?watch=true&resourceVersion="+rv, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := watchClient.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("watch %s: %s", url, resp.Status)
	}
	t := &podTracker{pods: map[string]*podState{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		defer resp.Body.Close()
		t.read(bufio.NewReaderSize(resp.Body, 1<<16))
	}()
	return t, nil
}

type watchEvent struct {
	Type   string `json:"type"`
	Object struct {
		Metadata struct {
			Name              string  `json:"name"`
			DeletionTimestamp *string `json:"deletionTimestamp"`
		} `json:"metadata"`
		Status struct {
			Phase string `json:"phase"`
		} `json:"status"`
	} `json:"object"`
}

func (t *podTracker) read(r *bufio.Reader) {
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.mu.Lock()
			if t.err == nil && !errors.Is(err, context.Canceled) {
				t.err = fmt.Errorf("pod watch ended: %w", err)
			}
			t.mu.Unlock()
			return
		}
		var ev watchEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			continue
		}
		now := time.Now()
		t.mu.Lock()
		name := ev.Object.Metadata.Name
		switch ev.Type {
		case "ADDED", "MODIFIED":
			t.pods[name] = &podState{phase: ev.Object.Status.Phase, deleting: ev.Object.Metadata.DeletionTimestamp != nil}
		case "DELETED":
			delete(t.pods, name)
		case "ERROR":
			t.err = fmt.Errorf("pod watch: ERROR event: %s", line)
		}
		t.checkLocked(now)
		t.mu.Unlock()
	}
}

func (t *podTracker) checkLocked(now time.Time) {
	for _, w := range t.waiters {
		if w.at.IsZero() && w.cond(t) {
			w.at = now
			close(w.ch)
		}
	}
}

// when registers cond, checked after every event (and now).
func (t *podTracker) when(cond func(t *podTracker) bool) *waiter {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := &waiter{cond: cond, ch: make(chan struct{})}
	t.waiters = append(t.waiters, w)
	t.checkLocked(time.Now())
	return w
}

// wait blocks until w holds, the watch fails, or timeout passes, and
// returns the moment it first held.
func (t *podTracker) wait(w *waiter, timeout time.Duration) (time.Time, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-w.ch:
		return w.at, nil
	case <-t.done:
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.err == nil { // the watch ended without an error: the run was stopped
			return time.Time{}, errors.New("the pod watch ended")
		}
		return time.Time{}, t.err
	case <-timer.C:
		return time.Time{}, fmt.Errorf("not reached within %s (%s)", timeout, t.summary())
	}
}

func (t *podTracker) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprintf("%d pods, %d active, %d running", len(t.pods), t.activeLocked(), t.runningLocked())
}

// The conditions scenarios wait for; called with mu held.

func (t *podTracker) countLocked() int { return len(t.pods) }

func (t *podTracker) activeLocked() int {
	n := 0
	for _, p := range t.pods {
		if !p.deleting && p.phase != "Succeeded" && p.phase != "Failed" {
			n++
		}
	}
	return n
}

func (t *podTracker) runningLocked() int {
	n := 0
	for _, p := range t.pods {
		if !p.deleting && p.phase == "Running" {
			n++
		}
	}
	return n
}

func (t *podTracker) succeededLocked() int {
	n := 0
	for _, p := range t.pods {
		if p.phase == "Succeeded" {
			n++
		}
	}
	return n
}

// names returns the names of the running pods.
func (t *podTracker) runningNames() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for name, p := range t.pods {
		if !p.deleting && p.phase == "Running" {
			out = append(out, name)
		}
	}
	return out
}

// goneOrDeleting reports whether every pod in names is being deleted or
// gone.
func (t *podTracker) goneOrDeletingLocked(names []string) bool {
	for _, n := range names {
		if p, ok := t.pods[n]; ok && !p.deleting {
			return false
		}
	}
	return true
}

func (t *podTracker) stop() {
	t.cancel()
	<-t.done
}

// watchClient opens watches: one connection each, never reused while open.
var watchClient = &http.Client{Transport: &http.Transport{
	MaxIdleConnsPerHost: 16,
	DisableCompression:  true,
}}
