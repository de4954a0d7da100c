package ocm

import (
	"context"

	klru "k8s.io/utils/lru"
)

type bypassCacheKey struct{}

// BypassCache makes the reads under ctx go to the registry and refresh the cache with what they find. A version is
// immutable, yet a user who asks for a reconcile expects the registry to be asked: a component version pushed
// again under the same version (against OCM's rules, but it happens) or one deleted shows up this way.
func BypassCache(ctx context.Context) context.Context {
	return context.WithValue(ctx, bypassCacheKey{}, true)
}

func bypassesCache(ctx context.Context) bool {
	bypass, _ := ctx.Value(bypassCacheKey{}).(bool)
	return bypass
}

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

// get misses when ctx bypasses the cache.
func (c *lru[V]) get(ctx context.Context, key string) (V, bool) {
	if c.cache != nil && !bypassesCache(ctx) {
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

func (c *lru[V]) remove(key string) {
	if c.cache != nil {
		c.cache.Remove(key)
	}
}
