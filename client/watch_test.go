package client

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// collect receives every event until the channel closes, failing the test
// if that takes longer than a few seconds.
func collect(t *testing.T, ch <-chan Event[*corev1.ConfigMap]) []Event[*corev1.ConfigMap] {
	t.Helper()
	var out []Event[*corev1.ConfigMap]
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, ev)
		case <-timeout:
			t.Fatalf("events not closed after 5s; got %d events", len(out))
		}
	}
}

func streamWatcher(t *testing.T, stream string) *Watcher[*corev1.ConfigMap] {
	t.Helper()
	w := NewStreamWatcher[*corev1.ConfigMap](context.Background(), io.NopCloser(strings.NewReader(stream)))
	t.Cleanup(w.Stop)
	return w
}

const goodStream = `{"type":"ADDED","object":{"metadata":{"name":"a","namespace":"default","resourceVersion":"10"},"data":{"k":"v1"}}}
{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"default","resourceVersion":"11"},"data":{"k":"v2"}}}
{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"12"}}}

  {"type":"DELETED","object":{"metadata":{"name":"a","namespace":"default","resourceVersion":"13"}}}{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 5 (13)","reason":"Expired","code":410}}
`

func TestWatchStreamDecoding(t *testing.T) {
	w := streamWatcher(t, goodStream)
	evs := collect(t, w.Events())
	if w.Err() != nil {
		t.Errorf("Err() = %v after a clean end", w.Err())
	}
	wantTypes := []watch.EventType{watch.Added, watch.Modified, watch.Bookmark, watch.Deleted, watch.Error}
	if len(evs) != len(wantTypes) {
		t.Fatalf("got %d events, want %d: %+v", len(evs), len(wantTypes), evs)
	}
	for i, want := range wantTypes {
		if evs[i].Type != want {
			t.Errorf("event %d: type %s, want %s", i, evs[i].Type, want)
		}
	}
	for i, wantRV := range []string{"10", "11", "12", "13"} {
		obj := evs[i].Object
		if obj == nil {
			t.Fatalf("event %d: nil object", i)
		}
		if obj.ResourceVersion != wantRV || obj.Kind != "ConfigMap" || obj.APIVersion != "v1" {
			t.Errorf("event %d: rv %q kind %q apiVersion %q", i, obj.ResourceVersion, obj.Kind, obj.APIVersion)
		}
		if evs[i].Status != nil || evs[i].Err() != nil {
			t.Errorf("event %d: status %v on a non-error event", i, evs[i].Status)
		}
	}
	if evs[0].Object.Data["k"] != "v1" || evs[1].Object.Data["k"] != "v2" {
		t.Errorf("data: %v, %v", evs[0].Object.Data, evs[1].Object.Data)
	}
	errEv := evs[4]
	if errEv.Object != nil || errEv.Status == nil || errEv.Status.Code != 410 {
		t.Fatalf("error event = %+v", errEv)
	}
	if err := errEv.Err(); !IsGone(err) || !strings.Contains(err.Error(), "too old resource version") {
		t.Errorf("error event Err() = %v, want IsGone", err)
	}
}

func TestWatchStreamBroken(t *testing.T) {
	first := `{"type":"ADDED","object":{"metadata":{"name":"a"}}}` + "\n"
	testBrokenStreams(t, streamWatcher, []brokenStream{
		{"truncated inside an event", first + `{"type":"MODIFIED","object":{"metadata":{"na`, 1, "decode", io.ErrUnexpectedEOF},
		{"not JSON", first + "<html>", 1, "decode", nil},
		{"unknown type", first + `{"type":"EXPLODED","object":{}}`, 1, `unknown event type "EXPLODED"`, nil},
		{"no object", `{"type":"ADDED"}`, 0, "without an object", nil},
		{"object of the wrong shape", `{"type":"ADDED","object":{"metadata":"oops"}}`, 0, "decode ADDED object", nil},
		{"error event without a Status", `{"type":"ERROR","object":"oops"}`, 0, "decode ERROR status", nil},
	})
}

// brokenStream is a stream that must end in an error after wantEvents
// events: one whose message has wantErr, and that wraps wantIs if set.
type brokenStream struct {
	name, stream string
	wantEvents   int
	wantErr      string
	wantIs       error
}

func testBrokenStreams(t *testing.T, watcher func(*testing.T, string) *Watcher[*corev1.ConfigMap], tests []brokenStream) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := watcher(t, tt.stream)
			evs := collect(t, w.Events())
			if len(evs) != tt.wantEvents {
				t.Errorf("got %d events, want %d", len(evs), tt.wantEvents)
			}
			err := w.Err()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Err() = %v, want it to contain %q", err, tt.wantErr)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Err() = %v, want it to wrap %v", err, tt.wantIs)
			}
		})
	}
}

