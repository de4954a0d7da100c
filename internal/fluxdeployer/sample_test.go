package fluxdeployer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestSampleConfiguration: config/samples' ConfigMap has the name the deployer reads by default, only keys it
// knows (parseConfig ignores others, so a misspelt key would silently not apply), and values it accepts.
func TestSampleConfiguration(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "flux_deployer_configuration.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(raw, cm); err != nil {
		t.Fatal(err)
	}
	var defaults Options
	defaults.BindFlags(pflag.NewFlagSet("", pflag.ContinueOnError))
	if cm.Name != defaults.ConfigName {
		t.Errorf("sample ConfigMap is named %q, the deployer reads %q", cm.Name, defaults.ConfigName)
	}
	known := map[string]bool{}
	for _, k := range []string{authenticationSecretRefsKey, deploymentTargetsKey, deploymentTargetSecretNameKey, intervalKey,
		targetNamespaceKey, waitKey, timeoutKey, retriesKey, driftDetectionKey, helmSourceKey, serviceAccountNameKey, createNamespaceKey} {
		known[k] = true
	}
	for k := range cm.Data {
		if !known[k] {
			t.Errorf("sample ConfigMap has key %q, which the Flux deployer does not read", k)
		}
	}
	if _, err := parseConfig(cm.Data); err != nil {
		t.Errorf("sample ConfigMap: %v", err)
	}
}
