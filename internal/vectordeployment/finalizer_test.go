package vectordeployment

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestDeployerFinalizerAndFirstReport: with a deployer in the process that handles the Helm type, the
// ArtifactDeployment of a Helm artifact is created with that deployer's finalizer, one of a type no deployer here
// handles without any; and the VectorDeployment writes its status once, when the deployer has reported the Helm one
// (the other is reported as it is), instead of once on creating them and again on each report.
func TestDeployerFinalizerAndFirstReport(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	helm := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, false)
	other := ocmtest.Artifact("acme.org/artifacts/firmware", "1.0.0", "acme.org/firmware", false)
	vector := pushVector(t, reg, "acme.org/vectors/finalizers", helm, other)
	requests := &testenv.RequestRecorder{}
	startManager(t, managerOptions{requests: requests, finalizers: map[string]string{helmType: konfidencev1.TeardownFinalizer}})
	vd := createVectorDeployment(t, ns, "finalizers", vector)

	var ads map[string]*konfidencev1.ArtifactDeployment
	testenv.Eventually(t, 30*time.Second, func() error {
		if ads = listADs(t, ns); len(ads) != 2 {
			return fmt.Errorf("%d ArtifactDeployments, want 2", len(ads))
		}
		return nil
	})
	var helmAD *konfidencev1.ArtifactDeployment
	for _, ad := range ads {
		want := []string(nil)
		if ad.Spec.Manifest.Type == helmType {
			want, helmAD = []string{konfidencev1.TeardownFinalizer}, ad
		}
		if !slices.Equal(ad.Finalizers, want) {
			t.Errorf("ArtifactDeployment %s of type %s: finalizers %v, want %v", ad.Name, ad.Spec.Manifest.Type, ad.Finalizers, want)
		}
	}
	if helmAD == nil {
		t.Fatal("no ArtifactDeployment of the Helm artifact")
	}
	if got := getVD(t, vd); conditions.Has(got, konfidencev1.ArtifactDeploymentsCreatedCondition) {
		t.Errorf("status written before the deployer reported: %+v", got.Status.Conditions)
	}

	// The deployer's first report.
	conditions.MarkUnknown(helmAD, konfidencev1.ReadyCondition, "Progressing", "waiting for HelmRelease %s", helmAD.Name)
	helmAD.Status.ObservedGeneration = helmAD.Generation
	if err := env.Client.Status().Update(context.Background(), helmAD); err != nil {
		t.Fatal(err)
	}
	got := waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, "Succeeded")
	if msg := conditions.GetMessage(got, konfidencev1.ReadyCondition); !strings.Contains(msg, helmAD.Name+": Progressing: waiting for HelmRelease") {
		t.Errorf("Ready message %q does not report %s", msg, helmAD.Name)
	}
	if got.Status.ResultingArtifactDeployments[helm.Name].Name != helmAD.Name ||
		!conditions.IsTrue(got, konfidencev1.VectorDownloadedCondition) {
		t.Errorf("status %+v lacks what the reconcile that created the ArtifactDeployments found", got.Status)
	}
	var statusWrites int
	for _, req := range requests.Take() {
		if strings.HasPrefix(req, "PATCH ") && strings.HasSuffix(req, "/vectordeployments/"+vd.Name+"/status") {
			statusWrites++
		}
	}
	if statusWrites != 1 {
		t.Errorf("%d status writes of the VectorDeployment, want 1", statusWrites)
	}
}
