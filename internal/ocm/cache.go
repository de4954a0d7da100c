package ocm

import (
	"container/list"
	"sync"
)

// lru is a size-bounded least-recently-used map. Component versions are immutable, so entries never expire;
// the bound only keeps a long-running operator's memory flat.
type lru[V any] struct {
	mu    sync.Mutex
	max   int
	order *list.List // front = most recently used; elements hold *lruEntry[V]
	items map[string]*list.Element
}

type lruEntry[V any] struct {
	key   string
	value V
}

// newLRU returns a cache holding up to max entries; max < 0 disables it.
func newLRU[V any](max int) *lru[V] {
	return &lru[V]{max: max, order: list.New(), items: map[string]*list.Element{}}
}

func (c *lru[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruEntry[V]).value, true
	}
	var zero V
	return zero, false
}

func (c *lru[V]) add(key string, value V) {
	if c.max < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		e.Value.(*lruEntry[V]).value = value
		c.order.MoveToFront(e)
		return
	}
	c.items[key] = c.order.PushFront(&lruEntry[V]{key: key, value: value})
	if c.order.Len() > c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*lruEntry[V]).key)
	}
}
