package vectordeployment

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestSteadyStateResyncWritesNothing: once a VectorDeployment has converged, a reconcile (here triggered by a
// change to one of its ArtifactDeployments that does not affect the VectorDeployment's status) makes no write to the API server and no
// request to the registry.
func TestSteadyStateResyncWritesNothing(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	private := ocmtest.Artifact("acme.org/artifacts/database", "1.0.0", helmType, false)
	vector := pushVector(t, reg, "acme.org/vectors/shop", app, private)
	var requests testenv.RequestRecorder
	var reconciles reconcileCounter
	var queue testenv.Queue
	startManager(t, managerOptions{requests: &requests, reconciles: &reconciles, queue: &queue})
	vd := createVectorDeployment(t, ns, "shop", vector)
	waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, "Succeeded")
	for _, ad := range listADs(t, ns) {
		markReady(t, ad)
	}
	vd = waitForCondition(t, vd, konfidencev1.ReadyCondition, metav1.ConditionTrue, "Succeeded")
	settle(t, &requests, &queue, vd)
	vd = getVD(t, vd)
	registryBefore, reconciled := reg.Requests(), reconciles.of(vd)
	ad := listADs(t, ns)[vd.Status.ResultingArtifactDeployments[app.Name].Name]
	// A new message on its Ready condition, still True: the watch requeues the VectorDeployment (a label alone
	// would not), whose reconcile finds nothing to change.
	conditions.MarkTrue(ad, konfidencev1.ReadyCondition, "Succeeded", "deployed again")
	if err := env.Client.Status().Update(context.Background(), ad); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if reconciles.of(vd) == reconciled {
			return fmt.Errorf("no reconcile has ended yet")
		}
		return nil
	})
	got := namespaceRequests(&requests, ns)
	if testenv.Writes(got) != 0 {
		t.Errorf("a steady-state reconcile made %d writes: %q", testenv.Writes(got), got)
	}
	if got := reg.Requests() - registryBefore; got != 0 {
		t.Errorf("a steady-state reconcile made %d registry requests", got)
	}
	if after := getVD(t, vd); after.ResourceVersion != vd.ResourceVersion {
		t.Errorf("the VectorDeployment changed: resourceVersion %s → %s", vd.ResourceVersion, after.ResourceVersion)
	}
}

// settle waits until the reconciler has processed every request it was given for vd (nothing queued, in progress
// or scheduled) and drops the requests recorded until then.
func settle(t *testing.T, requests *testenv.RequestRecorder, queue *testenv.Queue, vd *konfidencev1.VectorDeployment) {
	t.Helper()
	waitIdle(t, queue, vd)
	requests.Take()
}

// waitIdle waits until the reconciler has nothing queued, in progress or scheduled for vd: from then on it does
// nothing more for vd until something changes.
func waitIdle(t *testing.T, queue *testenv.Queue, vd *konfidencev1.VectorDeployment) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		if !queue.Idle(client.ObjectKeyFromObject(vd)) {
			return fmt.Errorf("%s is still queued, being reconciled or due to be", vd.Name)
		}
		return nil
	})
}

// namespaceRequests takes the recorded requests that concern namespace ns: event broadcasts of earlier tests'
// objects may still be under way.
func namespaceRequests(requests *testenv.RequestRecorder, ns string) []string {
	var got []string
	for _, req := range requests.Take() {
		if strings.Contains(req, "/namespaces/"+ns+"/") {
			got = append(got, req)
		}
	}
	return got
}
