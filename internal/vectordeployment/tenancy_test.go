package vectordeployment

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// TestDescriptorVersionMustMatchReference: shop:2.0.0 references frontend:2.0.0, whose
// descriptor says 1.2.3+build.5. It fails alone as DescriptorMismatch, with an event, instead of being deployed
// under the name of the real frontend:1.2.3+build.5.
func TestDescriptorVersionMustMatchReference(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	good := ocmtest.Artifact("acme.org/artifacts/good", "1.0.0", helmType, true)
	impostor := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.3+build.5", helmType, true)
	impostor.Tag = "2.0.0"
	vector := pushVector(t, reg, "acme.org/vectors/shop", good, impostor)
	vd, ns := deployRefused(t, vector, konfidencev1.ArtifactDeploymentsCreatedCondition, string(ocm.ReasonDescriptorMismatch))
	waitForEvent(t, ns, vd.Name, string(ocm.ReasonDescriptorMismatch), "acme.org/artifacts/frontend:2.0.0", "1.2.3+build.5")
	ads := listADs(t, ns)
	if _, ok := ads[mustName(t, good.Name, good.Version, "", 0, naming.HashLength)]; !ok || len(ads) != 1 {
		t.Errorf("want only the good artifact deployed, got %v", keys(ads))
	}
}

// TestSourceConflictIsNotShared: an impostor in another registry with the same component,
// version and reuse but another chart has the same identity, hence the same name. The VectorDeployment reading it
// does not adopt the existing ArtifactDeployment: ArtifactSourceConflict and a warning, nothing overwritten.
func TestSourceConflictIsNotShared(t *testing.T) {
	real, fake := ocmtest.NewRegistry(t), ocmtest.NewRegistry(t)
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	impostor := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	impostor.Resources[1] = ocmtest.ChartResource("6.9.1", "evil.example.com/charts/podinfo:6.9.1")
	realVector := pushVector(t, real, "acme.org/vectors/shop", app)
	fakeVector := pushVector(t, fake, "acme.org/vectors/shop", impostor)
	startManager(t, managerOptions{})
	ns := newNamespace(t)

	owner := createVectorDeployment(t, ns, "real", realVector)
	waitForCondition(t, owner, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, "Succeeded")
	name := mustName(t, app.Name, app.Version, "", 0, naming.HashLength)
	before := listADs(t, ns)[name]
	wantSource := real.Ref("", app.Name, app.Version) + "@sha256:"
	if src := before.Annotations[konfidencev1.ArtifactSourceAnnotation]; !strings.HasPrefix(src, wantSource) {
		t.Fatalf("source annotation %q, want %s…", src, wantSource)
	}

	intruder := createVectorDeployment(t, ns, "impostor", fakeVector)
	got := waitForCondition(t, intruder, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionFalse, konfidencev1.ArtifactSourceConflictReason)
	assertStalledWithReady(t, got, konfidencev1.ArtifactSourceConflictReason)
	waitForEvent(t, ns, intruder.Name, konfidencev1.ArtifactSourceConflictReason, name, fake.Host)

	after := listADs(t, ns)[name]
	if len(after.OwnerReferences) != 1 || after.OwnerReferences[0].UID != owner.UID {
		t.Errorf("owners of %s: %+v, want only %s", name, after.OwnerReferences, owner.Name)
	}
	if after.ResourceVersion != before.ResourceVersion || string(after.Spec.Component.Resources[0].Content.Raw) != string(before.Spec.Component.Resources[0].Content.Raw) {
		t.Errorf("the existing ArtifactDeployment was changed: %+v", after)
	}
	if _, ok := getVD(t, intruder).Status.ResultingArtifactDeployments[app.Name]; ok {
		t.Error("the impostor's VectorDeployment records the other's ArtifactDeployment as its own")
	}
}

// TestSourceIsBackfilledOnAdoption: an ArtifactDeployment created before sources were recorded (no annotation)
// is still adopted, by its own VectorDeployment on resync and by another sharing it, and gets the source; its
// name stays.
func TestSourceIsBackfilledOnAdoption(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	vector := pushVector(t, reg, "acme.org/vectors/shop", app)
	stop := startManager(t, managerOptions{})
	ns := newNamespace(t)
	first := createVectorDeployment(t, ns, "first", vector)
	waitForCondition(t, first, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, "Succeeded")
	name := mustName(t, app.Name, app.Version, "", 0, naming.HashLength)
	source := listADs(t, ns)[name].Annotations[konfidencev1.ArtifactSourceAnnotation]
	stop()

	// As an earlier release left it.
	ad := &konfidencev1.ArtifactDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, konfidencev1.ArtifactSourceAnnotation)
	if err := env.Client.Patch(context.Background(), ad, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}

	startManager(t, managerOptions{})
	second := createVectorDeployment(t, ns, "second", vector)
	waitForCondition(t, second, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, "Succeeded")
	testenv.Eventually(t, 30*time.Second, func() error {
		ads := listADs(t, ns)
		got, ok := ads[name]
		if !ok {
			return fmt.Errorf("no ArtifactDeployment %s (have %v)", name, keys(ads))
		}
		if len(ads) != 1 || len(got.OwnerReferences) != 2 || got.Annotations[konfidencev1.ArtifactSourceAnnotation] != source {
			return fmt.Errorf("ArtifactDeployments %v; %s: owners %+v, source %q, want both owners and %q",
				keys(ads), name, got.OwnerReferences, got.Annotations[konfidencev1.ArtifactSourceAnnotation], source)
		}
		return nil
	})
}

