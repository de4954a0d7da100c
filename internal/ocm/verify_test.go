package ocm_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"testing"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/signing"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/spec"
)

// signedFixture is a registry holding a signed vector whose artifacts pin OCI charts by digest.
type signedFixture struct {
	reg       *ocmtest.Registry
	key       *rsa.PrivateKey
	artifacts []ocmtest.ComponentVersion
	vector    ocmtest.ComponentVersion
}

func newSignedFixture(t testing.TB) *signedFixture {
	t.Helper()
	f := &signedFixture{reg: ocmtest.NewRegistry(t), key: rsaKey(t)}
	for i, encoding := range []string{spec.MediaTypeDescriptorJSON, spec.MediaTypeDescriptorYAMLTar} {
		a := ocmtest.Artifact("acme.org/artifacts/app"+string(rune('a'+i)), "1.0.0", "cloud.konfidence.flux.helm", true)
		a.DescriptorMediaType = encoding
		a.Resources[1] = f.pushChart(t, "app"+string(rune('a'+i)), "1.0.0", "one")
		f.artifacts = append(f.artifacts, a)
	}
	f.vector = f.signedVector(t, "1.0.0", f.artifacts...)
	// The same vector signed, then stored as OCM v1 stored descriptors: YAML in a tar.
	legacy := f.signedVector(t, "1.0.0-yaml", f.artifacts...)
	legacy.DescriptorMediaType = spec.MediaTypeDescriptorYAMLTar
	f.reg.Push(t, subPath, append(f.artifacts, f.vector, legacy)...)
	return f
}

