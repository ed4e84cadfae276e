package informer

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/minitest"
)

// cm returns a ConfigMap "ns/name" at resourceVersion rv.
func cm(ns, name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}}
}

// rvOf returns the resourceVersion of a delta's object, looking through
// tombstones ("tomb:" + rv).
func rvOf(t *testing.T, obj any) string {
	t.Helper()
	switch o := obj.(type) {
	case DeletedFinalStateUnknown:
		if o.Obj == nil {
			return "tomb:<nil>"
		}
		return "tomb:" + o.Obj.GetResourceVersion()
	case *corev1.ConfigMap:
		return o.ResourceVersion
	}
	t.Fatalf("unexpected object %T", obj)
	return ""
}

// summary renders deltas as "Type:rv" strings.
func summary(t *testing.T, d Deltas) []string {
	t.Helper()
	out := make([]string, len(d))
	for i, delta := range d {
		out[i] = string(delta.Type) + ":" + rvOf(t, delta.Object)
	}
	return out
}

// popNow pops one key, failing the test if none is pending.
func popNow(t *testing.T, f *DeltaFIFO) (string, Deltas) {
	t.Helper()
	if f.Len() == 0 {
		t.Fatal("pop: queue is empty")
	}
	d, err := f.Pop(context.Background(), nil)
	if err != nil {
		t.Fatalf("pop: %v", err)
	}
	key, err := f.KeyOf(d)
	if err != nil {
		t.Fatal(err)
	}
	return key, d
}

func TestDeltaFIFOAccumulatesPerKeyInFIFOOrder(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions{})
	must(t, f.Add(cm("ns", "a", "1")))
	must(t, f.Add(cm("ns", "b", "2")))
	must(t, f.Update(cm("ns", "a", "3")))
	must(t, f.Add(cm("", "c", "4")))
	must(t, f.Delete(cm("ns", "b", "5")))
	must(t, f.Update(cm("ns", "a", "6")))

	if got, want := f.ListKeys(), []string{"ns/a", "ns/b", "c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ListKeys = %v, want %v", got, want)
	}
	want := []struct {
		key    string
		deltas []string
	}{
		{"ns/a", []string{"Added:1", "Updated:3", "Updated:6"}},
		{"ns/b", []string{"Added:2", "Deleted:5"}},
		{"c", []string{"Added:4"}},
	}
	for _, w := range want {
		key, d := popNow(t, f)
		if key != w.key || !reflect.DeepEqual(summary(t, d), w.deltas) {
			t.Fatalf("pop = %s %v, want %s %v", key, summary(t, d), w.key, w.deltas)
		}
	}
	if f.Len() != 0 {
		t.Fatalf("Len = %d after popping everything", f.Len())
	}
}

