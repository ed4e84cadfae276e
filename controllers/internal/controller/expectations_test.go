package controller

import (
	"testing"
	"time"

	"github.com/minictl/minictl/clock"
)

func TestExpectations(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	e := NewExpectations(clk)
	const key = "default/web"

	if !e.Satisfied(key) {
		t.Fatal("a key never seen is satisfied: the controller just started")
	}
	e.ExpectCreations(key, 2)
	if e.Satisfied(key) {
		t.Fatal("satisfied with 2 creates outstanding")
	}
	e.CreationObserved(key)
	e.CreationObserved(key)
	e.CreationObserved(key) // more than expected: never below zero
	if !e.Satisfied(key) {
		t.Fatal("not satisfied after both creates were observed")
	}
	if adds, _ := e.Pending(key); adds != 0 {
		t.Errorf("pending creates %d, want 0", adds)
	}

	e.ExpectDeletions(key, []string{"default/a", "default/b"})
	e.DeletionObserved(key, "default/a")
	e.DeletionObserved(key, "default/a") // seen twice (marked, then removed): counts once
	e.DeletionObserved(key, "default/c") // not ours
	if _, dels := e.Pending(key); dels != 1 || e.Satisfied(key) {
		t.Fatalf("pending deletes %d, want 1 and unsatisfied", dels)
	}

	clk.Step(ExpectationsTimeout)
	if e.Satisfied(key) {
		t.Fatal("satisfied at exactly the timeout")
	}
	clk.Step(time.Second)
	if !e.Satisfied(key) {
		t.Fatal("not satisfied after the timeout: a lost watch event would stall the controller")
	}

	e.Delete(key)
	if adds, dels := e.Pending(key); adds != 0 || dels != 0 || !e.Satisfied(key) {
		t.Fatal("Delete did not forget the key")
	}
}

func TestExpectCreatesAndDeletesTogether(t *testing.T) {
	e := NewExpectations(nil)
	const key = "default/agent"
	e.Expect(key, 1, []string{"default/old"})
	e.CreationObserved(key)
	if e.Satisfied(key) {
		t.Fatal("satisfied with a deletion outstanding")
	}
	e.DeletionObserved(key, "default/old")
	if adds, dels := e.Pending(key); adds != 0 || dels != 0 || !e.Satisfied(key) {
		t.Fatalf("pending %d creates, %d deletes after both were observed", adds, dels)
	}
}
