package operating

import (
	"sync"
	"time"
)

// MinBypassInterval is how often, at most, reconcile requests of one object read its vector around the OCM
// client's cache. A read around the cache reads every artifact again (three requests for the vector and four per
// artifact: 131 for a vector of 32 artifacts), and whoever may annotate a VectorDeployment or a Stage may request
// reconciles as fast as the API server takes the writes: without a bound, each one would make the operator send
// that many requests on the tenant's behalf.
const MinBypassInterval = time.Minute

// CacheBypass bounds the reconcile requests that read around the cache: at most one per Interval for each key (an
// object of one kind). Its memory is per operator process; a restart forgets it, which costs one read around the
// cache per object at most.
type CacheBypass struct {
	// Interval is MinBypassInterval; tests shorten it to make every request read around the cache.
	Interval time.Duration
	last     sync.Map // of key to time.Time
}

// Allow reports whether a reconcile request of key, made at now, may read around the cache, and if so counts it.
func (b *CacheBypass) Allow(key any, now time.Time) bool {
	if last, ok := b.last.Load(key); ok && now.Sub(last.(time.Time)) < b.Interval {
		return false
	}
	b.last.Store(key, now)
	return true
}

// Forget drops what is held for key, once its object is deleted.
func (b *CacheBypass) Forget(key any) {
	b.last.Delete(key)
}
