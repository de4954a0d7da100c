package fluxdeployer

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestApplyWithTheSpecOutOfTheCache: the deployer's cache holds the Flux objects without their spec
// (TrimFluxStatus), yet
//   - a change of a field the deployer set, by another writer, is taken back (the generation it raised tells it);
//   - a deployer that has applied nothing since it started (a restart) finds the objects as desired by reading
//     them from the API server, and writes nothing;
//   - once it has applied them, it tells they are as desired from the cache alone, without a request.
//
// The reconcilers read through one cache with the binary's transform; the test decides when they reconcile.
func TestApplyWithTheSpecOutOfTheCache(t *testing.T) {
	h := testHarness(t)
	ctx := context.Background()
	ns := "spec-out-of-cache"
	h.namespace(t, ns)
	h.configMap(t, ns, nil)
	requests := &testenv.RequestRecorder{}
	cfg := requests.Wrap(h.env.Config)
	informers, err := cache.New(h.env.Config, cache.Options{Scheme: h.env.Scheme, DefaultTransform: TrimFluxStatus})
	if err != nil {
		t.Fatal(err)
	}
	cacheCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go func() { _ = informers.Start(cacheCtx) }()
	viaCache, err := client.New(cfg, client.Options{Scheme: h.env.Scheme, Cache: &client.CacheOptions{Reader: informers}})
	if err != nil {
		t.Fatal(err)
	}
	direct, err := client.New(cfg, client.Options{Scheme: h.env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// started returns a deployer reading through the cache that has applied nothing yet, as after a start.
	started := func() *Reconciler {
		r, _ := h.directVia(ns, viaCache)
		r.apiReader = direct
		return r
	}
	ad := artifactDeployment(ns, "backend-1-2-3-e1mvwibzp5", KustomizeManifestType,
		resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/backend:1.2.3")))
	h.create(t, ad)
	r := started()
	if _, err := h.reconcile(t, r, ad); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: ad.Name}
	cached := waitCached(t, h, informers, key, &kustomizev1.Kustomization{})
	if cached.Spec.Path != "" || cached.Spec.SourceRef.Name != "" || cached.Spec.NameSuffix == "" {
		t.Fatalf("the cache holds the Kustomization's spec %+v, want only its name suffix", cached.Spec)
	}

	// Another writer turns pruning off; the next reconcile turns it on again.
	edited := &kustomizev1.Kustomization{}
	h.get(t, ns, ad.Name, edited)
	if !edited.Spec.Prune {
		t.Fatal("the deployer applied the Kustomization without prune")
	}
	if err := h.env.Client.Patch(ctx, edited, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"prune":false}}`)),
		client.FieldOwner("editor")); err != nil {
		t.Fatal(err)
	}
	waitCached(t, h, informers, key, &kustomizev1.Kustomization{})
	if _, err := h.reconcile(t, r, ad); err != nil {
		t.Fatal(err)
	}
	h.get(t, ns, ad.Name, edited)
	if !edited.Spec.Prune {
		t.Error("another writer's change of prune was not taken back")
	}

	// After a restart, the objects are read from the API server, found as desired and not written.
	waitCached(t, h, informers, key, &kustomizev1.Kustomization{})
	waitCached(t, h, informers, key, &konfidencev1.ArtifactDeployment{})
	restarted := started()
	requests.Take()
	if _, err := h.reconcile(t, restarted, ad); err != nil {
		t.Fatal(err)
	}
	sent := requests.Take()
	if n := testenv.Writes(sent); n != 0 {
		t.Errorf("the first reconcile after a restart wrote %d times: %q", n, sent)
	}
	liveRead := "GET /apis/kustomize.toolkit.fluxcd.io/v1/namespaces/" + ns + "/kustomizations/" + ad.Name
	if !slices.Contains(sent, liveRead) {
		t.Errorf("the first reconcile after a restart did not read the Kustomization from the API server: %q", sent)
	}

	// Its apply now knows the objects from its last apply, and sends nothing.
	last, ok := restarted.applied.get(key)
	if !ok {
		t.Fatal("the reconcile remembered no apply")
	}
	h.get(t, ns, ad.Name, ad)
	objects, _, err := desiredObjects(ad, defaultConfig(), restarted.observe(ctx, ad, false))
	if err != nil {
		t.Fatal(err)
	}
	requests.Take()
	for _, obj := range objects {
		if result, _, err := restarted.apply(ctx, obj, last); err != nil || result != unchanged {
			t.Errorf("apply of %T: %v, %v; want unchanged", obj, result, err)
		}
	}
	if sent := requests.Take(); len(sent) != 0 {
		t.Errorf("applying objects as the last apply left them sent %q, want no request", sent)
	}
}

// waitCached waits until the cache holds key's object of obj's kind at the API server's resourceVersion, and
// returns it as cached.
func waitCached[T client.Object](t *testing.T, h *harness, informers cache.Cache, key types.NamespacedName, obj T) T {
	t.Helper()
	live := obj.DeepCopyObject().(T)
	h.get(t, key.Namespace, key.Name, live)
	testenv.Eventually(t, 30*time.Second, func() error {
		if err := informers.Get(context.Background(), key, obj); err != nil {
			return err
		}
		if obj.GetResourceVersion() != live.GetResourceVersion() {
			return fmt.Errorf("the cache holds %T %s at resourceVersion %s, the API server at %s", obj, key, obj.GetResourceVersion(), live.GetResourceVersion())
		}
		return nil
	})
	return obj
}
