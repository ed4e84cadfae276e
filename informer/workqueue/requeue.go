package workqueue

import "time"

// RequeueAfterError is a worker's answer for an item to look at again after
// a while, as planned rather than because something failed: content still
// on its way out, a cache still filling, a grace period still running. The
// one place that decides an item's fate (a controller's
// processNextWorkItem) forgets the item's failures and adds it back after
// After, with AddAfter.
type RequeueAfterError struct {
	// After is how long to wait before looking again.
	After time.Duration
	// Reason says what the item waits for, for the log.
	Reason string
}

// RequeueAfter returns a *RequeueAfterError: look again after after,
// because of reason.
func RequeueAfter(after time.Duration, reason string) error {
	return &RequeueAfterError{After: after, Reason: reason}
}

func (e *RequeueAfterError) Error() string {
	return e.Reason + "; look again in " + e.After.String()
}