func TestDeltaFIFODedupsDoubleDelete(t *testing.T) {
	tests := []struct {
		name   string
		second any
		want   []string
	}{
		{"two real deletes keep the first", cm("ns", "a", "3"), []string{"Added:1", "Deleted:2"}},
		{"a tombstone after a real delete is dropped",
			DeletedFinalStateUnknown{Key: "ns/a", Obj: cm("ns", "a", "9")}, []string{"Added:1", "Deleted:2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewDeltaFIFO(DeltaFIFOOptions{})
			must(t, f.Add(cm("ns", "a", "1")))
			must(t, f.Delete(cm("ns", "a", "2")))
			must(t, f.Delete(tt.second))
			_, d := popNow(t, f)
			if got := summary(t, d); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("deltas = %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("a real delete replaces a tombstone", func(t *testing.T) {
		f := NewDeltaFIFO(DeltaFIFOOptions{})
		must(t, f.Add(cm("ns", "a", "1")))
		must(t, f.Replace(nil, "5")) // tombstone for ns/a
		must(t, f.Delete(cm("ns", "a", "2")))
		_, d := popNow(t, f)
		if got, want := summary(t, d), []string{"Added:1", "Deleted:2"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("deltas = %v, want %v", got, want)
		}
	})
}

func TestDeltaFIFODeleteOfUnknownObjectIsIgnored(t *testing.T) {
	known := NewIndexer(nil, nil)
	must(t, known.Add(cm("ns", "known", "1")))
	f := NewDeltaFIFO(DeltaFIFOOptions{KnownObjects: known})
	must(t, f.Delete(cm("ns", "never-seen", "2")))
	must(t, f.Delete(cm("ns", "known", "3")))
	if got, want := f.ListKeys(), []string{"ns/known"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ListKeys = %v, want %v", got, want)
	}
}

func TestDeltaFIFOReplaceTombstones(t *testing.T) {
	known := NewIndexer(nil, nil)
	must(t, known.Add(cm("ns", "kept", "1")))
	must(t, known.Add(cm("ns", "gone-from-cache", "2")))
	must(t, known.Add(cm("ns", "gone-but-queued", "3")))

	f := NewDeltaFIFO(DeltaFIFOOptions{KnownObjects: known})
	must(t, f.Update(cm("ns", "gone-but-queued", "4"))) // newer than the cache
	must(t, f.Add(cm("ns", "only-queued", "5")))        // never reached the cache
	must(t, f.Replace([]any{cm("ns", "kept", "6"), cm("ns", "new", "7")}, "10"))

	got := map[string][]string{}
	for f.Len() > 0 {
		key, d := popNow(t, f)
		got[key] = summary(t, d)
	}
	want := map[string][]string{
		"ns/kept":            {"Replaced:6"},
		"ns/new":             {"Replaced:7"},
		"ns/gone-from-cache": {"Deleted:tomb:2"},              // last state from KnownObjects
		"ns/gone-but-queued": {"Updated:4", "Deleted:tomb:4"}, // last state from the queue
		"ns/only-queued":     {"Added:5", "Deleted:tomb:5"},   // from the queue, cache never knew it
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("popped\n got %v\nwant %v", got, want)
	}
}

func TestDeltaFIFOReplaceWithoutKnownObjects(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions{})
	must(t, f.Add(cm("ns", "a", "1")))
	must(t, f.Delete(cm("ns", "a", "2")))
	must(t, f.Replace(nil, "3"))
	_, d := popNow(t, f)
	// The queued delete already says it all; the tombstone is deduplicated.
	if got, want := summary(t, d), []string{"Added:1", "Deleted:2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("deltas = %v, want %v", got, want)
	}
}

func TestDeltaFIFOResync(t *testing.T) {
	known := NewIndexer(nil, nil)
	must(t, known.Add(cm("ns", "a", "1")))
	must(t, known.Add(cm("ns", "b", "2")))
	f := NewDeltaFIFO(DeltaFIFOOptions{KnownObjects: known})
	must(t, f.Update(cm("ns", "b", "3"))) // pending: no Sync for b
	must(t, f.Resync())

	got := map[string][]string{}
	for f.Len() > 0 {
		key, d := popNow(t, f)
		got[key] = summary(t, d)
	}
	want := map[string][]string{"ns/a": {"Sync:1"}, "ns/b": {"Updated:3"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}

	t.Run("without KnownObjects does nothing", func(t *testing.T) {
		f := NewDeltaFIFO(DeltaFIFOOptions{})
		must(t, f.Resync())
		if f.Len() != 0 {
			t.Fatalf("Len = %d", f.Len())
		}
	})
}

func TestDeltaFIFOHasSynced(t *testing.T) {
	t.Run("false before anything", func(t *testing.T) {
		if NewDeltaFIFO(DeltaFIFOOptions{}).HasSynced() {
			t.Fatal("HasSynced before any call")
		}
	})
	t.Run("after the first Replace's items are popped", func(t *testing.T) {
		known := NewIndexer(nil, nil)
		f := NewDeltaFIFO(DeltaFIFOOptions{KnownObjects: known})
		must(t, f.Replace([]any{cm("ns", "a", "1"), cm("ns", "b", "2")}, "2"))
		must(t, f.Add(cm("ns", "c", "3"))) // after the list: not part of the sync
		var initial []bool
		process := func(d Deltas, isInInitialList bool) error {
			initial = append(initial, isInInitialList)
			return known.Add(d.Newest().Object)
		}
		for i, wantBefore := range []bool{false, false, true} {
			if got := f.HasSynced(); got != wantBefore {
				t.Fatalf("before pop %d: HasSynced = %v, want %v", i, got, wantBefore)
			}
			if _, err := f.Pop(context.Background(), process); err != nil {
				t.Fatal(err)
			}
		}
		if want := []bool{true, true, false}; !reflect.DeepEqual(initial, want) {
			t.Fatalf("isInInitialList = %v, want %v", initial, want)
		}
		if !f.HasSynced() {
			t.Fatal("HasSynced false after draining")
		}
	})
	t.Run("an empty first Replace syncs at once", func(t *testing.T) {
		f := NewDeltaFIFO(DeltaFIFOOptions{})
		must(t, f.Replace(nil, "1"))
		if !f.HasSynced() {
			t.Fatal("HasSynced false")
		}
	})
	t.Run("first Add, Update or Delete syncs at once", func(t *testing.T) {
		for _, op := range []func(*DeltaFIFO) error{
			func(f *DeltaFIFO) error { return f.Add(cm("ns", "a", "1")) },
			func(f *DeltaFIFO) error { return f.Update(cm("ns", "a", "1")) },
			func(f *DeltaFIFO) error { return f.Delete(cm("ns", "a", "1")) },
		} {
			f := NewDeltaFIFO(DeltaFIFOOptions{})
			must(t, op(f))
			if !f.HasSynced() {
				t.Fatal("HasSynced false")
			}
			must(t, f.Replace([]any{cm("ns", "b", "2")}, "2")) // a later Replace does not unsync
			if !f.HasSynced() {
				t.Fatal("HasSynced false after a later Replace")
			}
		}
	})
}

func TestDeltaFIFOPopBlocksUntilItemCloseOrCancel(t *testing.T) {
	type result struct {
		d   Deltas
		err error
	}
	tests := []struct {
		name    string
		unblock func(f *DeltaFIFO, cancel context.CancelFunc)
		wantErr error
	}{
		{"item", func(f *DeltaFIFO, _ context.CancelFunc) { _ = f.Add(cm("ns", "a", "1")) }, nil},
		{"close", func(f *DeltaFIFO, _ context.CancelFunc) { f.Close() }, ErrFIFOClosed},
		{"cancel", func(_ *DeltaFIFO, cancel context.CancelFunc) { cancel() }, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewDeltaFIFO(DeltaFIFOOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan result, 1)
			go func() {
				d, err := f.Pop(ctx, nil)
				done <- result{d, err}
			}()
			select {
			case r := <-done:
				t.Fatalf("Pop returned early: %v %v", r.d, r.err)
			case <-time.After(20 * time.Millisecond): // a negative check: nothing to wait for
			}
			tt.unblock(f, cancel)
			select {
			case r := <-done:
				if !errors.Is(r.err, tt.wantErr) {
					t.Fatalf("Pop error = %v, want %v", r.err, tt.wantErr)
				}
				if tt.wantErr == nil && len(r.d) != 1 {
					t.Fatalf("Pop = %v", r.d)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Pop still blocked")
			}
		})
	}
}

func TestDeltaFIFOCloseDrainsFirst(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions{})
	must(t, f.Add(cm("ns", "a", "1")))
	f.Close()
	if !f.IsClosed() {
		t.Fatal("IsClosed false")
	}
	if _, err := f.Pop(context.Background(), nil); err != nil {
		t.Fatalf("first Pop after Close: %v", err)
	}
	if _, err := f.Pop(context.Background(), nil); !errors.Is(err, ErrFIFOClosed) {
		t.Fatalf("second Pop: %v, want ErrFIFOClosed", err)
	}
}

func TestDeltaFIFOPopReturnsProcessError(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions{})
	must(t, f.Add(cm("ns", "a", "1")))
	boom := errors.New("boom")
	d, err := f.Pop(context.Background(), func(Deltas, bool) error { return boom })
	if !errors.Is(err, boom) || len(d) != 1 {
		t.Fatalf("Pop = %v, %v", d, err)
	}
	if f.Len() != 0 {
		t.Fatal("item re-queued after a process error")
	}
}