// TestArtifactBeyondCRDLimits: artifacts the reader accepts but the CRD would refuse fail
// alone and for good (ArtifactLimitsExceeded, an event each), the good one is deployed, and the VectorDeployment
// is summarized: Ready present, Stalled, not Reconciling. A 205-byte version is refused before, by the
// descriptor check (DescriptorMismatch), also alone.
func TestArtifactBeyondCRDLimits(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	good := ocmtest.Artifact("acme.org/artifacts/good", "1.0.0", helmType, true)
	many := ocmtest.Artifact("acme.org/artifacts/many", "1.0.0", helmType, true)
	for i := range konfidencev1.MaxResources { // the chart and 64 more: 65 resources besides the manifest
		many.Resources = append(many.Resources, ocmtest.Resource{Name: fmt.Sprintf("extra-%d", i), Type: "blob", Access: map[string]string{"type": "none"}})
	}
	longName := ocmtest.Artifact("acme.org/artifacts/longname", "1.0.0", helmType, true)
	longName.Resources[1].Name = strings.Repeat("r", konfidencev1.MaxResourceNameLength+1)
	longVersion := ocmtest.Artifact("acme.org/artifacts/longversion", "1.0.0-"+strings.Repeat("x", 199), helmType, true)
	longVersion.Tag = "1.0.0"
	vector := pushVector(t, reg, "acme.org/vectors/shop", good, many, longName, longVersion)
	vd, ns := deployRefused(t, vector, konfidencev1.ArtifactDeploymentsCreatedCondition, konfidencev1.ArtifactLimitsExceededReason)
	msg := conditions.GetMessage(vd, konfidencev1.ReadyCondition)
	for _, want := range []string{"65 resources, the API allows 64", "resource name \"rrr", "has 254 bytes", string(ocm.ReasonDescriptorMismatch)} {
		if !strings.Contains(msg, want) {
			t.Errorf("Ready message %q does not say %q", msg, want)
		}
	}
	waitForEvent(t, ns, vd.Name, konfidencev1.ArtifactLimitsExceededReason, many.Name)
	waitForEvent(t, ns, vd.Name, konfidencev1.ArtifactLimitsExceededReason, longName.Name)
	if vd.Status.Artifacts != 4 || vd.Status.ReadySummary != "0/4" {
		t.Errorf("counts %d %q, want 4 artifacts, 0 ready", vd.Status.Artifacts, vd.Status.ReadySummary)
	}
	ads := listADs(t, ns)
	goodName := mustName(t, good.Name, good.Version, "", 0, naming.HashLength)
	if _, ok := ads[goodName]; !ok || len(ads) != 1 {
		t.Fatalf("want only the good artifact deployed, got %v", keys(ads))
	}
	// Once the good one is ready the summary follows: the refused artifacts do not hide it.
	markReady(t, ads[goodName])
	testenv.Eventually(t, 30*time.Second, func() error {
		if got := getVD(t, vd); got.Status.ReadySummary != "1/4" || conditions.IsReconciling(got) {
			return fmt.Errorf("status %q, Reconciling %v", got.Status.ReadySummary, conditions.IsReconciling(got))
		}
		return nil
	})
}

// TestOneVersionPerComponent: a vector referencing two versions of one component is refused
// as a whole, for good, before anything is created; its status says which component and why.
func TestOneVersionPerComponent(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	v1 := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	v2 := ocmtest.Artifact("acme.org/artifacts/frontend", "2.0.0", helmType, true)
	other := ocmtest.Artifact("acme.org/artifacts/other", "1.0.0", helmType, true)
	vector := pushVector(t, reg, "acme.org/vectors/shop", v1, other, v2)
	vd, ns := deployRefused(t, vector, konfidencev1.VectorDownloadedCondition, konfidencev1.MultipleComponentVersionsReason)
	msg := conditions.GetMessage(vd, konfidencev1.ReadyCondition)
	if !strings.Contains(msg, "acme.org/artifacts/frontend is referenced 2 times (acme.org/artifacts/frontend:1.0.0, acme.org/artifacts/frontend:2.0.0)") {
		t.Errorf("Ready message %q does not name the component and its versions", msg)
	}
	waitForEvent(t, ns, vd.Name, konfidencev1.MultipleComponentVersionsReason, "acme.org/artifacts/frontend")
	if ads := listADs(t, ns); len(ads) != 0 {
		t.Errorf("created %v for a refused vector", keys(ads))
	}
}

// deployRefused deploys vector as VectorDeployment shop in a new namespace and waits until condType is False with
// the reason of a refusal, which leaves it summarized as assertStalledWithReady checks.
func deployRefused(t *testing.T, vector, condType, reason string) (*konfidencev1.VectorDeployment, string) {
	t.Helper()
	startManager(t, managerOptions{})
	ns := newNamespace(t)
	vd := createVectorDeployment(t, ns, "shop", vector)
	vd = waitForCondition(t, vd, condType, metav1.ConditionFalse, reason)
	assertStalledWithReady(t, vd, reason)
	return vd, ns
}

// assertStalledWithReady: the VectorDeployment is summarized, Ready=False with the reason, Stalled, not
// Reconciling.
func assertStalledWithReady(t *testing.T, vd *konfidencev1.VectorDeployment, reason string) {
	t.Helper()
	if c := conditions.Get(vd, konfidencev1.ReadyCondition); c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason {
		t.Errorf("Ready = %+v, want False/%s", c, reason)
	}
	if !conditions.IsStalled(vd) || conditions.IsReconciling(vd) {
		t.Errorf("Stalled %v, Reconciling %v, want Stalled only", conditions.Get(vd, konfidencev1.StalledCondition), conditions.Get(vd, konfidencev1.ReconcilingCondition))
	}
}
