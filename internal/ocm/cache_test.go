package ocm

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestLRUEvictsLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	c := newLRU[int]("test", 2)
	c.add("a", 1)
	c.add("b", 2)
	if v, ok := c.get(ctx, "a"); !ok || v != 1 { // a is now more recent than b
		t.Fatalf("get(a) = %v, %v", v, ok)
	}
	c.add("c", 3)
	if _, ok := c.get(ctx, "b"); ok {
		t.Error("b survived although it was least recently used")
	}
	for k, want := range map[string]int{"a": 1, "c": 3} {
		if v, ok := c.get(ctx, k); !ok || v != want {
			t.Errorf("get(%s) = %v, %v; want %v", k, v, ok, want)
		}
	}
	if c.cache.Len() != 2 {
		t.Errorf("size %d, want 2", c.cache.Len())
	}

	off := newLRU[int]("test", -1)
	off.add("a", 1)
	if _, ok := off.get(ctx, "a"); ok {
		t.Error("disabled cache returned an entry")
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
	c := newLRU[int]("counted", 1)
	ctx := context.Background()
	c.get(ctx, "a")
	c.add("a", 1)
	c.get(ctx, "a")
	c.get(ctx, "a")
	if h, m := testutil.ToFloat64(hits), testutil.ToFloat64(misses); h != 2 || m != 1 {
		t.Errorf("%v hits and %v misses, want 2 and 1", h, m)
	}
}
