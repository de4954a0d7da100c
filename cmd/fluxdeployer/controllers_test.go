package main

import (
	"maps"
	"testing"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/fluxdeployer"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment"
)

// TestHandOverFinalizers: the VectorDeployment reconciler creates ArtifactDeployments with the Flux deployer's
// teardown finalizer only when that deployer runs in the same process; without it, nobody here would remove it.
func TestHandOverFinalizers(t *testing.T) {
	for _, tc := range []struct {
		controllers []string
		want        map[string]string
	}{
		{[]string{"vectordeployment", "fluxdeployer"}, map[string]string{
			fluxdeployer.HelmManifestType:      konfidencev1.TeardownFinalizer,
			fluxdeployer.KustomizeManifestType: konfidencev1.TeardownFinalizer,
		}},
		{[]string{"vectordeployment"}, nil},
	} {
		setups := newControllerSetups()
		handOverFinalizers(setups, tc.controllers)
		if got := setups["vectordeployment"].(*vectordeployment.Options).Finalizers; !maps.Equal(got, tc.want) {
			t.Errorf("--controllers=%v: finalizers %v, want %v", tc.controllers, got, tc.want)
		}
	}
}