// pushChart pushes a chart and returns the chart resource pinning its manifest digest.
func (f *signedFixture) pushChart(t testing.TB, name, version, content string) ocmtest.Resource {
	t.Helper()
	chart := ocmtest.Chart{Name: name, Version: version, Files: map[string]string{"values.yaml": "content: " + content + "\n"}}
	res, err := ocmtest.PushPinnedChart(context.Background(), f.reg.Host, "charts", chart)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (f *signedFixture) signedVector(t testing.TB, version string, artifacts ...ocmtest.ComponentVersion) ocmtest.ComponentVersion {
	t.Helper()
	v := ocmtest.Vector(vectorName, version, artifacts...)
	v.Signers = []ocmtest.Signer{{Name: "acme", Key: f.key}}
	return v
}

func (f *signedFixture) policy() ocm.TrustPolicy {
	return ocm.TrustPolicy{Keys: signing.Keys{"acme": {PublicKey: &f.key.PublicKey}}, Signatures: []string{"acme"}}
}

func (f *signedFixture) verify(t testing.TB, client *ocm.Client, version string, policy ocm.TrustPolicy) error {
	t.Helper()
	v, err := client.ResolveVector(context.Background(), f.reg.Ref(subPath, vectorName, version))
	if err != nil {
		t.Fatal(err)
	}
	return client.VerifyVector(context.Background(), v, policy)
}

func TestVerifyVector(t *testing.T) {
	f := newSignedFixture(t)
	client := ocm.NewClient(ocm.Options{})
	for _, version := range []string{"1.0.0", "1.0.0-yaml"} {
		if err := f.verify(t, client, version, f.policy()); err != nil {
			t.Fatalf("signed vector %s: %v", version, err)
		}
	}
	// Verified content is cached by digest: the registry is not asked again.
	before := f.reg.Requests()
	if err := f.verify(t, client, "1.0.0", f.policy()); err != nil || f.reg.Requests() != before {
		t.Fatalf("cached verification: %v, %d requests", err, f.reg.Requests()-before)
	}
	// A reconcile request reads the registry again: once the chart's tag names other content, the vector fails,
	// and keeps failing when the cache is consulted again.
	f.pushChart(t, "appa", "1.0.0", "two")
	for _, ctx := range []context.Context{ocm.BypassCache(context.Background()), context.Background()} {
		v, err := client.ResolveVector(ctx, f.reg.Ref(subPath, vectorName, "1.0.0"))
		if err != nil {
			t.Fatal(err)
		}
		if err := client.VerifyVector(ctx, v, f.policy()); !errors.Is(err, ocm.ErrDigestMismatch) {
			t.Fatalf("after the tag moved: got %v, want DigestMismatch", err)
		}
	}
	// The cache is per policy: another key is checked, and refused.
	other := ocm.TrustPolicy{Keys: signing.Keys{"acme": {PublicKey: &rsaKey(t).PublicKey}}}
	if err := f.verify(t, client, "1.0.0", other); !errors.Is(err, ocm.ErrSignatureInvalid) {
		t.Fatalf("another key: got %v, want SignatureInvalid", err)
	}
	if err := f.verify(t, client, "1.0.0", ocm.TrustPolicy{Keys: f.policy().Keys, Signatures: []string{"release"}}); !errors.Is(err, ocm.ErrSignatureMissing) {
		t.Fatalf("a signature name the vector lacks: got %v, want SignatureMissing", err)
	}
}

func TestVerifyVectorUnsigned(t *testing.T) {
	f := newSignedFixture(t)
	unsigned := ocmtest.Vector(vectorName, "2.0.0", f.artifacts...)
	f.reg.Push(t, subPath, unsigned)
	if err := f.verify(t, ocm.NewClient(ocm.Options{}), "2.0.0", f.policy()); !errors.Is(err, ocm.ErrSignatureMissing) {
		t.Fatalf("got %v, want SignatureMissing", err)
	}
}

// TestVerifyVectorDigests: the vector's signature verifies, but what it pins does not match: refused.
func TestVerifyVectorDigests(t *testing.T) {
	f := newSignedFixture(t)
	t.Run("artifact re-pushed", func(t *testing.T) {
		a := ocmtest.Artifact("acme.org/artifacts/moved", "1.0.0", "cloud.konfidence.flux.helm", true)
		a.Resources[1] = f.pushChart(t, "moved", "1.0.0", "one")
		f.reg.Push(t, subPath, a, f.signedVector(t, "3.0.0", a))
		a.Resources[0] = ocmtest.Artifact(a.Name, a.Version, "cloud.konfidence.flux.helm", false).Resources[0]
		f.reg.Push(t, subPath, a) // same version, other content: the vector's reference digest no longer matches
		if err := f.verify(t, ocm.NewClient(ocm.Options{}), "3.0.0", f.policy()); !errors.Is(err, ocm.ErrDigestMismatch) {
			t.Fatalf("got %v, want DigestMismatch", err)
		}
	})
	t.Run("chart tag moved", func(t *testing.T) {
		a := ocmtest.Artifact("acme.org/artifacts/retagged", "1.0.0", "cloud.konfidence.flux.helm", true)
		a.Resources[1] = f.pushChart(t, "retagged", "1.0.0", "one")
		f.reg.Push(t, subPath, a, f.signedVector(t, "4.0.0", a))
		f.pushChart(t, "retagged", "1.0.0", "two") // the chart's tag now names other content
		if err := f.verify(t, ocm.NewClient(ocm.Options{}), "4.0.0", f.policy()); !errors.Is(err, ocm.ErrDigestMismatch) {
			t.Fatalf("got %v, want DigestMismatch", err)
		}
	})
	t.Run("resource without digest", func(t *testing.T) {
		a := ocmtest.Artifact("acme.org/artifacts/undigested", "1.0.0", "cloud.konfidence.flux.helm", true)
		f.reg.Push(t, subPath, a, f.signedVector(t, "5.0.0", a))
		if err := f.verify(t, ocm.NewClient(ocm.Options{}), "5.0.0", f.policy()); !errors.Is(err, ocm.ErrDigestMismatch) {
			t.Fatalf("got %v, want DigestMismatch", err)
		}
	})
	t.Run("reference without digest", func(t *testing.T) {
		v := f.signedVector(t, "6.0.0", f.artifacts...)
		v.References[0].Digest = nil
		f.reg.Push(t, subPath, v)
		if err := f.verify(t, ocm.NewClient(ocm.Options{}), "6.0.0", f.policy()); !errors.Is(err, ocm.ErrDigestMismatch) {
			t.Fatalf("got %v, want DigestMismatch", err)
		}
	})
}

// BenchmarkVerifyVector measures reading and verifying a signed vector of 2 artifacts (RSA-2048 PSS, v4alpha1):
// cold, with a new client each time (registry reads, normalisation, RSA, the charts' manifest digests); the
// verification alone, of a vector already read (normalisation, RSA, the charts' manifest digests); and cached, with
// the client's caches warm.
func BenchmarkVerifyVector(b *testing.B) {
	f := newSignedFixture(b)
	policy := f.policy()
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			if err := f.verify(b, ocm.NewClient(ocm.Options{}), "1.0.0", policy); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify-only", func(b *testing.B) {
		v, err := ocm.NewClient(ocm.Options{}).ResolveVector(context.Background(), f.reg.Ref(subPath, vectorName, "1.0.0"))
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := ocm.NewClient(ocm.Options{}).VerifyVector(context.Background(), v, policy); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		client := ocm.NewClient(ocm.Options{})
		for b.Loop() {
			if err := f.verify(b, client, "1.0.0", policy); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func rsaKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
