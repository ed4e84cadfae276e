package record_test

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/internal/testenv"
)

// tickingClock starts at a fixed time and moves one second per reading, so
// that each event has its own timestamp; its timers are real.
type tickingClock struct {
	clock.Real
	ticks atomic.Int64
}

func (c *tickingClock) Now() time.Time {
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	return start.Add(time.Duration(c.ticks.Add(1)-1) * time.Second)
}

type fixture struct {
	env    *testenv.Env
	rc     *client.RESTClient
	events *client.Client[*corev1.Event]
}

func setup(t *testing.T) *fixture {
	t.Helper()
	env := testenv.Start(t)
	rc, err := client.New(&client.Config{Server: env.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{env: env, rc: rc, events: client.For[*corev1.Event](rc)}
}

// start creates a recorder and runs it until the test ends.
func (f *fixture) start(t *testing.T, opts record.Options) *record.Recorder {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.Clock == nil {
		opts.Clock = &tickingClock{}
	}
	rec := record.NewRecorder(f.rc, opts)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { rec.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return rec
}

func waitIdle(t *testing.T, rec *record.Recorder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rec.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

// eventsAbout lists the events of namespace whose involvedObject is name.
func (f *fixture) eventsAbout(t *testing.T, namespace, name string) []*corev1.Event {
	t.Helper()
	list, err := f.events.List(context.Background(), namespace, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func pod(namespace, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "42",
	}}
}

func TestEventfWritesEvent(t *testing.T) {
	f := setup(t)
	rec := f.start(t, record.Options{Component: "replicaset-controller", Host: "host-a"})
	rec.Eventf(pod("default", "web"), corev1.EventTypeWarning, "FailedCreate", "cannot create %d pods", 3)
	waitIdle(t, rec)

	got := f.eventsAbout(t, "default", "web")
	if len(got) != 1 {
		t.Fatalf("got %d events about default/web, want 1", len(got))
	}
	ev := got[0]
	if !regexp.MustCompile(`^web\.[0-9a-f]{16}$`).MatchString(ev.Name) {
		t.Errorf("name %q is not web.<16 hex digits>", ev.Name)
	}
	wantRef := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "web", UID: "uid-web", ResourceVersion: "42"}
	checks := []struct {
		field     string
		got, want any
	}{
		{"namespace", ev.Namespace, "default"},
		{"involvedObject", ev.InvolvedObject, wantRef},
		{"type", ev.Type, corev1.EventTypeWarning},
		{"reason", ev.Reason, "FailedCreate"},
		{"message", ev.Message, "cannot create 3 pods"},
		{"source", ev.Source, corev1.EventSource{Component: "replicaset-controller", Host: "host-a"}},
		{"count", ev.Count, int32(1)},
		{"reportingComponent", ev.ReportingController, "replicaset-controller"},
		{"reportingInstance", ev.ReportingInstance, "host-a"},
		{"firstTimestamp", ev.FirstTimestamp.UTC(), time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)},
		{"lastTimestamp", ev.LastTimestamp.UTC(), time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.field, c.got, c.want)
		}
	}
}

func TestRepeatCounts(t *testing.T) {
	f := setup(t)
	rec := f.start(t, record.Options{Component: "test"})
	p := pod("default", "web")
	for range 3 {
		rec.Eventf(p, corev1.EventTypeNormal, "Pulled", "image %q pulled", "nginx")
	}
	waitIdle(t, rec)

	got := f.eventsAbout(t, "default", "web")
	if len(got) != 1 {
		t.Fatalf("got %d events, want 1 counted 3 times", len(got))
	}
	ev := got[0]
	first, last := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2030, 1, 2, 3, 4, 7, 0, time.UTC)
	if ev.Count != 3 || !ev.FirstTimestamp.Time.Equal(first) || !ev.LastTimestamp.Time.Equal(last) {
		t.Errorf("count %d, first %v, last %v; want 3, %v, %v", ev.Count, ev.FirstTimestamp.UTC(), ev.LastTimestamp.UTC(), first, last)
	}

	// The event expires (here: is deleted); the next repeat creates it anew.
	if err := f.events.Delete(context.Background(), "default", ev.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.Eventf(p, corev1.EventTypeNormal, "Pulled", "image %q pulled", "nginx")
	waitIdle(t, rec)
	got = f.eventsAbout(t, "default", "web")
	if len(got) != 1 || got[0].Count != 4 || got[0].Message != `image "nginx" pulled` {
		t.Fatalf("after deleting the event and repeating it: %d events %+v; want it again with count 4", len(got), got)
	}
}

func TestDifferentReasonsAreSeparate(t *testing.T) {
	f := setup(t)
	rec := f.start(t, record.Options{Component: "test"})
	p := pod("default", "web")
	rec.Event(p, corev1.EventTypeNormal, "Scheduled", "assigned to node-1")
	rec.Event(p, corev1.EventTypeNormal, "Pulled", "assigned to node-1")
	rec.Event(p, corev1.EventTypeWarning, "Pulled", "assigned to node-1")
	rec.Event(p, corev1.EventTypeNormal, "Scheduled", "assigned to node-1")
	waitIdle(t, rec)

	counts := map[string]int32{}
	for _, ev := range f.eventsAbout(t, "default", "web") {
		counts[ev.Type+"/"+ev.Reason] = ev.Count
	}
	want := map[string]int32{"Normal/Scheduled": 2, "Normal/Pulled": 1, "Warning/Pulled": 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("events by type/reason and count: %v, want %v", counts, want)
	}
}

func TestClusterScopedObjectEventInDefault(t *testing.T) {
	f := setup(t)
	rec := f.start(t, record.Options{Component: "node-controller"})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "uid-node-1"}}
	rec.Eventf(node, corev1.EventTypeNormal, "NodeReady", "Node %s status is now: NodeReady", node.Name)
	waitIdle(t, rec)

	got := f.eventsAbout(t, "", "node-1")
	if len(got) != 1 {
		t.Fatalf("got %d events about node-1 in all namespaces, want 1", len(got))
	}
	ev := got[0]
	if ev.Namespace != "default" || ev.InvolvedObject.Namespace != "" || ev.InvolvedObject.Kind != "Node" || ev.InvolvedObject.APIVersion != "v1" {
		t.Errorf("event in %q about %s %s in %q; want in default about v1 Node in \"\"",
			ev.Namespace, ev.InvolvedObject.APIVersion, ev.InvolvedObject.Kind, ev.InvolvedObject.Namespace)
	}
}

