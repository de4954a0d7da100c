package ocm_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/spec"
)

// descriptorOfSize is a component descriptor of exactly size bytes (give or take an item): the header of a valid
// descriptor of component, then item repeated inside list, e.g. JSON `"resources":[` … `]}}`.
func descriptorOfSize(head, item, tail string, size int) []byte {
	n := (size - len(head) - len(tail) + 1) / (len(item) + 1)
	return []byte(head + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + tail)
}

func jsonHead(component, version string) string {
	return `{"meta":{"schemaVersion":"v2"},"component":{"name":"` + component + `","version":"` + version + `","provider":"p",`
}

func yamlHead(component, version string) string {
	return "meta:\n  schemaVersion: v2\ncomponent:\n  name: " + component + "\n  version: " + version + "\n  provider: p\n"
}

// TestDescriptorLimits: a descriptor above the size limit, a descriptor that is not JSON under a JSON media type,
// a manifest above its limit and a vector of too many references are each refused with a specific reason, in a
// registry and in a CTF; a YAML descriptor under a YAML media type still reads.
func TestDescriptorLimits(t *testing.T) {
	oversized := ocmtest.ComponentVersion{Name: vectorName, Version: "1.0.0-oversized",
		RawDescriptor: descriptorOfSize(jsonHead(vectorName, "1.0.0-oversized")+`"resources":[`, `{}`, `]}}`, ocm.DefaultMaxDescriptorSize+1024)}
	yamlDoc := yamlHead(vectorName, "1.0.0-yaml") + "  componentReferences: []\n"
	yamlAsJSON := ocmtest.ComponentVersion{Name: vectorName, Version: "1.0.0-yaml", RawDescriptor: []byte(yamlDoc)}
	yamlAsYAML := ocmtest.ComponentVersion{Name: vectorName, Version: "1.0.0-yaml-typed", RawDescriptor: []byte(strings.Replace(yamlDoc, "1.0.0-yaml", "1.0.0-yaml-typed", 1)),
		DescriptorMediaType: spec.MediaTypeDescriptorYAML}
	// Every local blob is a layer of the manifest: 300 of them take it above 64 KiB.
	manyBlobs := ocmtest.Artifact("acme.org/artifacts/many-blobs", "1.0.0", "cloud.konfidence.flux.helm", true)
	for i := range 300 {
		manyBlobs.Resources = append(manyBlobs.Resources, ocmtest.Resource{Name: fmt.Sprintf("blob-%d", i), Type: "blob", Blob: fmt.Appendf(nil, `{"i":%d}`, i)})
	}
	manyBlobsVector := ocmtest.Vector(vectorName, "1.0.0-many-blobs", manyBlobs)
	manyRefs := ocmtest.ComponentVersion{Name: vectorName, Version: "1.0.0-many-refs"}
	for i := range ocm.DefaultMaxReferences + 1 {
		manyRefs.References = append(manyRefs.References, spec.Reference{Name: fmt.Sprintf("r%d", i), ComponentName: fmt.Sprintf("acme.org/artifacts/a%d", i), Version: "1.0.0"})
	}

	for _, b := range backends(t) {
		b.publish(t, oversized, yamlAsJSON, yamlAsYAML, manyBlobs, manyBlobsVector, manyRefs)
		c := ocm.NewClient(ocm.Options{})
		for _, tc := range []struct {
			cv        ocmtest.ComponentVersion
			want      *ocm.Error
			permanent bool
			mentions  string
		}{
			{oversized, ocm.ErrBlobTooLarge, false, "component descriptor"},
			{yamlAsJSON, ocm.ErrDescriptorInvalid, true, "as JSON"},
			{manyRefs, ocm.ErrTooManyReferences, true, "513"},
		} {
			t.Run(b.name+"/"+tc.cv.Version, func(t *testing.T) {
				v, err := c.ResolveVector(context.Background(), b.ref(tc.cv.Name, tc.cv.Version), ocm.Read{})
				if v != nil {
					t.Fatalf("resolved %+v", v)
				}
				assertError(t, err, tc.want, tc.permanent)
				if !strings.Contains(err.Error(), tc.mentions) {
					t.Errorf("error %q does not say %q", err, tc.mentions)
				}
			})
		}
		t.Run(b.name+"/manifest", func(t *testing.T) {
			v, err := c.ResolveVector(context.Background(), b.ref(manyBlobsVector.Name, manyBlobsVector.Version), ocm.Read{})
			if v == nil || !strings.Contains(fmt.Sprint(v.Artifacts[0].Err), "manifest") {
				t.Fatalf("vector %+v, %v", v, err)
			}
			assertError(t, v.Artifacts[0].Err, ocm.ErrBlobTooLarge, false)
		})
		t.Run(b.name+"/yaml-media-type", func(t *testing.T) {
			if v, err := c.ResolveVector(context.Background(), b.ref(yamlAsYAML.Name, yamlAsYAML.Version), ocm.Read{}); err != nil || v.Version != yamlAsYAML.Version {
				t.Errorf("YAML descriptor under a YAML media type: %+v, %v", v, err)
			}
		})
	}
}

