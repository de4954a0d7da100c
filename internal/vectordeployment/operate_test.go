package vectordeployment

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// patchVD applies mutate to the VectorDeployment as a user would (kubectl patch) and returns it as stored.
func patchVD(t *testing.T, vd *konfidencev1.VectorDeployment, mutate func(*konfidencev1.VectorDeployment)) *konfidencev1.VectorDeployment {
	t.Helper()
	vd = getVD(t, vd)
	before := vd.DeepCopy()
	mutate(vd)
	if err := env.Client.Patch(context.Background(), vd, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	return vd
}

func requestReconcile(token string) func(*konfidencev1.VectorDeployment) {
	return func(vd *konfidencev1.VectorDeployment) {
		if vd.Annotations == nil {
			vd.Annotations = map[string]string{}
		}
		vd.Annotations[meta.ReconcileRequestAnnotation] = token
	}
}

// TestProgressCounts: status.artifacts, status.ready and the Artifacts column's ready/artifacts follow the
// ArtifactDeployments' readiness.
func TestProgressCounts(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	db := ocmtest.Artifact("acme.org/artifacts/database", "1.0.0", helmType, false)
	startManager(t, managerOptions{})
	vd := createVectorDeployment(t, ns, "shop", pushVector(t, reg, "acme.org/vectors/shop", app, db))
	vd = waitForCondition(t, vd, konfidencev1.ReadyCondition, metav1.ConditionFalse, meta.ProgressingReason)
	if diff := cmp.Diff(counts{2, 0, "0/2"}, countsOf(vd)); diff != "" {
		t.Errorf("before any is ready (-want +got):\n%s", diff)
	}
	markReady(t, listADs(t, ns)[vd.Status.ResultingArtifactDeployments[app.Name].Name])
	testenv.Eventually(t, 30*time.Second, func() error {
		if got := getVD(t, vd); got.Status.Ready != 1 || got.Status.ReadySummary != "1/2" {
			return fmt.Errorf("one ready: ready %d, summary %q, Ready %q", got.Status.Ready, got.Status.ReadySummary,
				conditions.GetMessage(got, konfidencev1.ReadyCondition))
		}
		return nil
	})
}

// TestSuspendedVectorDeploymentIsLeftAlone: while suspended, a reconcile (a change of one of its
// ArtifactDeployments, a reconcile request) reads no registry and writes nothing, not even the request as
// handled; resuming reconciles it again.
func TestSuspendedVectorDeploymentIsLeftAlone(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	var requests testenv.RequestRecorder
	var reconciles reconcileCounter
	var queue testenv.Queue
	startManager(t, managerOptions{requests: &requests, reconciles: &reconciles, queue: &queue})
	vd := createVectorDeployment(t, ns, "shop", pushVector(t, reg, "acme.org/vectors/shop", app))
	waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, meta.SucceededReason)

	vd = patchVD(t, vd, func(vd *konfidencev1.VectorDeployment) { vd.Spec.Suspend = true })
	settle(t, &requests, &queue, vd)
	registryBefore, reconciled := reg.Requests(), reconciles.of(vd)
	markReady(t, listADs(t, ns)[vd.Status.ResultingArtifactDeployments[app.Name].Name])
	vd = patchVD(t, vd, requestReconcile("suspended"))
	testenv.Eventually(t, 10*time.Second, func() error {
		if reconciles.of(vd) < reconciled+2 {
			return fmt.Errorf("not reconciled twice yet")
		}
		return nil
	})
	if got := namespaceRequests(&requests, ns); testenv.Writes(got) != 0 {
		t.Errorf("a suspended VectorDeployment was written: %q", got)
	}
	if n := reg.Requests() - registryBefore; n != 0 {
		t.Errorf("a suspended VectorDeployment made %d registry requests", n)
	}
	if got := getVD(t, vd); got.ResourceVersion != vd.ResourceVersion || conditions.IsReady(got) {
		t.Errorf("suspended VectorDeployment changed: Ready %+v, lastHandledReconcileAt %q",
			conditions.Get(got, konfidencev1.ReadyCondition), got.Status.LastHandledReconcileAt)
	}

	vd = patchVD(t, vd, func(vd *konfidencev1.VectorDeployment) { vd.Spec.Suspend = false })
	vd = waitForCondition(t, vd, konfidencev1.ReadyCondition, metav1.ConditionTrue, meta.SucceededReason)
	type handled struct {
		ObservedGeneration     int64
		LastHandledReconcileAt string
	}
	if diff := cmp.Diff(handled{vd.Generation, "suspended"}, handled{vd.Status.ObservedGeneration, vd.Status.LastHandledReconcileAt}); diff != "" {
		t.Errorf("resumed (-want +got):\n%s", diff)
	}
}

