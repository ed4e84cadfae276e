package minitest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// parked sends the line it will wait on, then waits for release: a
// goroutine for Stacks to find.
func parked(release *sync.WaitGroup, line chan<- int) {
	_, _, here, _ := runtime.Caller(0)
	line <- here + 2
	release.Wait()
}

// TestStacks condenses this test binary's own dump: the three goroutines
// parked in one place are one line with their count and what they wait
// on, under the timeline that precedes a SIGQUIT dump.
func TestStacks(t *testing.T) {
	var release sync.WaitGroup
	release.Add(1)
	defer release.Done()
	lines := make(chan int)
	var at int
	for range 3 {
		go parked(&release, lines)
		at = <-lines
	}
	want := fmt.Sprintf("   3 [sync.WaitGroup.Wait] internal/minitest.parked stacks_test.go:%d → sync.(*WaitGroup).Wait\n", at)
	var got string
	for range 100 { // until the three have parked, not only started
		buf := make([]byte, 1<<20)
		got = Stacks("18:07:28.344  minictl  -  store open\nSIGQUIT: quit\n\n" + string(buf[:runtime.Stack(buf, true)]))
		if strings.Contains(got, want) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(got, want) {
		t.Errorf("Stacks lacks %q:\n%s", want, got)
	}
	if !strings.Contains(got, "internal/minitest.TestStacks stacks_test.go:") {
		t.Errorf("Stacks lacks the running test:\n%s", got)
	}
	if Stacks("no dump here") != "" {
		t.Error("Stacks of no dump is not empty")
	}
}
