package vectordeployment

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// TestVectorTooLarge: a vector with more artifacts than a VectorDeployment deploys is refused as a whole with
// VectorTooLarge (Ready=False, Stalled) and a warning event, and no ArtifactDeployment is created; a vector at the
// limit is deployed. The limit is lowered to 3 here; the real one is konfidencev1.MaxArtifactsPerVector.
func TestVectorTooLarge(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	var artifacts []ocmtest.ComponentVersion
	for i := range 4 {
		artifacts = append(artifacts, ocmtest.Artifact(fmt.Sprintf("acme.org/artifacts/large-app%d", i), "1.0.0", helmType, true))
	}
	atLimit := pushVector(t, reg, "acme.org/vectors/at-limit", artifacts[:3]...)
	tooLarge := pushVector(t, reg, "acme.org/vectors/too-large", artifacts...)
	startManager(t, managerOptions{maxArtifacts: 3})
	ns := newNamespace(t)

	refused := createVectorDeployment(t, ns, "too-large", tooLarge)
	got := waitForCondition(t, refused, konfidencev1.ReadyCondition, metav1.ConditionFalse, konfidencev1.VectorTooLargeReason)
	if !conditions.IsStalled(got) {
		t.Errorf("a refused vector is not Stalled: %v", got.Status.Conditions)
	}
	want := "has 4 artifacts, more than the 3 one VectorDeployment deploys"
	if msg := conditions.GetMessage(got, konfidencev1.ReadyCondition); !strings.Contains(msg, want) {
		t.Errorf("Ready message %q does not say %q", msg, want)
	}
	waitForEvent(t, ns, refused.Name, konfidencev1.VectorTooLargeReason, want) // a warning, as every failure of fail
	if ads := listADs(t, ns); len(ads) != 0 {
		t.Errorf("a refused vector created ArtifactDeployments: %v", keys(ads))
	}

	deployed := createVectorDeployment(t, ns, "at-limit", atLimit)
	waitForCondition(t, deployed, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, "Succeeded")
	if ads := listADs(t, ns); len(ads) != 3 {
		t.Errorf("a vector at the limit has %d ArtifactDeployments, want 3", len(ads))
	}
}
