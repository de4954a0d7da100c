package ocm

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestLRUEvictsLeastRecentlyUsed(t *testing.T) {
	c := newLRU("test", 2, 1<<20, func(int) int64 { return 8 })
	c.add("a", 1)
	c.add("b", 2)
	if v, ok := c.get("a", false); !ok || v != 1 { // a is now more recent than b
		t.Fatalf("get(a) = %v, %v", v, ok)
	}
	c.add("c", 3)
	if _, ok := c.get("b", false); ok {
		t.Error("b survived although it was least recently used")
	}
	for k, want := range map[string]int{"a": 1, "c": 3} {
		if v, ok := c.get(k, false); !ok || v != want {
			t.Errorf("get(%s) = %v, %v; want %v", k, v, ok, want)
		}
	}
	if c.order.Len() != 2 {
		t.Errorf("size %d, want 2", c.order.Len())
	}

	off := newLRU("test", -1, 1<<20, func(int) int64 { return 8 })
	off.add("a", 1)
	if _, ok := off.get("a", false); ok {
		t.Error("disabled cache returned an entry")
	}
}

// TestLRUBoundsBytes: entries are evicted, least recently used first, until the bytes they retain fit the bound;
// an entry larger than the bound is not cached and drops the entry it would replace; the accounting returns to
// zero when every entry is gone.
func TestLRUBoundsBytes(t *testing.T) {
	size := func(v []byte) int64 { return int64(len(v)) }
	entry := func(key string, n int) int64 { return int64(n+len(key)) + lruEntryOverhead }
	c := newLRU("test-bytes", 100, 3*entry("a", 1000), size)
	for _, key := range []string{"a", "b", "c"} {
		c.add(key, make([]byte, 1000))
	}
	c.get("a", false) // a is now more recent than b
	c.add("d", make([]byte, 1000))
	if _, ok := c.get("b", false); ok {
		t.Error("b survived although the bytes were over the bound and b was least recently used")
	}
	if c.order.Len() != 3 || c.bytes != 3*entry("a", 1000) {
		t.Errorf("%d entries of %d bytes, want 3 of %d", c.order.Len(), c.bytes, 3*entry("a", 1000))
	}
	c.add("a", make([]byte, 4000)) // larger than the bound
	if _, ok := c.get("a", false); ok || c.order.Len() != 2 || c.bytes != 2*entry("a", 1000) {
		t.Errorf("an entry above the bound: cached %v, %d entries of %d bytes", ok, c.order.Len(), c.bytes)
	}
	c.remove("c")
	c.remove("d")
	if c.order.Len() != 0 || c.bytes != 0 {
		t.Errorf("empty cache holds %d entries of %d bytes", c.order.Len(), c.bytes)
	}
	if got := testutil.ToFloat64(cacheBytes.WithLabelValues("test-bytes")); got != 0 {
		t.Errorf("fluxdeployer_registry_cache_bytes = %v for an empty cache", got)
	}
}

func TestCacheKeyNormalisesRepositorySpelling(t *testing.T) {
	key := func(s string) string {
		r, err := ParseRef(s)
		if err != nil {
			t.Fatal(err)
		}
		return cacheKey(r, access{})
	}
	if key("oci://h:5000/a//acme.org/x:1.0.0") != key("h:5000/a/component-descriptors/acme.org/x:1.0.0") {
		t.Error("oci:// and schemeless TLS references to the same version have different keys")
	}
	if key("http://h:5000//acme.org/x:1.0.0") == key("https://h:5000//acme.org/x:1.0.0") {
		t.Error("plain HTTP and TLS share a key")
	}
	if key("h:5000//acme.org/x:1.0.0") == key("h:5000//acme.org/x:1.0.0@sha256:0123456789abcdef0123456789abcdef") {
		t.Error("a digest-pinned reference shares the unpinned key")
	}
}

func TestLRUCountsLookups(t *testing.T) {
	hits, misses := cacheLookups.WithLabelValues("counted", "hit"), cacheLookups.WithLabelValues("counted", "miss")
	c := newLRU("counted", 1, 1<<20, func(int) int64 { return 8 })
	c.get("a", false)
	c.add("a", 1)
	c.get("a", false)
	c.get("a", false)
	if h, m := testutil.ToFloat64(hits), testutil.ToFloat64(misses); h != 2 || m != 1 {
		t.Errorf("%v hits and %v misses, want 2 and 1", h, m)
	}
}
