package ocm

import (
	"reflect"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/spec"
)

// What the cached values retain, in bytes, for the caches' byte bound: the structs, the backing arrays of their
// slices (by capacity), strings and byte slices, and maps at a flat cost per entry. It is a deterministic estimate of
// the heap an entry keeps alive: measured, an artifact of two small resources keeps ~2 KiB where ~1.7 KiB are
// counted, one with a 16 KiB access 4% more than counted (TestCachesStayWithinTheirByteBudget checks the bound).
var (
	vectorBytes     = sizeOf[Vector]()
	artifactBytes   = sizeOf[Artifact]()
	resourceBytes   = sizeOf[Resource]()
	taskBytes       = sizeOf[Task]()
	referenceBytes  = sizeOf[spec.Reference]()
	digestBytes     = sizeOf[spec.Digest]()
	stringBytes     = sizeOf[string]()
	referencedBytes = sizeOf[ReferencedArtifact]()
)

// roundingBytes is what the allocator adds to a small allocation on average, rounding it up to its size class.
const roundingBytes = 8

// mapEntryBytes is the cost of a map entry beyond its key's and value's contents: Go's swiss tables hold 8 slots per
// group, with a control word, at a load of up to 7/8.
const mapEntryBytes = 48

func sizeOf[T any]() int64 {
	return int64(reflect.TypeFor[T]().Size()) //nolint:gosec // G115: the types measured are a few hundred bytes
}

func (v *Vector) retainedBytes() int64 {
	n := vectorBytes + lenOf(v.Component, v.Version, v.Digest)
	n += int64(cap(v.Artifacts)) * referencedBytes
	for _, a := range v.Artifacts {
		n += lenOf(a.Ref, a.Component)
		if a.Artifact != nil {
			n += a.Artifact.retainedBytes()
		}
	}
	n += int64(cap(v.refs)) * referenceBytes
	for _, r := range v.refs {
		n += lenOf(r.Name, r.ComponentName, r.Version) + stringMap(r.ExtraIdentity) + digestLen(r.Digest)
	}
	return n + v.signed.RetainedBytes()
}

func (a *Artifact) retainedBytes() int64 {
	n := artifactBytes + lenOf(a.Component, a.Version, a.Digest, a.Source, a.Type)
	n += int64(cap(a.Tasks)) * taskBytes
	for _, t := range a.Tasks {
		n += lenOf(t.Name, t.Type) + int64(cap(t.DependsOn))*stringBytes + lenOf(t.DependsOn...) + int64(cap(t.Spec))
	}
	for _, resources := range [][]Resource{a.Resources, a.manifests} {
		n += int64(cap(resources)) * resourceBytes
		for _, r := range resources {
			n += lenOf(r.Name, r.Type, r.Digest) + int64(cap(r.Access)) + digestLen(r.recorded)
		}
	}
	for algorithms, d := range a.normalised {
		n += mapEntryBytes + lenOf(algorithms.normalisation, algorithms.hash, d.value)
	}
	return n
}

// lenOf counts strings as allocated: their bytes, rounded up to the allocator's size class, 8 bytes more on average
// for the short strings descriptors are made of.
func lenOf(s ...string) int64 {
	var n int64
	for _, x := range s {
		if x != "" {
			n += int64(len(x)) + roundingBytes
		}
	}
	return n
}

func stringMap(m map[string]string) int64 {
	n := int64(len(m)) * (mapEntryBytes + 2*stringBytes)
	for k, v := range m {
		n += lenOf(k, v)
	}
	return n
}

func digestLen(d *spec.Digest) int64 {
	if d == nil {
		return 0
	}
	return digestBytes + lenOf(d.HashAlgorithm, d.NormalisationAlgorithm, d.Value)
}
