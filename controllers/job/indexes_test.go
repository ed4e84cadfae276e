package job

import (
	"testing"
	"time"
)

func TestIndexSet(t *testing.T) {
	tests := []struct {
		in          string
		completions int32
		add         []int
		want        string
		total       int
	}{
		{"", 5, nil, "", 0},
		{"", 5, []int{3, 1, 2}, "1-3", 3},
		{"0,2", 5, []int{1}, "0-2", 3},
		{"0,1", 5, nil, "0,1", 2}, // two neighbours are written as a pair, as kube writes them
		{"1,3-5,7", 10, []int{9}, "1,3-5,7,9", 6},
		{"1,3-5,7", 5, nil, "1,3,4", 3},  // beyond completions: dropped
		{"x,2,5-3,4", 10, nil, "2,4", 2}, // what does not parse is skipped
	}
	for _, tt := range tests {
		got := parseIndexSet(tt.in, tt.completions).with(tt.add)
		if got.String() != tt.want || got.total() != tt.total {
			t.Errorf("parse(%q, %d) + %v = %q (%d), want %q (%d)", tt.in, tt.completions, tt.add, got, got.total(), tt.want, tt.total)
		}
	}
	s := parseIndexSet("1,3-5", 10)
	for i, want := range []bool{false, true, false, true, true, true, false} {
		if s.has(i) != want {
			t.Errorf("has(%d) = %v, want %v", i, !want, want)
		}
	}
}

func TestBackoff(t *testing.T) {
	base, most := 10*time.Second, 6*time.Minute
	for failures, want := range []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 320 * time.Second, 6 * time.Minute, 6 * time.Minute} {
		if got := backoff(int32(failures), base, most); got != want {
			t.Errorf("backoff after %d failures = %s, want %s", failures, got, want)
		}
	}
	now := time.Now()
	rec := backoffRecord{failures: 2, lastFailure: now.Add(-5 * time.Second)}
	if got := rec.remaining(now, base, most); got != 15*time.Second {
		t.Errorf("remaining = %s, want 15s", got)
	}
	if got := rec.remaining(now.Add(time.Minute), base, most); got != 0 {
		t.Errorf("remaining once passed = %s, want 0", got)
	}
}

func TestPodGenerateName(t *testing.T) {
	if got := podGenerateName("pi", 3); got != "pi-3-" {
		t.Errorf("podGenerateName = %q", got)
	}
	long := "a-very-long-job-name-that-goes-on-and-on-and-on-beyond-reason"
	if got := podGenerateName(long, 12); len(got) != 58 || got[len(got)-4:] != "-12-" {
		t.Errorf("podGenerateName(long) = %q (%d chars), want 58 ending -12-", got, len(got))
	}
}
