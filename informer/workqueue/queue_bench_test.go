package workqueue

import (
	"strconv"
	"sync"
	"testing"
)

// Micro-benchmarks of the workqueue: what every event handler (Add) and
// every worker (Get, Done) pays per key.

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "default/web-" + strconv.Itoa(i)
	}
	return keys
}

// BenchmarkQueueAddGetDone is one key through the queue by one goroutine.
func BenchmarkQueueAddGetDone(b *testing.B) {
	q := New[string]("bench", Options{})
	defer q.ShutDown()
	keys := benchKeys(1000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i%len(keys)]
		q.Add(k)
		got, _ := q.Get()
		q.Done(got)
		i++
	}
}

// BenchmarkQueueAddDuplicate is an Add of a key that is already queued:
// what a burst of events about one object costs after the first.
func BenchmarkQueueAddDuplicate(b *testing.B) {
	q := New[string]("bench", Options{})
	defer q.ShutDown()
	q.Add("default/web")
	b.ReportAllocs()
	for b.Loop() {
		q.Add("default/web")
	}
}

// BenchmarkQueueParallel is producers adding distinct keys while 4
// workers get and finish them, as a controller runs.
func BenchmarkQueueParallel(b *testing.B) {
	q := New[string]("bench", Options{})
	keys := benchKeys(10000)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				q.Done(k)
			}
		})
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			q.Add(keys[i%len(keys)])
			i++
		}
	})
	b.StopTimer()
	q.ShutDownWithDrain()
	wg.Wait()
}

// BenchmarkQueueAddRateLimited is a failed key queued again after the
// default controller rate limiter's delay.
func BenchmarkQueueAddRateLimited(b *testing.B) {
	q := New[string]("bench", Options{})
	defer q.ShutDown()
	keys := benchKeys(1000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i%len(keys)]
		q.AddRateLimited(k)
		q.Forget(k)
		i++
	}
}
