package main

import (
	"testing"
	"time"
)

func TestParseScaleSteps(t *testing.T) {
	steps, err := parseScaleSteps(defaultScaleSteps)
	if err != nil {
		t.Fatal(err)
	}
	want := []scaleStep{{15000, 150}, {50000, 500}, {150000, 5000}}
	if len(steps) != len(want) {
		t.Fatalf("steps = %v, want %v", steps, want)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Errorf("step %d = %v, want %v", i, steps[i], want[i])
		}
	}
	for _, bad := range []string{"", "15000", "15000/0", "x/150", "15000/150,-1/2", "15000:150"} {
		if _, err := parseScaleSteps(bad); err == nil {
			t.Errorf("parseScaleSteps(%q) took it", bad)
		}
	}
}

func TestMemStats(t *testing.T) {
	text := []byte("heap profile: 1: 2 [3: 4] @ heap/1048576\n# runtime.MemStats\n# Alloc = 100\n# HeapAlloc = 123456\n# HeapInuse = 2000000\n# PauseNs = [1 2 3]\n")
	m := memStats(text)
	if m["HeapAlloc"] != 123456 || m["HeapInuse"] != 2000000 {
		t.Errorf("memStats = %v", m)
	}
	if _, ok := m["PauseNs"]; ok {
		t.Errorf("a list read as a number: %v", m)
	}
}

// TestStartupWatchObserve: a pod's startup runs from its first ADDED to
// its first Running, later events of a running pod change nothing, and
// the step's end is the moment the last pod first ran.
func TestStartupWatchObserve(t *testing.T) {
	w := &startupWatch{firstAt: map[string]time.Time{}, seen: map[string]struct{}{}, target: 2, allRunning: make(chan struct{})}
	t0 := time.Unix(1000, 0)
	w.observe(t0, "MODIFIED", "stray", "1", "Running") // never ADDED
	w.observe(t0, "ADDED", "a", "2", "Pending")
	w.observe(t0.Add(time.Second), "ADDED", "b", "3", "")
	w.observe(t0.Add(2*time.Second), "MODIFIED", "a", "4", "Pending")
	w.observe(t0.Add(3*time.Second), "MODIFIED", "a", "5", "Running")
	w.observe(t0.Add(4*time.Second), "MODIFIED", "a", "6", "Running")
	if got := w.running(); got != 1 {
		t.Fatalf("running = %d, want 1", got)
	}
	select {
	case <-w.allRunning:
		t.Fatal("all Running with one of two")
	default:
	}
	w.observe(t0.Add(6*time.Second), "BOOKMARK", "", "7", "")
	w.observe(t0.Add(9*time.Second), "MODIFIED", "b", "8", "Running")
	select {
	case <-w.allRunning:
	default:
		t.Fatal("not all Running")
	}
	if got, want := w.startups(), []time.Duration{3 * time.Second, 8 * time.Second}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("startups = %v, want %v", got, want)
	}
	if w.allAt != t0.Add(9*time.Second) || w.rv != "8" {
		t.Errorf("allAt = %v, rv = %s", w.allAt, w.rv)
	}
}
