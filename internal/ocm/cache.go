package ocm

import (
	"container/list"
	"sync"
)

// lru is a least-recently-used map bounded by entries and by bytes, safe for concurrent use. Component versions
// are immutable, so entries never expire; the bounds only keep a long-running operator's memory flat. The byte
// bound matters because a registry, i.e. a tenant, decides how large an entry is: a count alone let 512 entries
// of large descriptors retain hundreds of MiB.
type lru[V any] struct {
	name       string // the cache label of the metrics
	maxEntries int
	maxBytes   int64
	sizeOf     func(V) int64 // what an entry's value retains

	mu      sync.Mutex
	order   *list.List // of *lruEntry[V], most recently used first; nil when caching is disabled
	entries map[string]*list.Element
	bytes   int64
}

type lruEntry[V any] struct {
	key   string
	value V
	size  int64
}

// lruEntryOverhead is what an entry costs besides its key and value: the list element, the map slot (at the map's
// load factor) and the entry, each rounded up to its size class.
const lruEntryOverhead = 192

// newLRU returns a cache of at most maxEntries entries retaining at most maxBytes, values sized by sizeOf; a bound
// <= 0 disables it.
func newLRU[V any](name string, maxEntries int, maxBytes int64, sizeOf func(V) int64) *lru[V] {
	c := &lru[V]{name: name, maxEntries: maxEntries, maxBytes: maxBytes, sizeOf: sizeOf}
	if maxEntries > 0 && maxBytes > 0 {
		c.order, c.entries = list.New(), map[string]*list.Element{}
	}
	return c
}

// get misses when the read bypasses the cache (Read.BypassCache).
func (c *lru[V]) get(key string, bypass bool) (V, bool) {
	if c.order != nil && !bypass {
		c.mu.Lock()
		e, ok := c.entries[key]
		if ok {
			c.order.MoveToFront(e)
		}
		c.mu.Unlock()
		if ok {
			countLookup(c.name, true)
			return e.Value.(*lruEntry[V]).value, true
		}
	}
	countLookup(c.name, false)
	var zero V
	return zero, false
}

// add caches value under key, evicting the least recently used entries beyond the bounds. A value larger than the
// byte bound is not cached (and replaces no entry): it would evict everything else, then itself.
func (c *lru[V]) add(key string, value V) {
	if c.order == nil {
		return
	}
	size := c.sizeOf(value) + int64(len(key)) + lruEntryOverhead
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(key)
	if size > c.maxBytes {
		return
	}
	c.entries[key] = c.order.PushFront(&lruEntry[V]{key: key, value: value, size: size})
	c.account(size)
	for c.order.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.removeLocked(c.order.Back().Value.(*lruEntry[V]).key)
	}
}

func (c *lru[V]) remove(key string) {
	if c.order == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(key)
}

func (c *lru[V]) removeLocked(key string) {
	if e, ok := c.entries[key]; ok {
		c.order.Remove(e)
		delete(c.entries, key)
		c.account(-e.Value.(*lruEntry[V]).size)
	}
}

func (c *lru[V]) account(delta int64) {
	c.bytes += delta
	cacheBytes.WithLabelValues(c.name).Add(float64(delta))
}
