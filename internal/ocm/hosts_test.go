package ocm_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

func publishedVector(t *testing.T, reg *ocmtest.Registry) string {
	t.Helper()
	a := ocmtest.Artifact("acme.org/artifacts/a", "1.0.0", "cloud.konfidence.flux.helm", true)
	reg.Push(t, "", a, ocmtest.Vector(vectorName, "1.0.0", a))
	return reg.Ref("", vectorName, "1.0.0")
}

// chartHost is the registry of the chart ocmtest.Artifact's resource names.
const chartHost = "ghcr.io"

// TestAllowedRegistries: with an allow-list, a reference to another registry host is refused before any request
// is sent to it.
func TestAllowedRegistries(t *testing.T) {
	allowed, other := ocmtest.NewRegistry(t), ocmtest.NewRegistry(t)
	allowedRef, otherRef := publishedVector(t, allowed), publishedVector(t, other)
	c := ocm.NewClient(ocm.Options{AllowedHosts: []string{allowed.Host, chartHost}})
	ctx := context.Background()
	if _, err := c.ResolveVector(ctx, allowedRef, ocm.Read{}); err != nil {
		t.Fatal(err)
	}
	before := other.Requests()
	_, err := c.ResolveVector(ctx, otherRef, ocm.Read{})
	assertError(t, err, ocm.ErrRegistryNotAllowed, true)
	if n := other.Requests() - before; n != 0 {
		t.Errorf("the registry not allowed received %d requests", n)
	}
}

// TestHangingRegistryHoldsItsSlotsOnly: a registry that never answers holds HostConcurrency reads; a further read
// of it gives up after HostWait as RegistryBusy, a read of another registry is not held up, and the hanging read
// ends at the client's timeout.
func TestHangingRegistryHoldsItsSlotsOnly(t *testing.T) {
	hanging, healthy := ocmtest.NewRegistry(t), ocmtest.NewRegistry(t)
	hangingRef, healthyRef := publishedVector(t, hanging), publishedVector(t, healthy)
	hanging.SetHanging(true)
	published := hanging.Requests()
	c := ocm.NewClient(ocm.Options{HostConcurrency: 1, HostWait: 100 * time.Millisecond, Timeout: 8 * time.Second})
	ctx := context.Background()

	held := make(chan error, 1)
	go func() {
		_, err := c.ResolveVector(ctx, hangingRef, ocm.Read{})
		held <- err
	}()
	for hanging.Requests() == published { // the first read has its slot once its request arrives
		time.Sleep(10 * time.Millisecond)
	}
	_, err := c.ResolveVector(ctx, hangingRef, ocm.Read{})
	assertError(t, err, ocm.ErrRegistryBusy, false)
	if _, err := c.ResolveVector(ctx, healthyRef, ocm.Read{}); err != nil {
		t.Errorf("the healthy registry: %v", err)
	}
	select {
	case err := <-held:
		t.Fatalf("the hanging read ended early: %v", err)
	default:
	}
	err = <-held
	assertError(t, err, ocm.ErrUnavailable, false)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the hanging read ended with %v, want the client's timeout", err)
	}
}

