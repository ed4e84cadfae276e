package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
)

// drain reads w's items until its channel closes, failing the test if it
// stays open for 10s.
func drain(t *testing.T, w *cacheWatcher) []watchItem {
	t.Helper()
	var items []watchItem
	timeout := time.After(10 * time.Second)
	for {
		select {
		case it, ok := <-w.ch:
			if !ok {
				return items
			}
			items = append(items, it)
		case <-timeout:
			t.Fatalf("the watcher is still open after %d items", len(items))
		}
	}
}

// A relayed watcher that does not keep up is closed, as the cache's are,
// after the items its buffer held; its client resumes from the last.
func TestUncachedWatcherFallsBehind(t *testing.T) {
	ctx := t.Context()
	st := openTestStore(t)
	c := runWatchCache(t, api.Events, st, watchCacheOptions{uncached: true, buffer: 2})
	from, err := st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, _, w, err := c.watch(ctx, from, false, filter{}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		name := fmt.Sprintf("e.%d", i)
		if _, err := st.Create(ctx, registryPrefix(api.Events)+"default/"+name, []byte(`{"kind":"Event","apiVersion":"v1","metadata":{"name":"`+name+`","namespace":"default"}}`)); err != nil {
			t.Fatal(err)
		}
	}
	// Nobody reads until the relay has given up: reading sooner, while it
	// is still relaying, would make room for every item.
	select {
	case <-w.relay.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay is still running after 5 events for a buffer of 2")
	}
	items := drain(t, w)
	if len(items) != 2 || items[0].typ != watch.Added || !strings.HasSuffix(items[0].obj.key, "/e.0") || !strings.HasSuffix(items[1].obj.key, "/e.1") {
		t.Errorf("got %d items before the close, want ADDED e.0 and e.1, the buffer's 2", len(items))
	}
	if w.err != nil {
		t.Errorf("closed with %v, want no error: its client resumes", w.err)
	}
	c.stop(w) // stopping a watcher its relay ended is harmless
}

// When the cache ends, so does every relay, before run returns; a watch
// asked for afterwards is refused.
func TestUncachedCacheEndsItsRelays(t *testing.T) {
	st := openTestStore(t)
	c := newWatchCache(api.Events, st, watchCacheOptions{uncached: true, metrics: newMetrics(prometheus.NewRegistry())})
	ctx, stop := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { defer close(ran); c.run(ctx) }()
	_, _, w, err := c.watch(t.Context(), 0, true, filter{}, true, false)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	<-ran
	select {
	case _, ok := <-w.ch:
		if ok {
			t.Error("an item after the cache ended")
		}
	default:
		t.Error("the watcher's channel is open after run returned")
	}
	_, _, _, err = c.watch(t.Context(), 0, true, filter{}, false, false)
	if se, ok := err.(apierrors.APIStatus); !ok || se.Status().Code != http.StatusServiceUnavailable {
		t.Errorf("a watch after the end: %v, want 503", err)
	}
}
