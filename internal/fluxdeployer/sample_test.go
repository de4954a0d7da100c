package fluxdeployer

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestSampleConfiguration: config/samples' ConfigMap has the name the deployer reads by default, only keys it
// knows (a misspelt key would not apply), and values it accepts.
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
	if _, err := parseConfig(cm.Data); err != nil {
		t.Errorf("sample ConfigMap: %v", err)
	}
}

// TestChartSchemaKnowsTheConfigKeys: the chart's values.schema.json lists, for fluxDeployerConfig, exactly the keys
// the deployer reads, so that Helm refuses a misspelt one and accepts every real one.
func TestChartSchemaKnowsTheConfigKeys(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "charts", "fluxdeployer", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			FluxDeployerConfig struct {
				AdditionalProperties *bool                     `json:"additionalProperties"`
				Properties           map[string]map[string]any `json:"properties"`
			} `json:"fluxDeployerConfig"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	config := schema.Properties.FluxDeployerConfig
	if diff := cmp.Diff(ConfigKeys(), slices.Sorted(maps.Keys(config.Properties))); diff != "" || config.AdditionalProperties == nil || *config.AdditionalProperties {
		t.Errorf("fluxDeployerConfig: additionalProperties %v, keys (-read by the deployer +in the schema):\n%s", config.AdditionalProperties, diff)
	}
}
