package controller

import (
	"errors"
	"sync/atomic"
	"testing"
)

func TestSlowStartBatch(t *testing.T) {
	tests := []struct {
		name       string
		count      int
		failAt     int64 // 0: never
		wantCalls  int64
		wantOK     int
		wantFailed bool
	}{
		{"all succeed", 10, 0, 10, 10, false},
		{"nothing to do", 0, 0, 0, 0, false},
		{"first call fails", 10, 1, 1, 0, true},
		{"fails in the second batch", 10, 2, 3, 2, true},
		{"fails in the third batch", 10, 5, 7, 6, true},
		{"fails in the fourth batch", 20, 9, 15, 14, true},
		{"last batch is what remains", 5, 0, 5, 5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			ok, err := SlowStartBatch(tt.count, 1, func() error {
				if calls.Add(1) == tt.failAt {
					return errors.New("boom")
				}
				return nil
			})
			if calls.Load() != tt.wantCalls || ok != tt.wantOK || (err != nil) != tt.wantFailed {
				t.Errorf("calls %d, successes %d, err %v; want %d, %d, failed=%v",
					calls.Load(), ok, err, tt.wantCalls, tt.wantOK, tt.wantFailed)
			}
		})
	}
}