// TestRedirectsStayInTheAllowList: a registry of an allowed host that redirects the operator's reads to a host the
// allow-list does not name gets RegistryNotAllowed, and the host redirected to receives no request, whether the
// read resolves the vector or, during signature verification, an artifact's chart. A redirect to an allowed host
// (a registry's storage host, listed) is followed. Before, redirects went to any host.
func TestRedirectsStayInTheAllowList(t *testing.T) {
	ctx := context.Background()
	t.Run("resolve", func(t *testing.T) {
		redirecting, target := ocmtest.NewRegistry(t), ocmtest.NewRegistry(t)
		publishedVector(t, target)
		redirecting.RedirectTo(target.Host) // every read of the vector is answered by target
		ref := redirecting.Ref("", vectorName, "1.0.0")
		before := target.Requests()

		refusing := ocm.NewClient(ocm.Options{AllowedHosts: []string{redirecting.Host, chartHost}})
		_, err := refusing.ResolveVector(ctx, ref, ocm.Read{})
		assertError(t, err, ocm.ErrRegistryNotAllowed, true)
		if !strings.Contains(err.Error(), target.Host) {
			t.Errorf("error %q does not name the host redirected to", err)
		}
		if n := target.Requests() - before; n != 0 {
			t.Errorf("the host redirected to, not allowed, received %d requests", n)
		}

		listed := ocm.NewClient(ocm.Options{AllowedHosts: []string{redirecting.Host, target.Host, chartHost}})
		if _, err := listed.ResolveVector(ctx, ref, ocm.Read{}); err != nil {
			t.Fatalf("a redirect to an allowed host: %v", err)
		}
		if target.Requests() == before {
			t.Error("the allowed host redirected to received no request, so the test proves nothing")
		}
	})
	t.Run("verify", func(t *testing.T) {
		f := newSignedFixture(t)
		redirecting, target := ocmtest.NewRegistry(t), ocmtest.NewRegistry(t)
		chart := ocmtest.Chart{Name: "app", Version: "1.0.0", Files: map[string]string{"values.yaml": "content: redirected\n"}}
		pushed, err := ocmtest.PushPinnedChart(ctx, target.Host, "charts", chart)
		if err != nil {
			t.Fatal(err)
		}
		// The artifact names the chart on the redirecting registry, which sends the read to target.
		redirecting.RedirectTo(target.Host)
		access := pushed.Access.(map[string]string)
		a := ocmtest.Artifact("acme.org/artifacts/redirected", "1.0.0", "cloud.konfidence.flux.helm", true)
		a.Resources[1] = ocmtest.ChartResource("1.0.0", strings.Replace(access["imageReference"], target.Host, redirecting.Host, 1))
		a.Resources[1].Digest = pushed.Digest
		f.reg.Push(t, subPath, a, f.signedVector(t, "8.0.0", a))
		before := target.Requests()

		for _, tc := range []struct {
			name    string
			allowed []string
			want    *ocm.Error // nil: verified
		}{
			{name: "host redirected to not allowed", allowed: []string{f.reg.Host, redirecting.Host}, want: ocm.ErrRegistryNotAllowed},
			{name: "host redirected to allowed", allowed: []string{f.reg.Host, redirecting.Host, target.Host}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := ocm.NewClient(ocm.Options{AllowedHosts: tc.allowed})
				v, err := c.ResolveVector(ctx, f.reg.Ref(subPath, vectorName, "8.0.0"), ocm.Read{})
				if err != nil {
					t.Fatal(err)
				}
				err = c.VerifyVector(ctx, v, f.policy(), ocm.Read{})
				if tc.want == nil {
					if err != nil {
						t.Fatalf("a redirect to an allowed host: %v", err)
					}
					if target.Requests() == before {
						t.Error("the allowed host redirected to received no request, so the test proves nothing")
					}
					return
				}
				assertError(t, err, tc.want, true)
				if n := target.Requests() - before; n != 0 {
					t.Errorf("the host redirected to, not allowed, received %d requests", n)
				}
			})
		}
	})
}

// TestArtifactHostsAreAllowListed: with an allow-list, a vector whose artifact has a resource named on a host the
// list does not name (an OCI chart, a Helm repository), cloud metadata addresses included, is refused as a whole
// with RegistryNotAllowed naming the artifact, the resource and the host: the vector's registry being allowed is
// not enough. Nothing connects to the host: a resolve reads only the vector's registry. Before, such a vector
// resolved and was deployed, and source-controller pulled from the host.
func TestArtifactHostsAreAllowListed(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ctx := context.Background()
	for i, tc := range []struct {
		name     string
		resource ocmtest.Resource
		host     string
	}{
		{"oci chart", ocmtest.ChartResource("1.0.0", "169.254.169.254/charts/app:1.0.0"), "169.254.169.254"},
		{"oci chart over http", ocmtest.ChartResource("1.0.0", "http://169.254.169.254:80/charts/app:1.0.0"), "169.254.169.254:80"},
		{"helm repository", ocmtest.Resource{Name: "chart", Version: "1.0.0", Type: "helmChart",
			Access: map[string]string{"type": "helm/v1", "helmRepository": "https://100.100.100.200/charts", "helmChart": "app:1.0.0"}}, "100.100.100.200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := ocmtest.Artifact("acme.org/artifacts/app", "1.0."+strconv.Itoa(i), "cloud.konfidence.flux.helm", true)
			a.Resources[1] = tc.resource
			version := "9.0." + strconv.Itoa(i)
			reg.Push(t, "", a, ocmtest.Vector(vectorName, version, a))
			ref := reg.Ref("", vectorName, version)

			v, err := ocm.NewClient(ocm.Options{AllowedHosts: []string{reg.Host}}).ResolveVector(ctx, ref, ocm.Read{})
			if v != nil {
				t.Error("the vector came back: its other artifacts would be deployed")
			}
			assertError(t, err, ocm.ErrRegistryNotAllowed, true)
			for _, want := range []string{a.Name + ":" + a.Version, "resource chart", tc.host} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
			if _, err := ocm.NewClient(ocm.Options{AllowedHosts: []string{reg.Host, tc.host}}).ResolveVector(ctx, ref, ocm.Read{}); err != nil {
				t.Errorf("with the host allowed: %v", err)
			}
		})
	}
}