func TestDeltaFIFOGetCopies(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions{})
	must(t, f.Add(cm("ns", "a", "1")))
	d, ok, err := f.Get(cm("ns", "a", ""))
	if err != nil || !ok || len(d) != 1 {
		t.Fatalf("Get = %v %v %v", d, ok, err)
	}
	d[0].Type = Sync // must not reach the queue
	must(t, f.Update(cm("ns", "a", "2")))
	d2, _, _ := f.GetByKey("ns/a")
	if got, want := summary(t, d2), []string{"Added:1", "Updated:2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("deltas = %v, want %v", got, want)
	}
	if l := f.List(); len(l) != 1 || rvOf(t, l[0]) != "2" {
		t.Fatalf("List = %v", l)
	}
	if _, ok, _ := f.GetByKey("ns/nope"); ok {
		t.Fatal("GetByKey found a missing key")
	}
}

func TestDeltaFIFOTrace(t *testing.T) {
	var mu sync.Mutex
	var stages []TraceStage
	var keys []string
	trace := TraceFunc(func(stage TraceStage, attrs ...slog.Attr) {
		mu.Lock()
		defer mu.Unlock()
		stages = append(stages, stage)
		for _, a := range attrs {
			if a.Key == TraceAttrResource && a.Value.String() != "configmaps" {
				t.Errorf("resource attr = %v", a.Value)
			}
			if a.Key == TraceAttrKey {
				keys = append(keys, a.Value.String())
			}
		}
	}).With(slog.String(TraceAttrResource, "configmaps"))

	f := NewDeltaFIFO(DeltaFIFOOptions{Trace: trace})
	must(t, f.Add(cm("ns", "a", "1")))
	popNow(t, f)
	want := []TraceStage{StageDeltaFIFOQueued, StageDeltaFIFOPopped}
	if !reflect.DeepEqual(stages, want) || !reflect.DeepEqual(keys, []string{"ns/a", "ns/a"}) {
		t.Fatalf("stages %v keys %v", stages, keys)
	}

	t.Run("switched by TraceActive", func(t *testing.T) {
		stages, keys = nil, nil
		var active atomic.Bool
		f := NewDeltaFIFO(DeltaFIFOOptions{Trace: trace, TraceActive: active.Load})
		must(t, f.Add(cm("ns", "off", "1")))
		popNow(t, f)
		active.Store(true)
		must(t, f.Add(cm("ns", "on", "1")))
		popNow(t, f)
		if !reflect.DeepEqual(stages, want) || !reflect.DeepEqual(keys, []string{"ns/on", "ns/on"}) {
			t.Fatalf("stages %v keys %v, want only the change made while active", stages, keys)
		}
	})
}

