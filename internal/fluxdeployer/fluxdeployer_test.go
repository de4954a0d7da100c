package fluxdeployer

import "testing"

// TestFluxDeployer runs every envtest test of the package against one API server with the Flux CRDs installed;
// testenv.Start ties the server's lifetime to a test, so the tests are subtests of this one.
func TestFluxDeployer(t *testing.T) {
	h := newHarness(t)
	t.Run("GoldenFluxObjects", func(t *testing.T) { testGoldenFluxObjects(t, h) })
	t.Run("StatusMapping", func(t *testing.T) { testStatusMapping(t, h) })
	t.Run("DeploymentResults", func(t *testing.T) { testDeploymentResults(t, h) })
	t.Run("RemoteTargets", func(t *testing.T) { testRemoteTargets(t, h) })
	t.Run("RemoteTimeouts", func(t *testing.T) { testRemoteTimeouts(t, h) })
	t.Run("RemoteTargetAllowList", func(t *testing.T) { testRemoteTargetAllowList(t, h) })
	t.Run("BadInput", func(t *testing.T) { testBadInput(t, h) })
	t.Run("EndToEnd", func(t *testing.T) { testEndToEnd(t, h) })
	t.Run("Operating", func(t *testing.T) { testOperating(t, h) })
	t.Run("Teardown", func(t *testing.T) { testTeardown(t, h) })
	t.Run("TeardownSuspended", func(t *testing.T) { testTeardownSuspended(t, h) })
	t.Run("TeardownEnds", func(t *testing.T) { testTeardownEnds(t, h) })
	t.Run("TargetNameConflict", func(t *testing.T) { testTargetNameConflict(t, h) })
	t.Run("SecretPresence", func(t *testing.T) { testSecretPresence(t, h) })
}
