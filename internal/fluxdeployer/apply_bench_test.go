package fluxdeployer

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// BenchmarkSteadyStateApply measures the hot path of apply: the Flux objects of an ArtifactDeployment are in the
// cluster as desired, as on every resync and every status event of a Flux object. It compares the deployer's apply
// with fluxcd/pkg/ssa's ResourceManager.Apply (what Flux itself applies with) on the same objects and a
// cache-backed client like the manager's, and reports the API requests each costs per object.
func BenchmarkSteadyStateApply(b *testing.B) {
	env := testHarness(b).env
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	counter := &testenv.RequestRecorder{}
	cfg := counter.Wrap(env.Config)
	informers, err := cache.New(cfg, cache.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = informers.Start(ctx) }()
	cached, err := client.New(cfg, client.Options{Scheme: env.Scheme, Cache: &client.CacheOptions{Reader: informers}})
	if err != nil {
		b.Fatal(err)
	}
	direct, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	schemas, err := newSpecSchemas(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	r := &Reconciler{client: cached, apiReader: direct, secrets: newPresence(direct, "Secret"), scheme: env.Scheme, schemas: schemas}

	const ns = "bench"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	var objects []client.Object
	for _, ad := range []*konfidencev1.ArtifactDeployment{
		artifactDeployment(ns, "frontend-1-2-3-e1mvwibzp5", HelmManifestType,
			resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3"))),
		artifactDeployment(ns, "config-0-4-0-s8kqlvwffn", KustomizeManifestType,
			resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/config:0.4.0"))),
	} {
		if err := env.Client.Create(ctx, ad); err != nil {
			b.Fatal(err)
		}
		built, _, err := desiredObjects(ad, defaultConfig(), r.observe(ctx, ad, false))
		if err != nil {
			b.Fatal(err)
		}
		objects = append(objects, built...)
	}
	desired := make([]*unstructured.Unstructured, len(objects))
	var previous lastApply // what the reconcile records of the apply, and the next one's apply is given
	for i, obj := range objects {
		_, live, err := r.apply(ctx, obj, previous)
		if err != nil {
			b.Fatal(err)
		}
		o, err := appliedObjectOf(live)
		if err != nil {
			b.Fatal(err)
		}
		previous.objects = append(previous.objects, o)
		if desired[i], err = applyConfiguration(obj); err != nil {
			b.Fatal(err)
		}
	}
	// Wait until the cache holds what was created.
	testenv.Eventually(b, 30*time.Second, func() error {
		for _, obj := range objects {
			if err := cached.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)); err != nil {
				return err
			}
		}
		return nil
	})

	perObject := func(b *testing.B, apply func(i int) bool) {
		counter.Take()
		n := 0
		for b.Loop() {
			for i := range objects {
				if !apply(i) {
					b.Fatalf("%s %s was not found unchanged", objects[i].GetObjectKind().GroupVersionKind().Kind, objects[i].GetName())
				}
			}
			n++
		}
		requests, applies := counter.Take(), float64(n*len(objects))
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/applies, "ns/object")
		b.ReportMetric(float64(len(requests))/applies, "requests/object")
		b.ReportMetric(float64(testenv.Writes(requests))/applies, "writes/object") // a dry-run apply counts
	}
	b.Run("fluxdeployer", func(b *testing.B) {
		perObject(b, func(i int) bool {
			outcome, _, err := r.apply(ctx, objects[i], previous)
			return err == nil && outcome == unchanged
		})
	})
	b.Run("fluxcd-pkg-ssa", func(b *testing.B) {
		manager := ssa.NewResourceManager(cached, nil, ssa.Owner{Field: FieldManager, Group: konfidencev1.GroupVersion.Group})
		perObject(b, func(i int) bool {
			entry, err := manager.Apply(ctx, desired[i].DeepCopy(), ssa.DefaultApplyOptions())
			return err == nil && entry.Action == ssa.UnchangedAction
		})
	})
}