// TestReconcileRequestRereadsAndRetriesStalled: a reconcile request retries a VectorDeployment stalled on a
// broken artifact, which heals once the artifact is fixed in the registry, and re-reads a converged one from the
// registry instead of the cache; each records the request as handled, in the one status write of its reconcile.
func TestReconcileRequestRereadsAndRetriesStalled(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	broken := app
	broken.Resources = app.Resources[1:] // no artifact manifest: a permanent failure
	var requests testenv.RequestRecorder
	var reconciles reconcileCounter
	var queue testenv.Queue
	// Every request reads around the cache here; TestReconcileRequestsWithinTheBoundRevalidate has the bound.
	startManager(t, managerOptions{requests: &requests, reconciles: &reconciles, queue: &queue, bypassInterval: time.Nanosecond})
	vd := createVectorDeployment(t, ns, "shop", pushVector(t, reg, "acme.org/vectors/shop", broken))
	waitForCondition(t, vd, konfidencev1.StalledCondition, metav1.ConditionTrue, string(ocm.ReasonManifestMissing))

	reg.Push(t, "", app) // the same version, fixed: nothing tells the operator
	vd = patchVD(t, vd, requestReconcile("retry"))
	vd = waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, meta.SucceededReason)
	type retried struct {
		Stalled                bool
		LastHandledReconcileAt string
	}
	if diff := cmp.Diff(retried{false, "retry"}, retried{conditions.IsStalled(vd), vd.Status.LastHandledReconcileAt}); diff != "" {
		t.Errorf("after the request (-want +got):\n%s", diff)
	}
	markReady(t, listADs(t, ns)[vd.Status.ResultingArtifactDeployments[app.Name].Name])
	waitForCondition(t, vd, konfidencev1.ReadyCondition, metav1.ConditionTrue, meta.SucceededReason)
	settle(t, &requests, &queue, vd)

	registryBefore, reconciled := reg.Requests(), reconciles.of(vd)
	requests.Take()
	vd = patchVD(t, vd, requestReconcile("reread"))
	testenv.Eventually(t, 30*time.Second, func() error {
		if got := getVD(t, vd); got.Status.LastHandledReconcileAt != "reread" {
			return fmt.Errorf("lastHandledReconcileAt %q", got.Status.LastHandledReconcileAt)
		}
		if reconciles.of(vd) == reconciled {
			return fmt.Errorf("the reconcile that handled the request has not ended")
		}
		return nil
	})
	// The vector (manifest, config, descriptor) and its artifact, at least, were read again.
	if n := reg.Requests() - registryBefore; n < 6 {
		t.Errorf("a reconcile request made %d registry requests, want the vector and its artifact re-read", n)
	}
	// The user's patch went through env.Client, not the recorded manager: what is counted is the reconciler's.
	if got := namespaceRequests(&requests, ns); testenv.Writes(got) != 1 {
		t.Errorf("a reconcile request made %d writes, want 1 (the status): %q", testenv.Writes(got), got)
	}
}

// TestFailedRereadIsRetriedFromTheRegistry: a reconcile request whose re-read finds the registry unavailable makes
// the VectorDeployment not Ready with RegistryUnavailable, and its retries read the registry again rather than
// answer from the cache (which would turn it Ready again in the middle of the outage); once the registry answers,
// a retry makes it Ready, without a new request.
func TestFailedRereadIsRetriedFromTheRegistry(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	startManager(t, managerOptions{})
	vd := createVectorDeployment(t, ns, "shop", pushVector(t, reg, "acme.org/vectors/shop", app))
	vd = waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, meta.SucceededReason)
	markReady(t, listADs(t, ns)[vd.Status.ResultingArtifactDeployments[app.Name].Name])
	waitForCondition(t, vd, konfidencev1.ReadyCondition, metav1.ConditionTrue, meta.SucceededReason)

	reg.SetUnavailable(true)
	vd = patchVD(t, vd, requestReconcile("outage"))
	vd = waitForCondition(t, vd, konfidencev1.ReadyCondition, metav1.ConditionFalse, string(ocm.ReasonUnavailable))
	failedAt := reg.Requests()
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := reg.Requests() - failedAt; n < 3 {
			return fmt.Errorf("%d registry requests since the re-read failed, want its retries to read the registry", n)
		}
		return nil
	})
	if got := getVD(t, vd); conditions.GetReason(got, konfidencev1.ReadyCondition) != string(ocm.ReasonUnavailable) {
		t.Errorf("Ready during the outage: %+v, want %s", conditions.Get(got, konfidencev1.ReadyCondition), ocm.ReasonUnavailable)
	}
	reg.SetUnavailable(false)
	vd = waitForCondition(t, vd, konfidencev1.ReadyCondition, metav1.ConditionTrue, meta.SucceededReason)
	if vd.Status.LastHandledReconcileAt != "outage" {
		t.Errorf("lastHandledReconcileAt %q, want the request's", vd.Status.LastHandledReconcileAt)
	}
}

