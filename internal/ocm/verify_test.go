package ocm_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

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
	v, err := client.ResolveVector(context.Background(), f.reg.Ref(subPath, vectorName, version), ocm.Read{})
	if err != nil {
		t.Fatal(err)
	}
	return client.VerifyVector(context.Background(), v, policy, ocm.Read{})
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
	ctx := context.Background()
	for _, read := range []ocm.Read{{BypassCache: true}, {}} {
		v, err := client.ResolveVector(ctx, f.reg.Ref(subPath, vectorName, "1.0.0"), read)
		if err != nil {
			t.Fatal(err)
		}
		if err := client.VerifyVector(ctx, v, f.policy(), read); !errors.Is(err, ocm.ErrDigestMismatch) {
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
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.verify(t, client, "1.0.0", ocm.TrustPolicy{Keys: signing.Keys{"acme": {PublicKey: &small.PublicKey}}}); !errors.Is(err, ocm.ErrKeyRejected) {
		t.Fatalf("a 1024-bit key: got %v, want KeyRejected", err)
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
	// A helm access selects its chart by version, which no digest pins: the Flux deployer cannot deploy it by
	// digest, so a verified vector must not carry one.
	t.Run("helm access", func(t *testing.T) {
		a := ocmtest.Artifact("acme.org/artifacts/helmrepo", "1.0.0", "cloud.konfidence.flux.helm", true)
		a.Resources[1] = ocmtest.Resource{Name: "chart", Version: "1.0.0", Type: "helmChart",
			Access: map[string]string{"type": "helm", "helmRepository": "https://charts.example.com", "helmChart": "web:1.0.0"}}.
			WithOCIDigest("sha256:" + strings.Repeat("0", 64))
		f.reg.Push(t, subPath, a, f.signedVector(t, "7.0.0", a))
		if err := f.verify(t, ocm.NewClient(ocm.Options{}), "7.0.0", f.policy()); !errors.Is(err, ocm.ErrDigestMismatch) {
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

// silentHost accepts connections and never answers, as a hostile or broken registry may, and counts them.
type silentHost struct {
	net.Listener
	accepted atomic.Int64
}

func newSilentHost(t testing.TB) *silentHost {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &silentHost{Listener: l}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			h.accepted.Add(1)
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return h
}

// TestVerifyVectorIsBoundedAndAllowListed: a signed vector's chart names a host that accepts connections and never
// answers. With only the vector's registry allowed, verification is refused as RegistryNotAllowed at once and the
// host gets no connection; with the host allowed, verification ends at the client's timeout as
// RegistryUnavailable; and a verification waiting on the host holds its per-host slot, so another one gives up as
// RegistryBusy. Before, verification connected to any host and waited without end.
func TestVerifyVectorIsBoundedAndAllowListed(t *testing.T) {
	f := newSignedFixture(t)
	silent := newSilentHost(t)
	a := ocmtest.Artifact("acme.org/artifacts/silent", "1.0.0", "cloud.konfidence.flux.helm", true)
	a.Resources[1] = ocmtest.ChartResource("1.0.0", "http://"+silent.Addr().String()+"/charts/app:1.0.0").WithOCIDigest(digest.FromString("chart").String())
	f.reg.Push(t, subPath, a, f.signedVector(t, "7.0.0", a))
	ref := f.reg.Ref(subPath, vectorName, "7.0.0")
	ctx := context.Background()
	resolve := func(t *testing.T, c *ocm.Client) *ocm.Vector {
		t.Helper()
		v, err := c.ResolveVector(ctx, ref, ocm.Read{})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	verify := func(c *ocm.Client, v *ocm.Vector) <-chan error {
		done := make(chan error, 1)
		go func() { done <- c.VerifyVector(ctx, v, f.policy(), ocm.Read{}) }()
		return done
	}
	ended := func(t *testing.T, done <-chan error, within time.Duration) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(within):
			t.Fatalf("VerifyVector still blocked after %s", within)
			return nil
		}
	}

	t.Run("host-not-allowed", func(t *testing.T) {
		c := ocm.NewClient(ocm.Options{Timeout: time.Second, AllowedHosts: []string{f.reg.Host}})
		// The client refuses the vector as it resolves it; verification refuses the host on its own too, which a
		// vector resolved by a client without the allow-list shows.
		if _, err := c.ResolveVector(ctx, ref, ocm.Read{}); !errors.Is(err, ocm.ErrRegistryNotAllowed) {
			t.Fatalf("resolving: %v, want RegistryNotAllowed", err)
		}
		v := resolve(t, ocm.NewClient(ocm.Options{Timeout: time.Second}))
		start := time.Now()
		err := ended(t, verify(c, v), 15*time.Second)
		assertError(t, err, ocm.ErrRegistryNotAllowed, true)
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Errorf("refused after %s", took)
		}
		if n := silent.accepted.Load(); n != 0 {
			t.Errorf("the host not allowed got %d connections", n)
		}
	})
	t.Run("allowed-host-never-answers", func(t *testing.T) {
		c := ocm.NewClient(ocm.Options{Timeout: time.Second, AllowedHosts: []string{f.reg.Host, silent.Addr().String()}})
		v := resolve(t, c)
		start := time.Now()
		err := ended(t, verify(c, v), 15*time.Second)
		assertError(t, err, ocm.ErrUnavailable, false)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v does not wrap the deadline", err)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("ended after %s, want the 1s timeout", took)
		}
		if silent.accepted.Load() == 0 {
			t.Error("the allowed host got no connection, so the test proves nothing")
		}
	})
	t.Run("host-slot", func(t *testing.T) {
		c := ocm.NewClient(ocm.Options{Timeout: 4 * time.Second, HostConcurrency: 1, HostWait: 200 * time.Millisecond})
		v := resolve(t, c)
		before := silent.accepted.Load()
		first := verify(c, v)
		for silent.accepted.Load() == before { // the first verification holds the slot once it connects
			time.Sleep(10 * time.Millisecond)
		}
		err := ended(t, verify(c, v), 15*time.Second)
		assertError(t, err, ocm.ErrRegistryBusy, false)
		err = ended(t, first, 15*time.Second)
		assertError(t, err, ocm.ErrUnavailable, false)
	})
}

// TestVerifyVectorReadsResourcesWithCredentials: a signed vector's chart is in a registry behind basic auth. The
// verification reads its digest with the credentials reads of that host present (Read.Credentials), sends them in
// clear only to a host allowed for it, and reports a refused or failed read with its own reason, never as
// DigestMismatch. Before, the check used no credentials and every failure read as DigestMismatch.
func TestVerifyVectorReadsResourcesWithCredentials(t *testing.T) {
	f := newSignedFixture(t)
	ctx := context.Background()
	charts := ocmtest.NewRegistry(t, ocmtest.WithBasicAuth("robot", "s3cr3t-pw"))
	chart, err := charts.PushPinnedChart(ctx, "charts", ocmtest.WebChart("private", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	a := ocmtest.Artifact("acme.org/artifacts/private", "1.0.0", "cloud.konfidence.flux.helm", true)
	a.Resources[1] = chart
	f.reg.Push(t, subPath, a, f.signedVector(t, "8.0.0", a))
	creds := ocm.Credentials{}
	if err := creds.AddDockerConfigJSON(charts.DockerConfigJSON()); err != nil {
		t.Fatal(err)
	}
	withCredentials := ocm.Read{Credentials: creds}
	inClear := []string{charts.Host}

	for _, tc := range []struct {
		name string
		read ocm.Read
		opts ocm.Options
		down bool
		want *ocm.Error // nil: verified
	}{
		{"credentials", withCredentials, ocm.Options{InsecureCredentialHosts: inClear}, false, nil},
		{"credentials-withheld-in-clear", withCredentials, ocm.Options{}, false, ocm.ErrCredentialsRequireTLS},
		{"no-credentials", ocm.Read{}, ocm.Options{InsecureCredentialHosts: inClear}, false, ocm.ErrUnauthorized},
		{"registry-down", withCredentials, ocm.Options{InsecureCredentialHosts: inClear, Timeout: 2 * time.Second}, true, ocm.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ocm.NewClient(tc.opts)
			v, err := c.ResolveVector(ctx, f.reg.Ref(subPath, vectorName, "8.0.0"), tc.read)
			if err != nil {
				t.Fatal(err)
			}
			charts.SetUnavailable(tc.down)
			defer charts.SetUnavailable(false)
			sent := len(charts.Authorizations())
			err = c.VerifyVector(ctx, v, f.policy(), tc.read)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if len(charts.Authorizations()) == sent {
					t.Error("no credentials reached the chart's registry")
				}
				return
			}
			assertError(t, err, tc.want, false)
			if errors.Is(err, ocm.ErrDigestMismatch) {
				t.Errorf("a failed read reported as a digest mismatch: %v", err)
			}
			if tc.want == ocm.ErrCredentialsRequireTLS && len(charts.Authorizations()) != sent {
				t.Error("credentials were sent in clear")
			}
			if strings.Contains(err.Error(), "s3cr3t-pw") {
				t.Errorf("error %q leaks the password", err)
			}
		})
	}
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
		v, err := ocm.NewClient(ocm.Options{}).ResolveVector(context.Background(), f.reg.Ref(subPath, vectorName, "1.0.0"), ocm.Read{})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := ocm.NewClient(ocm.Options{}).VerifyVector(context.Background(), v, policy, ocm.Read{}); err != nil {
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