func TestSimilarEventsCombined(t *testing.T) {
	f := setup(t)
	rec := f.start(t, record.Options{Component: "test"})
	p := pod("default", "web")
	for i := range 12 {
		rec.Eventf(p, corev1.EventTypeNormal, "Scaled", "scaled to %d", i)
	}
	waitIdle(t, rec)

	var single, combined []*corev1.Event
	for _, ev := range f.eventsAbout(t, "default", "web") {
		if ev.Count == 1 && regexp.MustCompile(`^scaled to \d$`).MatchString(ev.Message) {
			single = append(single, ev)
		} else {
			combined = append(combined, ev)
		}
	}
	if len(single) != 9 || len(combined) != 1 {
		t.Fatalf("got %d single and %d other events, want 9 single and 1 combined", len(single), len(combined))
	}
	if c := combined[0]; c.Count != 3 || c.Message != "(combined from similar events): scaled to 11" {
		t.Errorf("combined event: count %d, message %q; want 3, the prefix and the last message", c.Count, c.Message)
	}
}

func TestRecordedBeforeRunIsQueued(t *testing.T) {
	f := setup(t)
	rec := record.NewRecorder(f.rc, record.Options{Component: "test"})
	rec.Event(pod("default", "early"), corev1.EventTypeNormal, "Early", "recorded before Run")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { rec.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	waitIdle(t, rec)
	if got := f.eventsAbout(t, "default", "early"); len(got) != 1 {
		t.Fatalf("got %d events, want the one recorded before Run", len(got))
	}
}

// giveUpCounter is a log handler that counts the events the recorder gave
// up on, and discards every record.
type giveUpCounter struct{ n atomic.Uint64 }

func (c *giveUpCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *giveUpCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "event not written: giving up" {
		c.n.Add(1)
	}
	return nil
}
func (c *giveUpCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *giveUpCounter) WithGroup(string) slog.Handler      { return c }

func TestNeverBlocksWhenServerDown(t *testing.T) {
	f := setup(t)
	gaveUp := &giveUpCounter{}
	rec := f.start(t, record.Options{
		Component:     "test",
		Logger:        slog.New(gaveUp),
		QueueSize:     10,
		RetryInterval: 50 * time.Millisecond,
	})
	f.env.StopServer()

	const n = 20000
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		for i := range n {
			rec.Eventf(pod("default", fmt.Sprintf("web-%d", i%50)), corev1.EventTypeWarning, "Unreachable", "try %d", i)
		}
	}()
	select {
	case <-returned:
	case <-time.After(15 * time.Second):
		t.Fatalf("%d Eventf calls did not return within 15s while the server was down", n)
	}
	// Every call either queued its event or dropped it. At the end at most
	// 10 are queued and one is being sent; the sender may also have given up
	// on some (12 tries 50ms apart each) while the calls went on, each
	// making room in the queue for one more.
	if d, g := rec.Dropped(), gaveUp.n.Load(); d+g < n-11 {
		t.Errorf("dropped %d events and gave up on %d, want at least %d together (queue of 10, one being sent)", d, g, n-11)
	}

	// Once the server is back, the same recorder drains its queue and
	// writes again.
	f.env.RestartServer()
	waitIdle(t, rec)
	rec.Event(pod("default", "after"), corev1.EventTypeNormal, "Recovered", "server is back")
	waitIdle(t, rec)
	if got := f.eventsAbout(t, "default", "after"); len(got) != 1 {
		t.Errorf("got %d events recorded after the restart, want 1", len(got))
	}
}

