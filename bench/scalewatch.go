package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// startupWatch follows the pods of a namespace for the scale scenario:
// the moment the harness first sees each pod (its ADDED event) and the
// moment it first sees it Running, which is the pod startup latency
// Kubernetes' SLO speaks of, as a watching client observes it. A watch
// the server ends (its timeout) is opened again from the last
// resourceVersion seen, so no event is lost.
type startupWatch struct {
	mu       sync.Mutex
	firstAt  map[string]time.Time // pods seen, not yet Running
	seen     map[string]struct{}
	names    []string        // every pod seen, for the GET probe
	lat      []time.Duration // each Running pod's startup
	target   int
	rv       string
	err      error
	allAt    time.Time
	cancel   context.CancelFunc
	done     chan struct{}
	runCount int

	allRunning chan struct{} // closed when target pods have run
}

func watchStartup(ctx context.Context, c *cluster, ns string, target int) (*startupWatch, error) {
	rv, err := listRV(ctx, podsURL(c, ns))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &startupWatch{firstAt: map[string]time.Time{}, seen: map[string]struct{}{}, target: target, rv: rv, cancel: cancel,
		done: make(chan struct{}), allRunning: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			err := w.follow(ctx, podsURL(c, ns))
			if err != nil && ctx.Err() == nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
				return
			}
			select { // the server ended it: again, after a breath
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return w, nil
}

// follow runs one watch from w.rv until the server ends it (nil) or it
// fails.
func (w *startupWatch) follow(ctx context.Context, url string) error {
	w.mu.Lock()
	rv := w.rv
	w.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"?watch=true&allowWatchBookmarks=true&resourceVersion="+rv, nil)
	if err != nil {
		return err
	}
	resp, err := watchClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("watch %s: %s", url, resp.Status)
	}
	r := bufio.NewReaderSize(resp.Body, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil // cancelled, or the server ended the watch: open it again
		}
		var ev struct {
			Type   string `json:"type"`
			Object struct {
				Metadata struct {
					Name            string `json:"name"`
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
				Status struct {
					Phase string `json:"phase"`
				} `json:"status"`
				Message string `json:"message"`
			} `json:"object"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("watch event: %w", err)
		}
		if ev.Type == "ERROR" {
			return fmt.Errorf("watch: ERROR event: %s", ev.Object.Message)
		}
		w.observe(time.Now(), ev.Type, ev.Object.Metadata.Name, ev.Object.Metadata.ResourceVersion, ev.Object.Status.Phase)
	}
}

func (w *startupWatch) observe(now time.Time, typ, name, rv, phase string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rv != "" {
		w.rv = rv
	}
	if typ != "ADDED" && typ != "MODIFIED" {
		return
	}
	if _, ok := w.seen[name]; !ok {
		if typ != "ADDED" {
			return
		}
		w.seen[name] = struct{}{}
		w.names = append(w.names, name)
		w.firstAt[name] = now
	}
	first, pending := w.firstAt[name]
	if !pending {
		return // already Running once
	}
	if phase == "Running" {
		delete(w.firstAt, name)
		w.lat = append(w.lat, now.Sub(first))
		if w.runCount++; w.runCount == w.target {
			w.allAt = now
			close(w.allRunning)
		}
	}
}

// running is how many pods have been seen Running.
func (w *startupWatch) running() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.runCount
}

// startups are the startup latencies, sorted.
func (w *startupWatch) startups() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := slices.Clone(w.lat)
	slices.Sort(s)
	return s
}

// randomPod is a pod seen so far, "" before the first.
func (w *startupWatch) randomPod() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.names) == 0 {
		return ""
	}
	return w.names[randomIndex(len(w.names))]
}

func (w *startupWatch) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *startupWatch) stop() {
	w.cancel()
	<-w.done
}
