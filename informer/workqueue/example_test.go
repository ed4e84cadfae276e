package workqueue_test

import (
	"errors"
	"fmt"

	"github.com/minictl/minictl/informer/workqueue"
)

// A controller's worker loop: Get, sync, then decide retry or forget in one
// place, and always Done.
func Example() {
	q := workqueue.New[string]("example", workqueue.Options{})
	defer q.ShutDown()

	attempts := map[string]int{}
	sync := func(key string) error {
		attempts[key]++
		if key == "default/flaky" && attempts[key] < 3 {
			return errors.New("conflict")
		}
		fmt.Printf("synced %s after %d attempt(s)\n", key, attempts[key])
		return nil
	}

	q.Add("default/web")
	q.Add("default/flaky")
	q.Add("default/web") // already queued: one sync covers both adds

	for synced := 0; synced < 2; {
		key, shutdown := q.Get()
		if shutdown {
			return
		}
		if err := sync(key); err != nil {
			q.AddRateLimited(key) // retry with backoff: 5ms, then 10ms
		} else {
			q.Forget(key) // success resets the backoff
			synced++
		}
		q.Done(key)
	}
	// Output:
	// synced default/web after 1 attempt(s)
	// synced default/flaky after 3 attempt(s)
}
