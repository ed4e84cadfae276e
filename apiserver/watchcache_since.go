package apiserver

// since returns the cache's events after rv, oldest first, and the
// revision the cache is at, for an in-process follower that catches up
// when it next looks instead of holding a watch. ok is false when the
// window no longer holds every event after rv (evicted, or replaced by a
// relist), when rv is ahead of the cache (a lost history) or when the
// cache is not filled: the follower lists instead.
func (c *watchCache) since(rv int64) (events []*cachedEvent, now int64, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.ready || rv < c.oldest || rv > c.rv {
		return nil, c.rv, false
	}
	for i := 0; i < c.count; i++ {
		if e := c.eventAt(i); e.rv > rv {
			events = append(events, e)
		}
	}
	return events, c.rv, true
}
