package vectordeployment

import (
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/utils/ptr"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// TestRacingReplicasAgree runs two reconcilers (two managers, no leader election) on the same VectorDeployments,
// which share artifacts whose names collide. The optimistic status writes and the identity lookup must leave
// exactly one ArtifactDeployment per identity, and every counter at the first free salt: a counter bumped from a
// stale read would skip a value.
func TestRacingReplicasAgree(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	var artifacts []ocmtest.ComponentVersion
	for i := range 4 {
		artifacts = append(artifacts, ocmtest.Artifact(fmt.Sprintf("acme.org/artifacts/app%d", i), "1.0.0", helmType, true))
	}
	vector := pushVector(t, reg, "acme.org/vectors/shop", artifacts...)

	// Squat the first two salts of the first artifact and the first salt of the second.
	squatted := map[string]bool{}
	wantCount := map[string]int32{}
	for i, depth := range []int{2, 1, 0, 0} {
		names := saltedNames(t, artifacts[i], "", konfidencev1.MaxCollisionCount)
		for _, n := range names[:depth] {
			if !squatted[n] {
				createSquatter(t, ns, n)
				squatted[n] = true
			}
		}
		wantCount[artifacts[i].Name] = firstFree(names, squatted)
	}

	startManager(t, managerOptions{hashLength: shortHash})
	startManager(t, managerOptions{hashLength: shortHash})
	var vds []*konfidencev1.VectorDeployment
	for i := range 6 {
		vds = append(vds, createVectorDeployment(t, ns, fmt.Sprintf("shop-%d", i), vector))
	}
	for _, vd := range vds {
		vd = waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, "True", "Succeeded")
		for _, a := range artifacts {
			slot := vd.Status.ResultingArtifactDeployments[a.Name]
			want := wantCount[a.Name]
			if got := ptr.Deref(slot.CollisionCount, 0); got != want {
				t.Errorf("%s: %s collision count %d, want %d", vd.Name, a.Name, got, want)
			}
			if wantName := mustName(t, a.Name, a.Version, "", want, shortHash); slot.Name != wantName {
				t.Errorf("%s: %s named %s, want %s", vd.Name, a.Name, slot.Name, wantName)
			}
		}
	}
	ads := listADs(t, ns)
	if got, want := len(ads), len(squatted)+len(artifacts); got != want {
		t.Errorf("%d ArtifactDeployments (%v), want %d squatters and one per artifact", got, keys(ads), want)
	}
	for _, a := range artifacts {
		name := mustName(t, a.Name, a.Version, "", wantCount[a.Name], shortHash)
		if owners := len(ads[name].OwnerReferences); owners != len(vds) {
			t.Errorf("%s has %d owners, want %d", name, owners, len(vds))
		}
	}
}

// TestRestartConverges stops the reconciler in the middle of its work and starts a new one: it must reach the
// same end state as an uninterrupted run, with nothing duplicated.
func TestRestartConverges(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	var artifacts []ocmtest.ComponentVersion
	for i := range 10 {
		artifacts = append(artifacts, ocmtest.Artifact(fmt.Sprintf("acme.org/artifacts/app%d", i), "1.0.0", helmType, i%2 == 0))
	}
	vector := pushVector(t, reg, "acme.org/vectors/shop", artifacts...)
	stop := startManager(t, managerOptions{})
	vd := createVectorDeployment(t, ns, "shop", vector)
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := len(listADs(t, ns)); n == 0 {
			return fmt.Errorf("no ArtifactDeployment yet")
		}
		return nil
	})
	stop()
	startManager(t, managerOptions{})
	vd = waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, "True", "Succeeded")

	ads := listADs(t, ns)
	if len(ads) != len(artifacts) {
		t.Fatalf("%d ArtifactDeployments after restart, want %d: %v", len(ads), len(artifacts), keys(ads))
	}
	for _, a := range artifacts {
		uid := ""
		if i := a.Name[len(a.Name)-1] - '0'; i%2 == 1 {
			uid = string(vd.UID)
		}
		name := mustName(t, a.Name, a.Version, uid, 0, naming.HashLength)
		if ad, ok := ads[name]; !ok || len(ad.OwnerReferences) != 1 {
			t.Errorf("want %s owned once by the VectorDeployment, got %+v", name, ad)
		}
	}
	if conditions.IsStalled(vd) {
		t.Errorf("stalled after restart: %+v", vd.Status.Conditions)
	}
}