func TestSlogTracer(t *testing.T) {
	var buf minitest.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	SlogTracer(logger).With(slog.String(TraceAttrResource, "pods"))(StageIndexerUpdated,
		traceAttrs("default/web", Updated, cm("default", "web", "42"))...)
	got := buf.String()
	for _, want := range []string{`"msg":"informer stage"`, `"stage":"indexer updated"`,
		`"resource":"pods"`, `"key":"default/web"`, `"type":"Updated"`, `"resourceVersion":"42"`} {
		if !contains(got, want) {
			t.Errorf("log line %s lacks %s", got, want)
		}
	}
	if TraceFunc(nil).With(slog.String("a", "b")) != nil {
		t.Error("With on a nil TraceFunc turned tracing on")
	}
}

func TestKeys(t *testing.T) {
	tests := []struct {
		obj     any
		key     string
		wantErr bool
	}{
		{cm("ns", "a", ""), "ns/a", false},
		{cm("", "a", ""), "a", false},
		{DeletedFinalStateUnknown{Key: "ns/x"}, "ns/x", false},
		{&DeletedFinalStateUnknown{Key: "ns/y"}, "ns/y", false},
		{cm("ns", "", ""), "", true},
		{"not an object", "", true},
	}
	for _, tt := range tests {
		key, err := MetaNamespaceKeyFunc(tt.obj)
		if key != tt.key || (err != nil) != tt.wantErr {
			t.Errorf("MetaNamespaceKeyFunc(%v) = %q, %v", tt.obj, key, err)
		}
	}
	splits := []struct {
		key, ns, name string
		wantErr       bool
	}{
		{"ns/a", "ns", "a", false},
		{"a", "", "a", false},
		{"", "", "", true},
		{"a/b/c", "", "", true},
		{"/a", "", "", true},
		{"a/", "", "", true},
	}
	for _, tt := range splits {
		ns, name, err := SplitMetaNamespaceKey(tt.key)
		if ns != tt.ns || name != tt.name || (err != nil) != tt.wantErr {
			t.Errorf("SplitMetaNamespaceKey(%q) = %q, %q, %v", tt.key, ns, name, err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
