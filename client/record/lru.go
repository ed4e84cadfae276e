package record

import "container/list"

// lru is a map that holds at most max entries, forgetting the least recently
// used one to make room. It is not safe for concurrent use: the recorder's
// sender goroutine is its only user.
type lru[K comparable, V any] struct {
	max   int
	order *list.List          // front = most recently used; element values are *lruEntry
	items map[K]*list.Element // key → its element in order
}

type lruEntry[K comparable, V any] struct {
	key   K
	value V
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, order: list.New(), items: make(map[K]*list.Element)}
}

// get returns the value of key and marks it used.
func (c *lru[K, V]) get(key K) (V, bool) {
	el, ok := c.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*lruEntry[K, V]).value, true
}

// put sets key to value, marks it used and forgets the oldest entry when
// the cache is over its size.
func (c *lru[K, V]) put(key K, value V) {
	if el, ok := c.items[key]; ok {
		el.Value.(*lruEntry[K, V]).value = value
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&lruEntry[K, V]{key: key, value: value})
	if c.order.Len() > c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*lruEntry[K, V]).key)
	}
}

func (c *lru[K, V]) len() int { return c.order.Len() }