// TestNamespaceBoundsReadsAcrossHosts: reads for one namespace (Read.Namespace) hold at most NamespaceConcurrency
// slots whatever hosts they go to: with one registry that never answers held by a read, a read of another hanging
// host for the same namespace gives up after NamespaceWait as NamespaceBusy, without reaching its registry, and a
// read for another namespace is not held up. A read without a namespace is bounded per host only.
func TestNamespaceBoundsReadsAcrossHosts(t *testing.T) {
	first, second, healthy := ocmtest.NewRegistry(t), ocmtest.NewRegistry(t), ocmtest.NewRegistry(t)
	firstRef, secondRef, healthyRef := publishedVector(t, first), publishedVector(t, second), publishedVector(t, healthy)
	first.SetHanging(true)
	second.SetHanging(true)
	published, secondPublished := first.Requests(), second.Requests()
	c := ocm.NewClient(ocm.Options{NamespaceConcurrency: 1, NamespaceWait: 100 * time.Millisecond, Timeout: 4 * time.Second})
	ctx := context.Background()
	tenant := ocm.Read{Namespace: "tenant"}

	held := make(chan error, 1)
	go func() {
		_, err := c.ResolveVector(ctx, firstRef, tenant)
		held <- err
	}()
	for first.Requests() == published { // the first read has its slots once its request arrives
		time.Sleep(10 * time.Millisecond)
	}
	_, err := c.ResolveVector(ctx, secondRef, tenant)
	assertError(t, err, ocm.ErrNamespaceBusy, false)
	if n := second.Requests() - secondPublished; n != 0 {
		t.Errorf("the read over the namespace's bound sent %d requests", n)
	}
	if _, err := c.ResolveVector(ctx, healthyRef, ocm.Read{Namespace: "other"}); err != nil {
		t.Errorf("another namespace's read: %v", err)
	}
	if _, err := c.Versions(ctx, secondRef, tenant); !errors.Is(err, ocm.ErrNamespaceBusy) {
		t.Errorf("listing versions over the namespace's bound: %v, want NamespaceBusy", err)
	}
	assertError(t, <-held, ocm.ErrUnavailable, false)
}

// TestTokenServicesStayInTheAllowList: a registry of an allowed host that names a token service on another host
// in its challenge (WWW-Authenticate: Bearer realm=...) does not get the read sent there unless that host is
// allowed too: the token service not allowed receives no request, and so neither the tenant's credentials; the
// read fails as RegistryNotAllowed naming it. Before, oras fetched a token from whatever host the registry named.
func TestTokenServicesStayInTheAllowList(t *testing.T) {
	ctx := context.Background()
	reg := ocmtest.NewRegistry(t)
	ref := publishedVector(t, reg)
	var tokenRequests atomic.Int64
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		tokenRequests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"token":"issued"}`))
	}))
	t.Cleanup(tokens.Close)
	tokenHost := strings.TrimPrefix(tokens.URL, "http://")
	reg.SetBearerRealm(tokens.URL + "/token")

	refusing := ocm.NewClient(ocm.Options{AllowedHosts: []string{reg.Host, chartHost}})
	_, err := refusing.ResolveVector(ctx, ref, ocm.Read{})
	assertError(t, err, ocm.ErrRegistryNotAllowed, true)
	if !strings.Contains(err.Error(), tokenHost) {
		t.Errorf("error %q does not name the token service's host", err)
	}
	if n := tokenRequests.Load(); n != 0 {
		t.Errorf("the token service not allowed received %d requests", n)
	}

	listed := ocm.NewClient(ocm.Options{AllowedHosts: []string{reg.Host, tokenHost, chartHost}})
	if _, err := listed.ResolveVector(ctx, ref, ocm.Read{}); err != nil {
		t.Fatalf("a token service on an allowed host: %v", err)
	}
	if tokenRequests.Load() == 0 {
		t.Error("the allowed token service received no request, so the test proves nothing")
	}
}
