package ocm_test

import (
	"context"
	"errors"
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

// TestAllowedRegistries: with an allow-list, a reference to another registry host is refused before any request
// is sent to it.
func TestAllowedRegistries(t *testing.T) {
	allowed, other := ocmtest.NewRegistry(t), ocmtest.NewRegistry(t)
	allowedRef, otherRef := publishedVector(t, allowed), publishedVector(t, other)
	c := ocm.NewClient(ocm.Options{AllowedHosts: []string{allowed.Host}})
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
