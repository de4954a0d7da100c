package vectordeployment

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestArtifactStatusChangeIsStatusOnly: once a VectorDeployment has converged, a change of its ArtifactDeployments'
// status is reported without re-reading its vector or the Secret it is read with: the reconcile it causes makes one
// API request, the status write. A reconcile request still reads both.
func TestArtifactStatusChangeIsStatusOnly(t *testing.T) {
	private := ocmtest.NewRegistry(t, ocmtest.WithBasicAuth("robot", "right"), ocmtest.WithTLS())
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	vector := pushVector(t, private, "acme.org/vectors/shop", app)
	var requests testenv.RequestRecorder
	var queue testenv.Queue
	startManager(t, managerOptions{requests: &requests, queue: &queue, resolver: ocm.NewClient(ocm.Options{RootCAs: private.CertPool()})})
	ns := newNamespace(t)
	if err := env.Client.Create(context.Background(), pullSecret(ns, "pull", private)); err != nil {
		t.Fatal(err)
	}
	vd := createVectorDeployment(t, ns, "shop", vector)
	vd = patchVD(t, vd, withSecretRef("pull"))
	vd = waitForCondition(t, vd, konfidencev1.ReadyCondition, metav1.ConditionFalse, meta.ProgressingReason)
	settle(t, &requests, &queue, vd)

	registryBefore := private.Requests()
	markReady(t, listADs(t, ns)[vd.Status.ResultingArtifactDeployments[app.Name].Name])
	// Ready is what the reconcile wrote last: its requests are all recorded once Ready is read.
	waitForCondition(t, vd, konfidencev1.ReadyCondition, metav1.ConditionTrue, meta.SucceededReason)
	want := []string{"PATCH /apis/konfidence.cloud/v1alpha1/namespaces/" + ns + "/vectordeployments/shop/status"}
	if diff := cmp.Diff(want, vdRequests(namespaceRequests(&requests, ns))); diff != "" {
		t.Errorf("API requests of the status-only reconcile (-want +got):\n%s", diff)
	}
	if n := private.Requests() - registryBefore; n != 0 {
		t.Errorf("the status-only reconcile made %d registry requests", n)
	}

	patchVD(t, vd, requestReconcile("full"))
	testenv.Eventually(t, 30*time.Second, func() error {
		if got := getVD(t, vd).Status.LastHandledReconcileAt; got != "full" {
			return fmt.Errorf("lastHandledReconcileAt %q", got)
		}
		return nil
	})
	if got := namespaceRequests(&requests, ns); !containsRequest(got, "GET /api/v1/namespaces/"+ns+"/secrets/pull") {
		t.Errorf("a reconcile request did not read the pull Secret: %q", got)
	}
}

// vdRequests leaves out the requests of the event recorder, which are not the reconcile's.
func vdRequests(requests []string) []string {
	var out []string
	for _, req := range requests {
		if !strings.Contains(req, "/events") {
			out = append(out, req)
		}
	}
	return out
}

func containsRequest(requests []string, want string) bool {
	for _, req := range requests {
		if req == want {
			return true
		}
	}
	return false
}