func TestInvalidEventsDropped(t *testing.T) {
	f := setup(t)
	rec := f.start(t, record.Options{Component: "test"})
	rec.Event(pod("default", "web"), "Info", "Odd", "type is neither Normal nor Warning")
	rec.Event(nil, corev1.EventTypeNormal, "Nil", "no object")
	waitIdle(t, rec)
	if got := f.eventsAbout(t, "default", "web"); len(got) != 0 {
		t.Errorf("got %d events, want none", len(got))
	}
}

func TestFakeRecorder(t *testing.T) {
	var f record.FakeRecorder
	var r record.EventRecorder = &f
	r.Eventf(pod("default", "web"), corev1.EventTypeNormal, "Created", "created pod %s", "web-1")
	if got := f.Events(); len(got) != 1 || got[0] != "Normal Created created pod web-1" {
		t.Errorf("events %q", got)
	}
}

// logLines is a log handler that keeps every record, for tests that count
// lines.
type logLines struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

// withPrefix returns the records whose message starts with prefix.
func (l *logLines) withPrefix(prefix string) []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []slog.Record
	for _, r := range l.records {
		if strings.HasPrefix(r.Message, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// intAttr returns the attribute key of r as an int.
func intAttr(r slog.Record, key string) int {
	n := -1
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			n = int(a.Value.Int64())
			return false
		}
		return true
	})
	return n
}

func TestDroppedEventsSummarisedOncePerInterval(t *testing.T) {
	f := setup(t)
	lines := &logLines{}
	clk := clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	rec := record.NewRecorder(f.rc, record.Options{Component: "test", Logger: slog.New(lines), Clock: clk, QueueSize: 10})
	const dropped = "events dropped"
	flood := func(n int) {
		for i := range n {
			rec.Eventf(pod("default", fmt.Sprintf("web-%d", i)), corev1.EventTypeNormal, "Created", "created pod %d", i)
		}
	}

	// Nothing takes from the queue yet: 10 events wait, the rest are
	// dropped. The first drop is told at once; the others wait for the
	// interval to end.
	flood(5000)
	flood(5000)
	if got := rec.Dropped(); got != 9990 {
		t.Fatalf("dropped %d events, want 9990 (a queue of 10)", got)
	}
	if got := lines.withPrefix(dropped); len(got) != 1 || intAttr(got[0], "dropped") != 1 || got[0].Level != slog.LevelWarn {
		t.Fatalf("%d %q lines after 9990 drops in one instant, want 1 warning, telling the first", len(got), dropped)
	}

	// The interval is over: the next drop tells all those since the line.
	clk.Step(10 * time.Second)
	flood(1)
	got := lines.withPrefix(dropped)
	if len(got) != 2 || intAttr(got[1], "dropped") != 9990 {
		t.Fatalf("%d lines, the last telling %d drops; want 2, the second telling the other 9989 and this one", len(got), intAttr(got[len(got)-1], "dropped"))
	}

	// Drops after the last line, when no drop follows the interval, are
	// told by Run when the interval ends.
	flood(100)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { rec.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	waitIdle(t, rec) // the 10 queued events are written
	deadline := time.Now().Add(10 * time.Second)
	for len(clk.Waiters()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run set no timer for its next summary")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Step(10 * time.Second)
	eventually(t, func() bool { return len(lines.withPrefix(dropped)) == 3 })
	got = lines.withPrefix(dropped)
	if n := intAttr(got[2], "dropped"); n != 100 {
		t.Errorf("the line Run wrote tells %d drops, want 100", n)
	}
	total := 0
	for _, r := range got {
		total += intAttr(r, "dropped")
	}
	if uint64(total) != rec.Dropped() {
		t.Errorf("the lines tell %d drops, Dropped says %d", total, rec.Dropped())
	}
}

// eventually waits up to 10s for cond.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
