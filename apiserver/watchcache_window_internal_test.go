package apiserver

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/clock"
)

// TestWatchCacheWindowByAge moves the cache's clock past its window: the
// events older than the window go, but for the newest minWindowEvents,
// even while nothing changes; newer ones stay, however many. A watch from
// a revision the window holds gets every event after it; one from an
// earlier revision, 410 Gone.
func TestWatchCacheWindowByAge(t *testing.T) {
	ctx := t.Context()
	st := openTestStore(t)
	clk := clock.NewFake(time.Unix(0, 0))
	c := runWatchCache(t, api.ConfigMaps, st, watchCacheOptions{clock: clk})
	var rvs []int64
	write := func(n int) {
		t.Helper()
		for range n {
			cm := &corev1.ConfigMap{}
			cm.Name, cm.Namespace = fmt.Sprintf("cm-%03d", len(rvs)), "default"
			setTypeMeta(api.ConfigMaps, cm)
			data, err := encodeForStorage(api.ConfigMaps, cm)
			if err != nil {
				t.Fatal(err)
			}
			rev, err := st.Create(ctx, registryPrefix(api.ConfigMaps)+"default/"+cm.Name, data)
			if err != nil {
				t.Fatal(err)
			}
			rvs = append(rvs, rev)
		}
		if err := c.waitFresh(ctx, rvs[len(rvs)-1]); err != nil {
			t.Fatal(err)
		}
	}

	// 150 events at time 0; the window's age bound drops none yet.
	write(150)
	checkWatchFrom(t, c, rvs, 0)

	// Past the window, with no new event: the periodic check drops all but
	// the newest minWindowEvents.
	clk.Step(DefaultWatchCacheWindow + windowCheckInterval)
	first := 150 - minWindowEvents - 1
	waitUntil(t, "the events older than the window to go", func() bool { return oldest(c) == rvs[first] })
	checkWatchFrom(t, c, rvs, first)

	// 150 new events: they are in the window, beyond minWindowEvents, and
	// each one drops an old event as it comes.
	write(150)
	first = 149
	if oldest(c) != rvs[first] {
		t.Errorf("after 150 fresh events, a watch can start at %d, want %d (the last old event's)", oldest(c), rvs[first])
	}
	checkWatchFrom(t, c, rvs, first)

	// Half the window later they are all still there.
	clk.Step(DefaultWatchCacheWindow / 2)
	clk.Step(windowCheckInterval)
	time.Sleep(10 * time.Millisecond) // a wrong drop would have had time to happen
	checkWatchFrom(t, c, rvs, first)
}

// oldest is the revision from which a watch can start.
func oldest(c *watchCache) int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.oldest
}

// checkWatchFrom starts a watch from each of rvs: from rvs[i] with i >=
// first it must get exactly the events of rvs[i+1:]; from an earlier one,
// 410 Gone.
func checkWatchFrom(t *testing.T, c *watchCache, rvs []int64, first int) {
	t.Helper()
	for i, from := range rvs {
		items, _, w, err := c.watch(t.Context(), from, false, filter{}, false, false)
		if i < first {
			if !apierrors.IsResourceExpired(err) {
				t.Fatalf("watch from %d (event %d of %d, before the window from %d): %v, want 410 Gone", from, i, len(rvs), rvs[first], err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("watch from %d (event %d, in the window): %v", from, i, err)
		}
		c.stop(w)
		if len(items) != len(rvs)-i-1 {
			t.Fatalf("watch from %d: %d events, want %d", from, len(items), len(rvs)-i-1)
		}
		for j, it := range items {
			if it.rv != rvs[i+1+j] {
				t.Fatalf("watch from %d: event %d at %d, want %d", from, j, it.rv, rvs[i+1+j])
			}
		}
	}
}
