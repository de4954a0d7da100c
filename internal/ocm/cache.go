package ocm

import klru "k8s.io/utils/lru"

// lru is a typed view of a size-bounded least-recently-used map (k8s.io/utils/lru, safe for concurrent use).
// Component versions are immutable, so entries never expire; the bound only keeps a long-running operator's
// memory flat.
type lru[V any] struct {
	name  string      // the cache label of the lookup metric
	cache *klru.Cache // nil when caching is disabled
}

// newLRU returns a cache holding up to max entries; max <= 0 disables it (k8s.io/utils/lru reads 0 as unbounded).
func newLRU[V any](name string, max int) *lru[V] {
	if max <= 0 {
		return &lru[V]{name: name}
	}
	return &lru[V]{name: name, cache: klru.New(max)}
}

func (c *lru[V]) get(key string) (V, bool) {
	if c.cache != nil {
		if v, ok := c.cache.Get(key); ok {
			countLookup(c.name, true)
			return v.(V), true
		}
	}
	countLookup(c.name, false)
	var zero V
	return zero, false
}

func (c *lru[V]) add(key string, value V) {
	if c.cache != nil {
		c.cache.Add(key, value)
	}
}