// peakHeap runs f and returns the peak of the heap's object bytes (live and not yet swept) above what it was
// before, sampled every 20µs, and the bytes f allocated. The sampler may miss a peak between two samples; the
// allocated bytes bound it from above.
func peakHeap(f func()) (peak, allocated uint64) {
	runtime.GC()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(samples)
	base, allocsBefore := samples[0].Value.Uint64(), samples[1].Value.Uint64()
	var max atomic.Uint64
	sample := func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(s)
		if v := s[0].Value.Uint64(); v > max.Load() {
			max.Store(v)
		}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			sample()
			select {
			case <-done:
				return
			case <-time.After(20 * time.Microsecond):
			}
		}
	}()
	f()
	close(done)
	<-stopped
	sample()
	metrics.Read(samples)
	return max.Load() - min(base, max.Load()), samples[1].Value.Uint64() - allocsBefore
}

// BenchmarkWorstAcceptedDescriptor resolves, with a fresh client each time, vectors whose descriptor is the most
// expensive shape found per encoding at the size limit, and reports the peak heap of one resolve: no
// accepted input may cost more than ~32 MiB. The shapes: an array of empty objects decodes into
// a slice of large structs (~150× its bytes); YAML builds a generic tree and re-encodes it as JSON first.
func BenchmarkWorstAcceptedDescriptor(b *testing.B) {
	reg := ocmtest.NewRegistry(b)
	size := ocm.DefaultMaxDescriptorSize
	for _, tc := range []struct {
		name, mediaType, head, item, tail string
	}{
		{"json-empty-resources", spec.MediaTypeDescriptorJSON, jsonHead(vectorName, "1.0.0-json") + `"resources":[`, `{}`, `]}}`},
		{"json-empty-references", spec.MediaTypeDescriptorJSON, jsonHead(vectorName, "1.0.0-refs") + `"componentReferences":[`, `{}`, `]}}`},
		{"yaml-flow-sequence", spec.MediaTypeDescriptorYAML, yamlHead(vectorName, "1.0.0-yaml") + "  repositoryContexts: [", "1", "]\n"},
		{"yaml-empty-maps", spec.MediaTypeDescriptorYAML, yamlHead(vectorName, "1.0.0-yaml-maps") + "  repositoryContexts: [", "{}", "]\n"},
		{"yaml-flat-map", spec.MediaTypeDescriptorYAML, yamlHead(vectorName, "1.0.0-yaml-flat") + "  labels: {", "a: 1", "}\n"},
	} {
		version := tc.head[strings.Index(tc.head, "1.0.0-"):]
		version = version[:strings.IndexAny(version, "\"\n")]
		cv := ocmtest.ComponentVersion{Name: vectorName, Version: version, DescriptorMediaType: tc.mediaType,
			RawDescriptor: descriptorOfSize(tc.head, tc.item, tc.tail, size)}
		reg.Push(b, "", cv)
		ref := reg.Ref("", vectorName, version)
		b.Run(tc.name, func(b *testing.B) {
			var peak, allocated uint64
			for b.Loop() {
				p, a := peakHeap(func() {
					// The references shape is refused (TooManyReferences) after decoding: its cost is paid anyway.
					if _, err := ocm.NewClient(ocm.Options{}).ResolveVector(context.Background(), ref, ocm.Read{}); err != nil && ocm.ReasonOf(err) != ocm.ReasonTooManyReferences {
						b.Fatal(err)
					}
				})
				peak, allocated = max(peak, p), max(allocated, a)
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(allocated)/(1<<20), "alloc-MiB")
			b.ReportMetric(float64(len(cv.RawDescriptor))/(1<<10), "descriptor-KiB")
		})
	}
}
