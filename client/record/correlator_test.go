package record

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func testEvent(reason, message string, at time.Time) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("web.%016x", at.UnixNano()), Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "web", UID: "u1"},
		Reason:         reason,
		Message:        message,
		Source:         corev1.EventSource{Component: "test"},
		FirstTimestamp: metav1.NewTime(at),
		LastTimestamp:  metav1.NewTime(at),
		Count:          1,
		Type:           corev1.EventTypeNormal,
	}
}

// correlateAndStore is the sender's loop without the server: correlate,
// then remember what a server would have stored.
func correlateAndStore(c *correlator, ev *corev1.Event) (*corev1.Event, bool) {
	out, key, repeat := c.correlate(ev)
	c.remember(key, out)
	return out, repeat
}

func TestCorrelateRepeat(t *testing.T) {
	c := newCorrelator()
	first, repeat := correlateAndStore(c, testEvent("Created", "created", t0))
	if repeat || first.Count != 1 {
		t.Fatalf("first event: repeat %v, count %d; want a new event with count 1", repeat, first.Count)
	}
	ev := testEvent("Created", "created", t0.Add(time.Minute))
	orig := ev.DeepCopy()
	for want := int32(2); want <= 3; want++ {
		out, repeat := correlateAndStore(c, ev)
		if !repeat || out.Count != want || out.Name != first.Name || !out.FirstTimestamp.Equal(&first.FirstTimestamp) {
			t.Fatalf("repeat: got repeat %v, count %d, name %s, first %v; want a repeat of %s with count %d since %v",
				repeat, out.Count, out.Name, out.FirstTimestamp, first.Name, want, first.FirstTimestamp)
		}
		if !out.LastTimestamp.Equal(&ev.LastTimestamp) {
			t.Errorf("repeat: lastTimestamp %v, want %v", out.LastTimestamp, ev.LastTimestamp)
		}
	}
	if ev.Name != orig.Name || ev.Count != orig.Count {
		t.Errorf("correlate modified the event it was given")
	}

	for _, other := range []*corev1.Event{
		testEvent("Deleted", "created", t0),  // reason
		testEvent("Created", "created!", t0), // message
		func() *corev1.Event {
			e := testEvent("Created", "created", t0)
			e.Type = corev1.EventTypeWarning
			return e
		}(),
		func() *corev1.Event { e := testEvent("Created", "created", t0); e.InvolvedObject.UID = "u2"; return e }(),
		func() *corev1.Event { e := testEvent("Created", "created", t0); e.Source.Host = "n1"; return e }(),
	} {
		if _, _, repeat := c.correlate(other); repeat {
			t.Errorf("event %+v counted as a repeat of a different one", other)
		}
	}
}

func TestCorrelateCombinesSimilar(t *testing.T) {
	c := newCorrelator()
	at := t0
	for i := range maxSimilar - 1 {
		at = at.Add(time.Minute)
		out, repeat := correlateAndStore(c, testEvent("Scaled", fmt.Sprintf("scaled to %d", i), at))
		if repeat || out.Message != fmt.Sprintf("scaled to %d", i) {
			t.Fatalf("similar event %d: repeat %v, message %q; want its own new event", i, repeat, out.Message)
		}
	}
	var combinedName string
	for i := maxSimilar - 1; i < maxSimilar+2; i++ {
		at = at.Add(time.Minute)
		out, repeat := correlateAndStore(c, testEvent("Scaled", fmt.Sprintf("scaled to %d", i), at))
		wantCount := int32(i - maxSimilar + 2)
		wantMsg := fmt.Sprintf("(combined from similar events): scaled to %d", i)
		if out.Message != wantMsg || out.Count != wantCount || repeat != (wantCount > 1) {
			t.Fatalf("similar event %d: message %q, count %d, repeat %v; want %q, count %d", i, out.Message, out.Count, repeat, wantMsg, wantCount)
		}
		if combinedName == "" {
			combinedName = out.Name
		} else if out.Name != combinedName {
			t.Fatalf("similar event %d went to %s, not the combined event %s", i, out.Name, combinedName)
		}
	}
	// Another reason is not similar.
	if out, _ := correlateAndStore(c, testEvent("Other", "scaled to 99", at)); out.Message != "scaled to 99" {
		t.Errorf("an event with another reason was combined: %q", out.Message)
	}
}

