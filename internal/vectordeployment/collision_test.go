package vectordeployment

import (
	"context"
	"fmt"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// shortHash makes collisions happen on their own: 36*36 names per component and version.
const shortHash = 2

// createSquatter occupies a name with an ArtifactDeployment of another identity.
func createSquatter(t testing.TB, namespace, name string) *konfidencev1.ArtifactDeployment {
	t.Helper()
	ad := &konfidencev1.ArtifactDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: map[string]string{
			konfidencev1.ArtifactComponentAnnotation: "acme.org/artifacts/squatter",
			konfidencev1.ArtifactVersionAnnotation:   "9.9.9",
			konfidencev1.AllowReuseAnnotation:        "true",
		}},
		Spec: konfidencev1.ArtifactDeploymentSpec{
			Manifest:  konfidencev1.ArtifactManifest{Type: helmType, AllowReuse: true},
			Component: konfidencev1.Component{Name: "acme.org/artifacts/squatter", Version: "9.9.9"},
		},
	}
	if err := env.Client.Create(context.Background(), ad); err != nil {
		t.Fatal(err)
	}
	return ad
}

// saltedNames returns the names of an identity for collision counts 0..n.
func saltedNames(t testing.TB, cv ocmtest.ComponentVersion, uid string, n int32) []string {
	var names []string
	for count := int32(0); count <= n; count++ {
		names = append(names, mustName(t, cv.Name, cv.Version, uid, count, shortHash))
	}
	return names
}

// firstFree returns the first collision count whose name no squatter holds.
func firstFree(names []string, squatted map[string]bool) int32 {
	for i, n := range names {
		if !squatted[n] {
			return int32(i)
		}
	}
	return -1
}

func TestCollisionIsRecoveredWithAPersistedCounter(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	vector := pushVector(t, reg, "acme.org/vectors/shop", app)
	names := saltedNames(t, app, "", konfidencev1.MaxCollisionCount)
	createSquatter(t, ns, names[0])
	want := firstFree(names, map[string]bool{names[0]: true})

	collisionsBefore := testutil.ToFloat64(collisionsRecovered)
	startManager(t, managerOptions{hashLength: shortHash})
	vd := createVectorDeployment(t, ns, "shop", vector)
	vd = waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, "Succeeded")
	if got := testutil.ToFloat64(collisionsRecovered) - collisionsBefore; got != float64(want) {
		t.Errorf("the collision counter rose by %v, want %d", got, want)
	}

	msg := waitForEvent(t, ns, vd.Name, konfidencev1.ArtifactDeploymentHashCollisionReason, names[0], app.Name, "acme.org/artifacts/squatter")
	t.Logf("event: %s", msg)
	slot := vd.Status.ResultingArtifactDeployments[app.Name]
	if slot.Name != names[want] || ptr.Deref(slot.CollisionCount, 0) != want {
		t.Fatalf("slot = {%s, %v}, want {%s, %d}", slot.Name, ptr.Deref(slot.CollisionCount, -1), names[want], want)
	}
	ad := listADs(t, ns)[names[want]]
	if ad == nil || ad.Annotations[konfidencev1.CollisionCountAnnotation] != fmt.Sprint(want) {
		t.Fatalf("no ArtifactDeployment %s with collision count %d: %+v", names[want], want, ad)
	}
	if got := len(listADs(t, ns)); got != 2 {
		t.Errorf("%d ArtifactDeployments, want the squatter and one more", got)
	}
}

func TestCollisionLimitStopsLoudly(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	other := ocmtest.Artifact("acme.org/artifacts/other", "1.0.0", helmType, true)
	vector := pushVector(t, reg, "acme.org/vectors/shop", app, other)
	squatted := map[string]bool{}
	for _, n := range saltedNames(t, app, "", konfidencev1.MaxCollisionCount) {
		if !squatted[n] {
			createSquatter(t, ns, n)
			squatted[n] = true
		}
	}

	limitsBefore := testutil.ToFloat64(collisionsLimitExceeded)
	var queue testenv.Queue
	startManager(t, managerOptions{hashLength: shortHash, queue: &queue})
	vd := createVectorDeployment(t, ns, "shop", vector)
	vd = waitForCondition(t, vd, konfidencev1.StalledCondition, metav1.ConditionTrue, konfidencev1.HashCollisionLimitExceededReason)
	if conditions.IsReady(vd) || conditions.GetReason(vd, konfidencev1.ReadyCondition) != konfidencev1.HashCollisionLimitExceededReason {
		t.Errorf("Ready = %+v", conditions.Get(vd, konfidencev1.ReadyCondition))
	}
	if got := ptr.Deref(vd.Status.ResultingArtifactDeployments[app.Name].CollisionCount, 0); got != konfidencev1.MaxCollisionCount {
		t.Errorf("collision count %d, want it to stop at %d", got, konfidencev1.MaxCollisionCount)
	}
	waitForEvent(t, ns, vd.Name, konfidencev1.HashCollisionLimitExceededReason, app.Name)
	if got := testutil.ToFloat64(collisionsLimitExceeded) - limitsBefore; got != 1 {
		t.Errorf("the limit_exceeded counter rose by %v, want 1", got)
	}
	// The slot given up on counts as failed, the other artifact as on its way (nothing marks it Ready here).
	expectArtifacts(t, vd, artifactCounts{notReady: 1, failed: 1})
	// The other artifact is deployed all the same.
	if _, ok := listADs(t, ns)[mustName(t, other.Name, other.Version, "", 0, shortHash)]; !ok {
		t.Errorf("the artifact without a collision was not deployed")
	}
	// And the counter stays put: once the reconciler has nothing left to do for the VectorDeployment (no requeue
	// of a stalled one), nothing bumps it further.
	waitIdle(t, &queue, vd)
	if got := ptr.Deref(getVD(t, vd).Status.ResultingArtifactDeployments[app.Name].CollisionCount, 0); got != konfidencev1.MaxCollisionCount {
		t.Errorf("collision count moved on to %d", got)
	}
}

// TestReusableArtifactIsNotDeployedTwiceAfterSquatterLeaves: an interleaving the collision counter alone does not
// settle. A reusable artifact is deployed under a salted name because a squatter holds its unsalted one; the squatter goes away;
// another VectorDeployment of the same artifact must adopt the salted deployment, not create a second one under
// the now free unsalted name.
func TestReusableArtifactIsNotDeployedTwiceAfterSquatterLeaves(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	vector := pushVector(t, reg, "acme.org/vectors/shop", app)
	names := saltedNames(t, app, "", konfidencev1.MaxCollisionCount)
	squatter := createSquatter(t, ns, names[0])
	salted := names[firstFree(names, map[string]bool{names[0]: true})]

	startManager(t, managerOptions{hashLength: shortHash})
	first := createVectorDeployment(t, ns, "first", vector)
	waitForCondition(t, first, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, "Succeeded")
	if err := env.Client.Delete(context.Background(), squatter); err != nil {
		t.Fatal(err)
	}

	second := createVectorDeployment(t, ns, "second", vector)
	second = waitForCondition(t, second, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, "Succeeded")
	if got := second.Status.ResultingArtifactDeployments[app.Name].Name; got != salted {
		t.Errorf("second VectorDeployment uses %s, want the existing %s", got, salted)
	}
	ads := listADs(t, ns)
	if _, dup := ads[names[0]]; dup || len(ads) != 1 {
		t.Fatalf("ArtifactDeployments %v: want only %s", keys(ads), salted)
	}
	if owners := ads[salted].OwnerReferences; len(owners) != 2 {
		t.Errorf("%s has owners %+v, want both VectorDeployments", salted, owners)
	}
}