// TestRequeueDependencyWhileWaiting: a VectorDeployment whose ArtifactDeployments are not ready is reconciled again
// every --requeue-dependency without any event; once they are ready it is left to the watches.
func TestRequeueDependencyWhileWaiting(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	var reconciles reconcileCounter // of this VectorDeployment alone: the manager also retries earlier tests' ones
	var queue testenv.Queue
	startManager(t, managerOptions{requeueDependency: 200 * time.Millisecond, reconciles: &reconciles, queue: &queue})
	vd := createVectorDeployment(t, ns, "shop", pushVector(t, reg, "acme.org/vectors/shop", app))
	vd = waitForCondition(t, vd, konfidencev1.ReadyCondition, metav1.ConditionFalse, meta.ProgressingReason)

	// A rate, so a window of time is what is asserted: nothing but the requeue reconciles a waiting
	// VectorDeployment (none of its objects changes), five times in a second at 200ms.
	waiting := reconciles.of(vd)
	time.Sleep(time.Second)
	if n := reconciles.of(vd) - waiting; n < 3 {
		t.Errorf("%v reconciles in 1s while waiting, want one every 200ms", n)
	}

	markReady(t, listADs(t, ns)[vd.Status.ResultingArtifactDeployments[app.Name].Name])
	waitForCondition(t, vd, konfidencev1.ReadyCondition, metav1.ConditionTrue, meta.SucceededReason)
	// No reconcile scheduled any more: a requeue would keep it queued or due for good.
	waitIdle(t, &queue, vd)
}

// TestReconcileRequestsWithinTheBoundRevalidate: five reconcile requests in a row of a VectorDeployment of 32
// artifacts. The first reads the vector and every artifact around the cache; each later one, within
// MinBypassInterval, costs one registry request (the vector's tag resolved again) and is recorded as handled all the
// same. A vector pushed again under its version is still noticed by a request within the interval: it is read
// again, and of its artifacts only the new one. Before the bound, every request cost what the first did (131
// requests), as fast as a tenant could annotate the object.
func TestReconcileRequestsWithinTheBoundRevalidate(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	var artifacts []ocmtest.ComponentVersion
	for i := range 32 {
		artifacts = append(artifacts, ocmtest.Artifact(fmt.Sprintf("acme.org/artifacts/a%d", i), "1.0.0", helmType, true))
	}
	startManager(t, managerOptions{})
	vd := createVectorDeployment(t, ns, "shop", pushVector(t, reg, "acme.org/vectors/shop", artifacts...))
	waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, meta.SucceededReason)

	// request asks for a reconcile and returns the registry requests made until it is recorded as handled, which
	// the status write at the end of its reconcile does.
	request := func(token string) int64 {
		t.Helper()
		before := reg.Requests()
		patchVD(t, vd, requestReconcile(token))
		testenv.Eventually(t, 30*time.Second, func() error {
			if got := getVD(t, vd).Status.LastHandledReconcileAt; got != token {
				return fmt.Errorf("lastHandledReconcileAt %q, want %q", got, token)
			}
			return nil
		})
		return reg.Requests() - before
	}
	first := request("first")
	if first < 1+4*32 {
		t.Errorf("the first reconcile request made %d registry requests, want the vector and its 32 artifacts read again", first)
	}
	var again []int64
	for i := range 4 {
		n := request(fmt.Sprintf("again-%d", i))
		if n > 1 {
			t.Errorf("reconcile request %d within the bound made %d registry requests, want at most 1 (the vector's tag)", i+2, n)
		}
		again = append(again, n)
	}
	t.Logf("registry requests of five reconcile requests: %d, then %v", first, again)

	// The same version pushed again with one more artifact: the tag has moved.
	more := append(artifacts, ocmtest.Artifact("acme.org/artifacts/a32", "1.0.0", helmType, true))
	pushVector(t, reg, "acme.org/vectors/shop", more...)
	// The tag, the vector read (manifest, config, descriptor), and the new artifact (manifest, config, descriptor,
	// artifact manifest).
	moved := request("moved")
	if moved > 1+3+4 {
		t.Errorf("a reconcile request after the vector moved made %d registry requests, want the vector and the new artifact read, no more", moved)
	}
	t.Logf("registry requests of a reconcile request after the vector moved: %d", moved)
	if got := getVD(t, vd).Status.Artifacts; got != 33 {
		t.Errorf("status.artifacts %d after the vector moved, want 33", got)
	}
}