func TestCorrelateSimilarWindow(t *testing.T) {
	c := newCorrelator()
	at := t0
	for i := range 2 * maxSimilar {
		at = at.Add(similarWindow + time.Second) // each one too late to be similar to the last
		if out, _ := correlateAndStore(c, testEvent("Scaled", fmt.Sprintf("scaled to %d", i), at)); out.Message != fmt.Sprintf("scaled to %d", i) {
			t.Fatalf("event %d, more than %v after the previous one, was combined: %q", i, similarWindow, out.Message)
		}
	}
}

func TestCorrelateForgetsOldest(t *testing.T) {
	c := newCorrelator()
	for i := range cacheSize + 1 {
		ev := testEvent("Created", "created", t0)
		ev.InvolvedObject.Name = fmt.Sprintf("pod-%d", i)
		correlateAndStore(c, ev)
	}
	if c.written.len() != cacheSize || c.similar.len() != cacheSize {
		t.Fatalf("caches hold %d and %d entries, want %d", c.written.len(), c.similar.len(), cacheSize)
	}
	ev := testEvent("Created", "created", t0)
	ev.InvolvedObject.Name = "pod-0"
	if _, _, repeat := c.correlate(ev); repeat {
		t.Errorf("the oldest event is still remembered after %d newer ones", cacheSize)
	}
	ev.InvolvedObject.Name = fmt.Sprintf("pod-%d", cacheSize)
	if _, _, repeat := c.correlate(ev); !repeat {
		t.Errorf("the newest event is forgotten")
	}
}

func TestLRU(t *testing.T) {
	c := newLRU[string, int](2)
	c.put("a", 1)
	c.put("b", 2)
	c.get("a") // a is now the most recently used
	c.put("c", 3)
	if _, ok := c.get("b"); ok {
		t.Errorf("b, the least recently used, was kept")
	}
	for k, want := range map[string]int{"a": 1, "c": 3} {
		if v, ok := c.get(k); !ok || v != want {
			t.Errorf("get(%q) = %d, %v; want %d", k, v, ok, want)
		}
	}
	c.put("a", 10)
	if v, _ := c.get("a"); v != 10 || c.len() != 2 {
		t.Errorf("after overwriting a: a = %d, len %d; want 10, 2", v, c.len())
	}
}

// BenchmarkCorrelatorBytesPerEvent is what a correlator keeps for each
// event it remembers: a kubelet's, full with cacheSize events of its pods
// (five reasons a pod, a message naming the pod). In one process of
// thousands of kubelets, each keeps its own, as each kubelet does in
// Kubernetes.
func BenchmarkCorrelatorBytesPerEvent(b *testing.B) {
	reasons := []string{"Scheduled", "Pulling", "Pulled", "Created", "Started"}
	var before, after runtime.MemStats
	var bytes float64
	for range b.N {
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := newCorrelator()
		for i := range cacheSize {
			pod := fmt.Sprintf("web-7d9f8c6b5-%05d", i/len(reasons))
			ev := testEvent(reasons[i%len(reasons)], fmt.Sprintf("Successfully assigned default/%s to node-17", pod), t0)
			ev.InvolvedObject.Name, ev.InvolvedObject.UID = pod, types.UID(fmt.Sprintf("%08x-1f2e-4d3c-9b8a-%012x", i, i))
			ev.InvolvedObject.FieldPath = "spec.containers{app}"
			ev.Source = corev1.EventSource{Component: "kubelet", Host: "node-17"}
			ev.Name = fmt.Sprintf("%s.%016x", pod, i)
			correlateAndStore(c, ev)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		bytes = float64(after.HeapAlloc-before.HeapAlloc) / cacheSize
		runtime.KeepAlive(c)
	}
	b.ReportMetric(bytes, "B/event")
}
