package controller

import "sync"

// SlowStartBatch calls fn count times, in batches that double in size
// (initial, 2×initial, 4×initial, ...), the calls of one batch running
// concurrently. It stops after the first batch in which a call failed, so a
// request that fails every time (a quota, an invalid template) is tried a
// handful of times rather than count times. It returns how many calls
// succeeded and the first error seen.
func SlowStartBatch(count, initial int, fn func() error) (int, error) {
	remaining := count
	successes := 0
	for batch := min(remaining, max(initial, 1)); batch > 0; batch = min(2*batch, remaining) {
		errs := make(chan error, batch)
		var wg sync.WaitGroup
		for range batch {
			wg.Go(func() {
				if err := fn(); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		successes += batch - len(errs)
		if err, failed := <-errs; failed {
			return successes, err
		}
		remaining -= batch
	}
	return successes, nil
}
