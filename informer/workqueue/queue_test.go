package workqueue

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/minictl/minictl/clock"
)

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// getNow gets an item that must already be queued.
func getNow[T comparable](t *testing.T, q *Queue[T]) T {
	t.Helper()
	if q.Len() == 0 {
		t.Fatal("get: queue is empty")
	}
	item, shutdown := q.Get()
	if shutdown {
		t.Fatal("get: queue shut down")
	}
	return item
}

func newTestQueue(t *testing.T, opts Options) *Queue[string] {
	q := New[string](t.Name(), opts)
	t.Cleanup(q.ShutDown)
	return q
}

func TestQueueDedupsAndKeepsOrder(t *testing.T) {
	q := newTestQueue(t, Options{})
	for _, item := range []string{"a", "b", "a", "c", "b", "a"} {
		q.Add(item)
	}
	if q.Len() != 3 {
		t.Fatalf("Len = %d, want 3", q.Len())
	}
	var got []string
	for q.Len() > 0 {
		item := getNow(t, q)
		got = append(got, item)
		q.Done(item)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
}

func TestQueueItemBeingProcessedIsRequeuedAfterDone(t *testing.T) {
	q := newTestQueue(t, Options{})
	q.Add("a")
	item := getNow(t, q)

	q.Add("a") // changed while a worker holds it
	q.Add("a")
	if q.Len() != 0 {
		t.Fatalf("Len = %d while a is processing; a must not reach a second worker", q.Len())
	}
	q.Done(item)
	if q.Len() != 1 {
		t.Fatalf("Len = %d after Done, want a queued again once", q.Len())
	}
	if item := getNow(t, q); item != "a" {
		t.Fatalf("got %q", item)
	}
	q.Done("a")
	q.Done("a") // Done of an item not processing is ignored
	if q.Len() != 0 {
		t.Fatalf("Len = %d", q.Len())
	}
}

func TestQueueConcurrentWorkersNeverShareAKey(t *testing.T) {
	q := newTestQueue(t, Options{})
	const workers, producers, adds, keys = 8, 4, 2000, 25

	var mu sync.Mutex
	inFlight := map[string]bool{}
	processed := map[string]int{}
	var overlaps atomic.Int32

	var workersDone sync.WaitGroup
	for range workers {
		workersDone.Add(1)
		go func() {
			defer workersDone.Done()
			for {
				key, shutdown := q.Get()
				if shutdown {
					return
				}
				mu.Lock()
				if inFlight[key] {
					overlaps.Add(1)
				}
				inFlight[key] = true
				mu.Unlock()

				for range 100 { // a little work, so that overlaps would show
					_ = q.Len()
				}

				mu.Lock()
				inFlight[key] = false
				processed[key]++
				mu.Unlock()
				q.Done(key)
			}
		}()
	}

	var producersDone sync.WaitGroup
	for p := range producers {
		producersDone.Add(1)
		go func() {
			defer producersDone.Done()
			for i := range adds {
				q.Add(fmt.Sprintf("key-%d", (i*7+p)%keys))
			}
		}()
	}
	producersDone.Wait()
	q.ShutDownWithDrain()
	workersDone.Wait()

	if n := overlaps.Load(); n > 0 {
		t.Fatalf("%d times a key was processed by two workers at once", n)
	}
	if len(processed) != keys {
		t.Fatalf("%d keys processed, want %d", len(processed), keys)
	}
	if q.Len() != 0 {
		t.Fatalf("Len = %d after drain", q.Len())
	}
}

func TestQueueShutDownUnblocksGet(t *testing.T) {
	q := newTestQueue(t, Options{})
	got := make(chan bool)
	for range 3 {
		go func() {
			_, shutdown := q.Get()
			got <- shutdown
		}()
	}
	q.ShutDown()
	for range 3 {
		select {
		case shutdown := <-got:
			if !shutdown {
				t.Fatal("Get returned an item from an empty queue")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Get still blocked after ShutDown")
		}
	}
	if !q.ShuttingDown() {
		t.Fatal("ShuttingDown false")
	}
}

func TestQueueShutDownHandsOutWhatIsQueued(t *testing.T) {
	q := newTestQueue(t, Options{})
	q.Add("a")
	q.ShutDown()
	q.Add("b") // ignored
	q.AddAfter("c", time.Hour)
	if item, shutdown := q.Get(); shutdown || item != "a" {
		t.Fatalf("Get = %q, %v; want a", item, shutdown)
	}
	if _, shutdown := q.Get(); !shutdown {
		t.Fatal("Get after draining: not shut down")
	}
	select {
	case <-q.loopDone:
	default:
		t.Fatal("the AddAfter goroutine is still running after ShutDown")
	}
}

func TestQueueShutDownWithDrainWaitsForDone(t *testing.T) {
	q := newTestQueue(t, Options{})
	q.Add("a")
	q.Add("b")
	a := getNow(t, q)

	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	waitFor(t, "shutdown to start", q.ShuttingDown)

	// "a" is still processing, so the drain cannot have finished.
	select {
	case <-drained:
		t.Fatal("ShutDownWithDrain returned while a was processing")
	default:
	}
	// Queued items are still handed out during the drain.
	b := getNow(t, q)
	q.Done(a)
	select {
	case <-drained:
		t.Fatal("ShutDownWithDrain returned while b was processing")
	default:
	}
	q.Done(b)
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("ShutDownWithDrain still waiting after every item was Done")
	}
}

func TestQueueAddAfter(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	clk := clock.NewFake(start)
	q := newTestQueue(t, Options{Clock: clk})

	// waitTimer waits until the queue's goroutine sleeps until at.
	waitTimer := func(at time.Time) {
		t.Helper()
		waitFor(t, "a timer at "+at.Sub(start).String(), func() bool {
			w := clk.Waiters()
			return len(w) > 0 && w[0].Equal(at)
		})
	}

	q.AddAfter("now", 0)
	q.AddAfter("past", -time.Second)
	if q.Len() != 2 {
		t.Fatalf("Len = %d: a delay <= 0 must add at once", q.Len())
	}
	q.Done(getNow(t, q))
	q.Done(getNow(t, q))

	q.AddAfter("c", 3*time.Second)
	q.AddAfter("a", 1*time.Second)
	q.AddAfter("b", 2*time.Second)
	q.AddAfter("b", 5*time.Second) // later: keeps 2s
	q.AddAfter("c", 2*time.Second) // earlier: moves to 2s, after b

	waitTimer(start.Add(time.Second))
	if q.Len() != 0 {
		t.Fatalf("Len = %d before any delay passed", q.Len())
	}
	clk.Step(time.Second)
	waitFor(t, "a", func() bool { return q.Len() == 1 })
	if item := getNow(t, q); item != "a" {
		t.Fatalf("got %q, want a", item)
	}

	waitTimer(start.Add(2 * time.Second))
	clk.Step(time.Second)
	waitFor(t, "b and c", func() bool { return q.Len() == 2 })
	var got []string
	got = append(got, getNow(t, q), getNow(t, q))
	if want := []string{"b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	waitFor(t, "no timers left", func() bool { return len(clk.Waiters()) == 0 })
}

func TestItemExponentialFailureRateLimiter(t *testing.T) {
	r := NewItemExponentialFailureRateLimiter(5*time.Millisecond, 100*time.Millisecond)
	want := []time.Duration{5, 10, 20, 40, 80, 100, 100}
	for i, w := range want {
		if got := r.When("a"); got != w*time.Millisecond {
			t.Fatalf("When #%d = %v, want %v", i, got, w*time.Millisecond)
		}
	}
	if n := r.NumRequeues("a"); n != len(want) {
		t.Fatalf("NumRequeues = %d", n)
	}
	if got := r.When("b"); got != 5*time.Millisecond {
		t.Fatalf("b shares a's backoff: %v", got)
	}
	r.Forget("a")
	if n := r.NumRequeues("a"); n != 0 {
		t.Fatalf("NumRequeues after Forget = %d", n)
	}
	if got := r.When("a"); got != 5*time.Millisecond {
		t.Fatalf("When after Forget = %v", got)
	}

	// Many failures must not overflow into a negative or tiny delay.
	big := NewItemExponentialFailureRateLimiter(DefaultBaseDelay, DefaultMaxDelay)
	for range 200 {
		if d := big.When("x"); d < 0 || d > DefaultMaxDelay {
			t.Fatalf("When = %v out of range", d)
		}
	}
	if d := big.When("x"); d != DefaultMaxDelay {
		t.Fatalf("When after 200 failures = %v, want max", d)
	}
}

func TestBucketAndMaxOfRateLimiter(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	bucket := NewBucketRateLimiter(1, 2, clk) // 1 qps, burst 2
	var got []time.Duration
	for range 4 {
		got = append(got, bucket.When("any"))
	}
	want := []time.Duration{0, 0, time.Second, 2 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("bucket delays = %v, want %v", got, want)
	}

	clk2 := clock.NewFake(time.Unix(1_000_000, 0))
	limiter := NewMaxOfRateLimiter(
		NewItemExponentialFailureRateLimiter(time.Second, time.Minute),
		NewBucketRateLimiter(1, 1, clk2),
	)
	// a: backoff 1s, bucket 0 → 1s; b: backoff 1s, bucket 1s → 1s;
	// a again: backoff 2s, bucket 2s → 2s.
	for i, tt := range []struct {
		item string
		want time.Duration
	}{{"a", time.Second}, {"b", time.Second}, {"a", 2 * time.Second}} {
		if got := limiter.When(tt.item); got != tt.want {
			t.Fatalf("When #%d(%s) = %v, want %v", i, tt.item, got, tt.want)
		}
	}
	if n := limiter.NumRequeues("a"); n != 2 {
		t.Fatalf("NumRequeues = %d", n)
	}
	limiter.Forget("a")
	if n := limiter.NumRequeues("a"); n != 0 {
		t.Fatalf("NumRequeues after Forget = %d", n)
	}
}

func TestQueueAddRateLimited(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	clk := clock.NewFake(start)
	q := newTestQueue(t, Options{Clock: clk}) // the default limiter, on the fake clock

	for i, want := range []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond} {
		q.AddRateLimited("a")
		at := clk.Now().Add(want)
		waitFor(t, fmt.Sprintf("retry %d at +%v", i, want), func() bool {
			w := clk.Waiters()
			return len(w) == 1 && w[0].Equal(at)
		})
		clk.Step(want)
		waitFor(t, "a queued", func() bool { return q.Len() == 1 })
		q.Done(getNow(t, q))
	}
	if n := q.NumRequeues("a"); n != 3 {
		t.Fatalf("NumRequeues = %d, want 3", n)
	}
	q.Forget("a")
	if n := q.NumRequeues("a"); n != 0 {
		t.Fatalf("NumRequeues after Forget = %d", n)
	}
	q.AddRateLimited("a")
	at := clk.Now().Add(DefaultBaseDelay)
	waitFor(t, "backoff reset to the base delay", func() bool {
		w := clk.Waiters()
		return len(w) == 1 && w[0].Equal(at)
	})
}

// metricValue returns the value of the workqueue metric name (for
// histograms, the sample count) labelled with queue, and whether it exists.
func metricValue(t *testing.T, reg *prometheus.Registry, name, queue string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "workqueue_"+name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabel(m, "name", queue) {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

func TestQueueMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	q := New[string]("pods", Options{Clock: clk, MetricsRegisterer: reg})
	other := New[string]("nodes", Options{Clock: clk, MetricsRegisterer: reg}) // two queues, one registry
	defer other.ShutDown()

	expect := func(name string, want float64) {
		t.Helper()
		got, ok := metricValue(t, reg, name, "pods")
		if !ok || got != want {
			t.Errorf("workqueue_%s{name=pods} = %v (present %v), want %v", name, got, ok, want)
		}
	}

	q.Add("a")
	q.Add("a") // deduplicated: not an add
	q.Add("b")
	expect("depth", 2)
	expect("adds_total", 2)

	clk.Step(2 * time.Second)
	a := getNow(t, q)
	expect("depth", 1)
	expect("queue_duration_seconds", 1)

	clk.Step(3 * time.Second)
	expect("unfinished_work_seconds", 3)
	expect("longest_running_processor_seconds", 3)
	b := getNow(t, q)
	clk.Step(1 * time.Second)
	expect("unfinished_work_seconds", 4+1)
	expect("longest_running_processor_seconds", 4)

	q.Done(a)
	q.Done(b)
	expect("work_duration_seconds", 2)
	expect("unfinished_work_seconds", 0)

	q.AddRateLimited("a")
	q.AddAfter("b", time.Second)
	expect("retries_total", 2)

	if _, ok := metricValue(t, reg, "adds_total", "nodes"); !ok {
		t.Error("the second queue's metrics are missing")
	}

	q.ShutDown()
	if _, ok := metricValue(t, reg, "adds_total", "pods"); ok {
		t.Error("metrics still registered after ShutDown")
	}
	again := New[string]("pods", Options{MetricsRegisterer: reg}) // same name again: no panic
	again.ShutDown()
}

func TestQueueDuplicateMetricsPanics(t *testing.T) {
	reg := prometheus.NewRegistry()
	q := New[string]("dup", Options{MetricsRegisterer: reg})
	defer q.ShutDown()
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for two live queues of one name on one registry")
		}
	}()
	New[string]("dup", Options{MetricsRegisterer: reg})
}

func TestRequeueAfterIsFoundWrapped(t *testing.T) {
	err := fmt.Errorf("pods: %w", RequeueAfter(3*time.Second, "cache still filling"))
	var ra *RequeueAfterError
	if !errors.As(err, &ra) {
		t.Fatalf("errors.As did not find the RequeueAfterError in %v", err)
	}
	if ra.After != 3*time.Second || ra.Reason != "cache still filling" {
		t.Errorf("got %+v", ra)
	}
	if got, want := err.Error(), "pods: cache still filling; look again in 3s"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
