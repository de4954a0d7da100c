package vectordeployment

import (
	"context"
	"fmt"
	"testing"
	"time"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestAdoptsKonfidenceArtifactDeploymentsByAnnotations: ArtifactDeployments Konfidence created carry its names and
// the konfidence.cloud/* annotations but no identity label. The reconciler adopts those of its identities under
// their names, labels them, and records the names in status; one of another identity (the same component at
// another version, as left by an older vector) is neither adopted nor touched.
func TestAdoptsKonfidenceArtifactDeploymentsByAnnotations(t *testing.T) {
	ctx := context.Background()
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	shared := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.3", helmType, true)
	private := ocmtest.Artifact("acme.org/artifacts/database", "2.0.0", helmType, false)
	older := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.2", helmType, true)
	vector := pushVector(t, reg, "acme.org/vectors/shop", shared, private)
	vd := createVectorDeployment(t, ns, "shop", vector)

	v, err := ocm.NewClient(ocm.Options{}).ResolveVector(ctx, vector, ocm.Read{})
	if err != nil {
		t.Fatal(err)
	}
	konfidence := map[string]string{} // component → name
	for i, ra := range ArtifactsOf(v) {
		name := fmt.Sprintf("%s-konfidence-%d", ra.Artifact.Manifest.Type[len("cloud.konfidence.flux."):], i)
		createKonfidenceStyle(t, vd, ra.Artifact, name)
		konfidence[ra.Artifact.Component] = name
	}
	olderArtifact := Artifact{Component: older.Name, Version: older.Version, Manifest: konfidencev1.ArtifactManifest{Type: helmType, AllowReuse: true}}
	createKonfidenceStyle(t, vd, olderArtifact, "frontend-older")

	startManager(t, managerOptions{})
	testenv.Eventually(t, 30*time.Second, func() error {
		got := getVD(t, vd)
		for component, name := range konfidence {
			if got.Status.ResultingArtifactDeployments[component].Name != name {
				return fmt.Errorf("status %+v, want %s for %s", got.Status.ResultingArtifactDeployments, name, component)
			}
		}
		return nil
	})
	ads := listADs(t, ns)
	if len(ads) != 3 {
		t.Fatalf("ArtifactDeployments %v: a second deployment of an adopted artifact was created", keys(ads))
	}
	for component, name := range konfidence {
		id := identityOfObject(ads[name])
		if ads[name].Labels[konfidencev1.ArtifactIdentityLabel] != id.label() || !IsOwnedBy(ads[name], vd) {
			t.Errorf("%s (%s): labels %v, owners %+v", name, component, ads[name].Labels, ads[name].OwnerReferences)
		}
	}
	if l := ads["frontend-older"].Labels; len(l) != 0 {
		t.Errorf("the ArtifactDeployment of another version was touched: labels %v", l)
	}
	for _, name := range konfidence {
		waitForEvent(t, ns, vd.Name, "ArtifactDeploymentAdopted", name)
	}
}

// createKonfidenceStyle creates the ArtifactDeployment of a as Konfidence would: this reconciler's spec and owner,
// under another name, with the annotations and without the identity label.
func createKonfidenceStyle(t *testing.T, vd *konfidencev1.VectorDeployment, a Artifact, name string) {
	t.Helper()
	ad, err := DesiredArtifactDeployment(env.Scheme, vd, a, 0)
	if err != nil {
		t.Fatal(err)
	}
	ad.Name, ad.Labels, ad.OwnerReferences = name, nil, nil
	if err := env.Client.Create(context.Background(), ad); err != nil {
		t.Fatal(err)
	}
}
