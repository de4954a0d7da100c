package ocm_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// liveHeap is the heap's live bytes after two collections (the second empties sync.Pool's victim caches).
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// retainedBy returns the heap c retains after resolving ref: the live heap after the resolve less the live heap
// before, the vector returned dropped and the registry connections closed.
func retainedBy(t *testing.T, c *ocm.Client, ref string) int64 {
	t.Helper()
	before := liveHeap()
	if _, err := c.ResolveVector(context.Background(), ref, ocm.Read{}); err != nil {
		t.Fatal(err)
	}
	c.CloseIdleConnections()
	retained := liveHeap() - before
	runtime.KeepAlive(c)
	return retained
}

// largeArtifacts pushes a vector of n artifacts to which resource adds one resource each, and returns its
// reference.
func largeArtifacts(t *testing.T, reg *ocmtest.Registry, version, name string, n int, resource func(i int) ocmtest.Resource) string {
	t.Helper()
	var artifacts []ocmtest.ComponentVersion
	for i := range n {
		a := ocmtest.Artifact(fmt.Sprintf("acme.org/artifacts/%s-%02d", name, i), "1.0.0", "cloud.konfidence.flux.helm", true)
		a.Resources = append(a.Resources, resource(i))
		artifacts = append(artifacts, a)
	}
	reg.Push(t, "", artifacts...)
	reg.Push(t, "", ocmtest.Vector(vectorName, version, artifacts...))
	return reg.Ref("", vectorName, version)
}

// TestCachedArtifactsRetainTheirParsedFormOnly: artifacts whose descriptors are ~150 KiB, almost all of it in a
// field the reader does not keep, cost the cache what it keeps of them, a few KiB each, not their descriptors.
// Before, each cached artifact kept its descriptor's bytes (with the read buffer's spare capacity): 24 of them
// retained over 3 MiB.
func TestCachedArtifactsRetainTheirParsedFormOnly(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	const n = 24
	ref := largeArtifacts(t, reg, "1.0.0", "notes", n, func(int) ocmtest.Resource {
		return ocmtest.Resource{Name: "notes", Version: strings.Repeat("x", 150<<10), Type: "plainText", Access: map[string]string{"type": "none"}}
	})
	c := ocm.NewClient(ocm.Options{})
	retained := retainedBy(t, c, ref)
	vectors, artifacts := c.CachedBytes()
	t.Logf("%d artifacts of ~150 KiB descriptors: the heap retained %d KiB, the caches count %d KiB (vectors) and %d KiB (artifacts)",
		n, retained>>10, vectors>>10, artifacts>>10)
	if retained > n*8<<10 {
		t.Errorf("the cache retains %d KiB for %d artifacts, more than 8 KiB each", retained>>10, n)
	}
	if artifacts == 0 || vectors < artifacts {
		t.Errorf("the caches count %d bytes of vectors, %d of artifacts: both hold the artifacts", vectors, artifacts)
	}
}

// TestCachesStayWithinTheirByteBudget: artifacts that keep ~48 KiB each (a large access, forwarded to the deployer
// as written) fill the caches only up to Options.CacheBytes: least recently used artifacts are evicted, a vector
// larger than the budget is not cached, and the heap the client retains stays within the two caches' budgets and
// is what the caches count.
func TestCachesStayWithinTheirByteBudget(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	const n, budget = 24, 512 << 10
	ref := largeArtifacts(t, reg, "2.0.0", "config", n, func(i int) ocmtest.Resource {
		return ocmtest.Resource{Name: "config", Type: "plainText", Access: map[string]string{"type": "none", "note": strings.Repeat(fmt.Sprint(i%10), 48<<10)}}
	})
	c := ocm.NewClient(ocm.Options{CacheBytes: budget})
	retained := retainedBy(t, c, ref)
	vectors, artifacts := c.CachedBytes()
	t.Logf("%d artifacts of ~48 KiB kept each, budget %d KiB: the heap retained %d KiB, the caches count %d KiB (vectors) and %d KiB (artifacts)",
		n, budget>>10, retained>>10, vectors>>10, artifacts>>10)
	if vectors > budget || artifacts > budget {
		t.Errorf("the caches count %d and %d bytes, over the budget of %d", vectors, artifacts, budget)
	}
	if vectors != 0 {
		t.Errorf("a vector of %d such artifacts, larger than the budget, was cached (%d bytes)", n, vectors)
	}
	if artifacts < budget/2 {
		t.Errorf("the artifact cache counts %d bytes: it should have filled its budget of %d", artifacts, budget)
	}
	if retained > 2*budget {
		t.Errorf("the client retains %d KiB, over the budget of two caches of %d KiB", retained>>10, budget>>10)
	}
	// The count is an estimate: within a fifth of what is retained, beside the client's own few tens of KiB.
	if counted := vectors + artifacts; retained > counted*6/5+64<<10 {
		t.Errorf("the client retains %d KiB, the caches count %d KiB: they undercount", retained>>10, counted>>10)
	}
}
