package vectordeployment

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

func mustName(t testing.TB, component, version, uid string, count int32, hashLength int) string {
	t.Helper()
	name, _, err := naming.ArtifactDeploymentNameWithHashLength(component, version, uid, count, hashLength)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func TestVectorWithThreeArtifacts(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	helm := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.3+build.5", helmType, true)
	kustomize := ocmtest.Artifact("acme.org/artifacts/config", "0.1.0", kustomizeType, true)
	private := ocmtest.Artifact("acme.org/artifacts/database", "2.0.0", helmType, false)
	vector := pushVector(t, reg, "acme.org/vectors/shop", helm, kustomize, private)
	startManager(t, managerOptions{})
	vd := createVectorDeployment(t, ns, "shop", vector)
	vd = waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, "Succeeded")

	want := map[string]struct {
		cv  ocmtest.ComponentVersion
		uid string
	}{
		mustName(t, helm.Name, helm.Version, "", 0, naming.HashLength):                   {helm, ""},
		mustName(t, kustomize.Name, kustomize.Version, "", 0, naming.HashLength):         {kustomize, ""},
		mustName(t, private.Name, private.Version, string(vd.UID), 0, naming.HashLength): {private, string(vd.UID)},
	}
	ads := listADs(t, ns)
	if len(ads) != len(want) {
		t.Fatalf("got ArtifactDeployments %v, want %d", keys(ads), len(want))
	}
	for name, w := range want {
		ad, ok := ads[name]
		if !ok {
			t.Fatalf("no ArtifactDeployment %s (have %v)", name, keys(ads))
		}
		reusable := w.uid == ""
		wantAnnotations := map[string]string{
			konfidencev1.ArtifactComponentAnnotation:   w.cv.Name,
			konfidencev1.ArtifactVersionAnnotation:     w.cv.Version,
			konfidencev1.ArtifactHashAnnotation:        name[len(name)-naming.HashLength:],
			konfidencev1.AllowReuseAnnotation:          fmt.Sprint(reusable),
			konfidencev1.VectorDeploymentUIDAnnotation: w.uid,
		}
		gotAnnotations := map[string]string{}
		for key := range wantAnnotations {
			gotAnnotations[key] = ad.Annotations[key]
		}
		if diff := cmp.Diff(wantAnnotations, gotAnnotations); diff != "" {
			t.Errorf("%s: annotations (-want +got):\n%s", name, diff)
		}
		if got := ad.Labels[konfidencev1.ArtifactIdentityLabel]; got != mustName(t, w.cv.Name, w.cv.Version, w.uid, 0, naming.HashLength)[len(name)-naming.HashLength:] {
			t.Errorf("%s: identity label %q", name, got)
		}
		// A reusable ArtifactDeployment may be shared, so its owner is no controller.
		type owner struct {
			UID        types.UID
			Controller bool
		}
		var owners []owner
		for _, ref := range ad.OwnerReferences {
			owners = append(owners, owner{ref.UID, ptr.Deref(ref.Controller, false)})
		}
		if diff := cmp.Diff([]owner{{vd.UID, !reusable}}, owners); diff != "" {
			t.Errorf("%s: owner references (-want +got):\n%s", name, diff)
		}
		type spec struct {
			Component, Version string
			AllowReuse         bool
			ResourceTypes      []string
		}
		gotSpec := spec{ad.Spec.Component.Name, ad.Spec.Component.Version, ad.Spec.Manifest.AllowReuse, nil}
		for _, r := range ad.Spec.Component.Resources {
			gotSpec.ResourceTypes = append(gotSpec.ResourceTypes, r.Type)
		}
		if diff := cmp.Diff(spec{w.cv.Name, w.cv.Version, reusable, []string{"helmChart"}}, gotSpec); diff != "" {
			t.Errorf("%s: spec (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(konfidencev1.ResultingArtifactDeployment{Name: name}, vd.Status.ResultingArtifactDeployments[w.cv.Name]); diff != "" {
			t.Errorf("status.resultingArtifactDeployments[%s] (-want +got):\n%s", w.cv.Name, diff)
		}
	}
	if conditions.IsReady(vd) || !conditions.IsReconciling(vd) {
		t.Errorf("before the ArtifactDeployments are ready: Ready %v, Reconciling %v", conditions.Get(vd, "Ready"), conditions.Get(vd, "Reconciling"))
	}
	waitForEvent(t, ns, vd.Name, "ArtifactDeploymentCreated", helm.Name)

	result := konfidencev1.DeploymentResult{Name: "frontend", Type: "http-k8s-service"}
	for name, ad := range ads {
		if name == mustName(t, helm.Name, helm.Version, "", 0, naming.HashLength) {
			markReady(t, ad, result)
		} else {
			markReady(t, ad)
		}
	}
	vd = waitForCondition(t, vd, konfidencev1.ReadyCondition, metav1.ConditionTrue, "Succeeded")
	expectArtifacts(t, vd, artifactCounts{ready: len(want)})
	if conditions.Has(vd, konfidencev1.ReconcilingCondition) || conditions.Has(vd, konfidencev1.StalledCondition) {
		t.Errorf("ready VectorDeployment still has Reconciling/Stalled: %+v", vd.Status.Conditions)
	}
	if got := vd.Status.DeploymentResults[helm.Name]; len(got) != 1 || got[0].Name != "frontend" {
		t.Errorf("deploymentResults[%s] = %+v", helm.Name, got)
	}
	if vd.Status.ObservedGeneration != vd.Generation {
		t.Errorf("observedGeneration %d, generation %d", vd.Status.ObservedGeneration, vd.Generation)
	}
}

func TestTwoVectorDeploymentsShareReusableArtifacts(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	shared := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	private := ocmtest.Artifact("acme.org/artifacts/database", "1.0.0", helmType, false)
	vector := pushVector(t, reg, "acme.org/vectors/shop", shared, private)
	creationsBefore, adoptionsBefore := testutil.ToFloat64(creations), testutil.ToFloat64(adoptions)
	startManager(t, managerOptions{})
	a := createVectorDeployment(t, ns, "a", vector)
	b := createVectorDeployment(t, ns, "b", vector)
	waitForCondition(t, a, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, "Succeeded")
	waitForCondition(t, b, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, "Succeeded")

	var ads map[string]*konfidencev1.ArtifactDeployment
	sharedName := mustName(t, shared.Name, shared.Version, "", 0, naming.HashLength)
	testenv.Eventually(t, 10*time.Second, func() error {
		ads = listADs(t, ns)
		if n := len(ads[sharedName].OwnerReferences); n != 2 {
			return fmt.Errorf("shared ArtifactDeployment %s has %d owners", sharedName, n)
		}
		return nil
	})
	if len(ads) != 3 {
		t.Fatalf("want one shared and two private ArtifactDeployments, got %v", keys(ads))
	}
	for _, ref := range ads[sharedName].OwnerReferences {
		if ptr.Deref(ref.Controller, false) {
			t.Errorf("a shared ArtifactDeployment has a controller owner: %+v", ref)
		}
	}
	for _, vd := range []*konfidencev1.VectorDeployment{a, b} {
		vd = getVD(t, vd)
		if _, ok := ads[mustName(t, private.Name, private.Version, string(vd.UID), 0, naming.HashLength)]; !ok {
			t.Errorf("no private ArtifactDeployment for %s", vd.Name)
		}
	}
	// Three creations (one shared, two private) and one adoption, counted for Prometheus too.
	type made struct{ Creations, Adoptions float64 }
	if diff := cmp.Diff(made{3, 1}, made{testutil.ToFloat64(creations) - creationsBefore, testutil.ToFloat64(adoptions) - adoptionsBefore}); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	// Whichever VectorDeployment came second adopted what the first created.
	testenv.Eventually(t, 30*time.Second, func() error {
		created := append(eventMessages(t, ns, "a", "ArtifactDeploymentCreated"), eventMessages(t, ns, "b", "ArtifactDeploymentCreated")...)
		adopted := append(eventMessages(t, ns, "a", "ArtifactDeploymentAdopted"), eventMessages(t, ns, "b", "ArtifactDeploymentAdopted")...)
		if countContaining(created, sharedName) != 1 || countContaining(adopted, sharedName) != 1 {
			return fmt.Errorf("want %s created once and adopted once; created %q, adopted %q", sharedName, created, adopted)
		}
		return nil
	})
}

func countContaining(msgs []string, s string) int {
	n := 0
	for _, m := range msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
