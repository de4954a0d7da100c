package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// BenchmarkWriteCosts measures what each kind of write the operator makes costs the API server, for 1,000
// artifacts: floorWorkers client workers send one kind at a time, which saturates the machine's cores, so the time
// per request is its cost in machine time. The kinds: the ArtifactDeployment create (the floor's and the
// operator's), the merge patch that adds the teardown finalizer, the merge patch of its status as the Flux
// deployer writes it, the plain create of its two Flux objects (the floor's) and their server-side apply (the
// operator's). Run with -benchtime=1x.
func BenchmarkWriteCosts(b *testing.B) {
	l := landscape{100, 10, 10}
	env := testenv.Start(b, controlplane.FluxCRDDirs()...)
	vectors := l.publish(b, ocmtest.NewRegistry(b))
	ctx := context.Background()
	for b.Loop() {
		ns := namespace(b, env, "writes-")
		perRequest := func(unit string, requests int, write func() error) {
			start := time.Now()
			if err := write(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/float64(requests), unit)
		}
		perRequest("create-ad-µs", l.total(), func() error { return createLandscape(ctx, env.Client, ns, l, vectors) })
		ads := &konfidencev1.ArtifactDeploymentList{}
		if err := env.Client.List(ctx, ads, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		perRequest("finalizer-patch-µs", l.total(), func() error {
			return inParallel(len(ads.Items), func(i int) error {
				return env.Client.Patch(ctx, &ads.Items[i], client.RawPatch("application/merge-patch+json",
					fmt.Appendf(nil, `{"metadata":{"finalizers":[%q]}}`, konfidencev1.TeardownFinalizer)))
			})
		})
		perRequest("status-patch-µs", l.total(), func() error {
			return inParallel(len(ads.Items), func(i int) error {
				ad := &ads.Items[i]
				original := ad.DeepCopy()
				ad.Status.ObservedGeneration = ad.Generation
				for _, t := range []string{meta.ReadyCondition, meta.ReconcilingCondition, konfidencev1.ArtifactFetchedCondition,
					konfidencev1.ArtifactDeployedCondition, konfidencev1.AppHealthyCondition} {
					ad.Status.Conditions = append(ad.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionUnknown,
						Reason: meta.ProgressingReason, Message: "waiting for HelmRelease " + ad.Name + " to reconcile generation 1",
						ObservedGeneration: 1, LastTransitionTime: metav1.Now()})
				}
				return env.Client.Status().Patch(ctx, ad, client.MergeFrom(original))
			})
		})
		perRequest("create-flux-µs", 2*l.total(), func() error {
			return inParallel(len(ads.Items), func(i int) error { return writeFluxObjects(ctx, env.Client, &ads.Items[i], "", false) })
		})
		applyNS := namespace(b, env, "writes-apply-")
		perRequest("apply-flux-µs", 2*l.total(), func() error {
			return inParallel(len(ads.Items), func(i int) error { return writeFluxObjects(ctx, env.Client, &ads.Items[i], applyNS, true) })
		})
		deleteAll(b, env, ns)
		deleteAll(b, env, applyNS)
	}
}

// inParallel calls write for 0 to n-1 from floorWorkers workers and returns the first error.
func inParallel(n int, write func(i int) error) error {
	jobs := make(chan int)
	errs := make(chan error, floorWorkers)
	var wg sync.WaitGroup
	for range floorWorkers {
		wg.Go(func() {
			for i := range jobs {
				if err := write(i); err != nil {
					errs <- err
					for range jobs { // drained, so that the sender never waits on workers that stopped
					}
					return
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	return <-errs
}

// writeFluxObjects writes the Flux objects of ad, in namespace when it is not empty: by plain create as the floor
// does, or by server-side apply as the Flux deployer does.
func writeFluxObjects(ctx context.Context, c client.Client, ad *konfidencev1.ArtifactDeployment, namespace string, apply bool) error {
	for _, obj := range fluxObjects(ad) {
		if namespace != "" {
			obj.SetNamespace(namespace)
		}
		if !apply {
			if err := c.Create(ctx, obj); err != nil {
				return err
			}
			continue
		}
		gvk, err := c.GroupVersionKindFor(obj)
		if err != nil {
			return err
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(gvk)
		delete(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("bench"), client.ForceOwnership); err != nil {
			return err
		}
	}
	return nil
}