// trackedPipe is a stream the test writes to, which records being closed.
type trackedPipe struct {
	*io.PipeReader
	closed chan struct{}
	once   sync.Once
}

func (p *trackedPipe) Close() error {
	p.once.Do(func() { close(p.closed) })
	return p.PipeReader.Close()
}

func newTrackedPipe() (*trackedPipe, *io.PipeWriter) {
	r, w := io.Pipe()
	return &trackedPipe{PipeReader: r, closed: make(chan struct{})}, w
}

func waitClosed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s not closed after 5s", what)
	}
}

func TestWatchStopWhileBlockedOnRead(t *testing.T) {
	body, pw := newTrackedPipe()
	w := NewStreamWatcher[*corev1.ConfigMap](context.Background(), body)
	w.Stop()
	if _, ok := <-w.Events(); ok {
		t.Fatal("event after Stop")
	}
	waitClosed(t, "body", body.closed)
	if w.Err() != nil {
		t.Errorf("Err() = %v after Stop", w.Err())
	}
	if _, err := pw.Write([]byte("{}")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("write after Stop: %v, want the reader closed", err)
	}
	w.Stop() // idempotent
}

func TestWatchStopWhileBlockedOnSend(t *testing.T) {
	body, pw := newTrackedPipe()
	w := NewStreamWatcher[*corev1.ConfigMap](context.Background(), body)
	go func() {
		// The decoder reads the first event, then blocks handing it over.
		_, _ = io.WriteString(pw, `{"type":"ADDED","object":{"metadata":{"name":"a"}}}`+"\n")
	}()
	ev := <-w.Events()
	if ev.Type != watch.Added || ev.Object.Name != "a" {
		t.Fatalf("first event = %+v", ev)
	}
	go func() {
		_, _ = io.WriteString(pw, `{"type":"MODIFIED","object":{"metadata":{"name":"a"}}}`+"\n")
	}()
	// Stop from many goroutines at once, while nobody receives.
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(w.Stop)
	}
	wg.Wait()
	for range w.Events() {
		// at most the MODIFIED event can have been handed over before Stop
	}
	waitClosed(t, "body", body.closed)
	if w.Err() != nil {
		t.Errorf("Err() = %v after Stop", w.Err())
	}
}

func TestWatchStopFromConsumer(t *testing.T) {
	w := NewStreamWatcher[*corev1.ConfigMap](context.Background(), io.NopCloser(strings.NewReader(goodStream)))
	n := 0
	for range w.Events() {
		n++
		w.Stop() // from the goroutine ranging over Events: must not deadlock
	}
	if n != 1 {
		t.Errorf("got %d events after Stop in the first, want 1", n)
	}
}

func TestWatchContextCancel(t *testing.T) {
	body, _ := newTrackedPipe()
	ctx, cancel := context.WithCancel(context.Background())
	w := NewStreamWatcher[*corev1.ConfigMap](ctx, body)
	defer w.Stop()
	cancel()
	evs := collect(t, w.Events())
	if len(evs) != 0 {
		t.Errorf("got %d events", len(evs))
	}
	waitClosed(t, "body", body.closed)
	if w.Err() != nil {
		t.Errorf("Err() = %v after cancel", w.Err())
	}
}

func TestNewStreamWatcherPanicsOnUnservedType(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for an unserved type")
		}
	}()
	// kube-apiserver keeps RangeAllocations to itself.
	NewStreamWatcher[*corev1.RangeAllocation](context.Background(), io.NopCloser(strings.NewReader("")))
}

// TestWatchStreamLayouts: events are decoded whatever the layout: one per
// line (the fast path), lines longer than the read buffer, and an
// indented stream after a line-delimited start.
func TestWatchStreamLayouts(t *testing.T) {
	big := strings.Repeat("x", 100<<10)
	stream := `{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}` + "\n" +
		`{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"2"},"data":{"k":"` + big + `"}}}` + "\n" +
		"{\n  \"type\": \"MODIFIED\",\n  \"object\": {\"metadata\": {\"name\": \"a\", \"resourceVersion\": \"3\"}}\n}\n" +
		`{"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"4"}}}` + "\n"
	w := streamWatcher(t, stream)
	evs := collect(t, w.Events())
	if err := w.Err(); err != nil {
		t.Fatalf("Err() = %v", err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, string(ev.Type)+" "+ev.Object.ResourceVersion)
	}
	want := []string{"ADDED 1", "MODIFIED 2", "MODIFIED 3", "DELETED 4"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("events %v, want %v", got, want)
	}
	if len(evs[1].Object.Data["k"]) != len(big) {
		t.Errorf("the long event's data has %d bytes, want %d", len(evs[1].Object.Data["k"]), len(big))
	}
}
