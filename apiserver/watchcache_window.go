package apiserver

import "time"

// The window of recent events a watch cache keeps, so that a watcher that
// resumes from a recent resourceVersion is served from memory, is bounded
// three ways, as kube-apiserver's cacher bounds its own:
//
//   - by count: at most capacity events (--default-watch-cache-size);
//   - by bytes: at most maxBytes of the events' encodings (JSON, or
//     protobuf for a lean resource, as the cache holds them), the newest
//     event always kept (--watch-cache-max-bytes; kube-apiserver has no
//     such flag, its window holds decoded objects and bounds only count);
//   - by age: an event older than window (kube's eventFreshDuration, 75s:
//     a little more than the bookmark interval, so that a watcher that had
//     its last bookmark is still served) is dropped, unless it is among
//     the newest minWindowEvents (kube's lower bound of its capacity).
//
// Whatever the rule drops moves oldest up to the dropped event's revision,
// so a watch from a revision at or after oldest misses nothing and one
// from before it gets 410 Gone. The ring holding the events starts small
// and doubles as it fills, up to capacity, so that the caches of resources
// that hardly change cost little.

const (
	// DefaultWatchCacheMaxBytes bounds the encoded bytes of the events each
	// resource's watch cache keeps, unless Config.WatchCacheMaxBytes says
	// otherwise.
	DefaultWatchCacheMaxBytes = 32 << 20
	// DefaultWatchCacheWindow is how long each resource's watch cache
	// keeps its events, above minWindowEvents, unless Config.WatchCacheWindow
	// says otherwise (kube-apiserver's eventFreshDuration).
	DefaultWatchCacheWindow = 75 * time.Second
	// minWindowEvents is how many of the newest events are kept however
	// old they are (kube-apiserver's defaultLowerBoundCapacity).
	minWindowEvents = 100
	// firstRingSize is the ring's size before it first grows.
	firstRingSize = 64
	// windowCheckInterval is how often a cache that receives no events
	// drops those that aged out of its window.
	windowCheckInterval = 5 * time.Second
)

// eventAt is the i-th event of the window, oldest first (i < count).
func (c *watchCache) eventAt(i int) *cachedEvent {
	return c.history[(c.start+i)%len(c.history)]
}

// appendLocked adds e to the window, then drops what the window's bounds
// no longer allow.
func (c *watchCache) appendLocked(e *cachedEvent) {
	e.at = c.clock.Now()
	e.size = e.obj.encodedSize()
	if c.count == c.capacity {
		c.evictLocked()
	}
	if c.count == len(c.history) {
		c.growLocked()
	}
	c.history[(c.start+c.count)%len(c.history)] = e
	c.count++
	c.bytes += e.size
	c.trimLocked(e.at)
}

// trimLocked drops the oldest events while the window holds more bytes
// than maxBytes, or events older than window beyond minWindowEvents.
func (c *watchCache) trimLocked(now time.Time) {
	for c.count > 1 && c.bytes > c.maxBytes {
		c.evictLocked()
	}
	for c.count > minWindowEvents && now.Sub(c.eventAt(0).at) > c.window {
		c.evictLocked()
	}
}

// trim is trimLocked at the cache's present time: run calls it every
// windowCheckInterval, so that a resource that stopped changing lets its
// old events go.
func (c *watchCache) trim() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trimLocked(c.clock.Now())
}

// evictLocked drops the window's oldest event: a watch can no longer start
// before its revision.
func (c *watchCache) evictLocked() {
	e := c.history[c.start]
	c.oldest = max(c.oldest, e.rv)
	c.history[c.start] = nil
	c.start = (c.start + 1) % len(c.history)
	c.count--
	c.bytes -= e.size
}

// growLocked doubles the ring, up to capacity, keeping the events in order.
func (c *watchCache) growLocked() {
	n := min(max(2*len(c.history), firstRingSize), c.capacity)
	ring := make([]*cachedEvent, n)
	for i := range c.count {
		ring[i] = c.eventAt(i)
	}
	c.history, c.start = ring, 0
}

// resetWindowLocked empties the window, as a fill does.
func (c *watchCache) resetWindowLocked() {
	c.history = nil
	c.start, c.count, c.bytes = 0, 0, 0
}

// encodedSize is the bytes of o's encodings as the cache holds them: as
// stored (JSON, or a lean object's protobuf) and at every other version
// the cache serves.
func (o *cachedObject) encodedSize() int64 {
	n := int64(len(o.raw))
	if o.raw == nil {
		n = int64(len(o.pb)) // lean: held as protobuf alone
	}
	for i := range o.views {
		if v := o.views[i].Load(); v != nil {
			n += int64(len(v.raw))
		}
	}
	return n
}
