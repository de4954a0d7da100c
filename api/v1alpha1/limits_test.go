package v1alpha1_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TestLimitsMatchCRD: the Max* constants are the generated CRD's limits, and every limit of the
// ArtifactDeployment spec has its constant, so the reconciler's check before creating cannot drift from what the
// API server enforces. Fields with a minimum length are the ones the check requires non-empty.
func TestLimitsMatchCRD(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "konfidence.cloud_artifactdeployments.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatal(err)
	}
	maxima, minima := map[string]int64{}, map[string]int64{}
	walk("spec", crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"], maxima, minima)

	want := map[string]int64{
		"spec.manifest.type":               konfidencev1.MaxManifestTypeLength,
		"spec.taskManifests":               konfidencev1.MaxTaskManifests,
		"spec.taskManifests[].name":        konfidencev1.MaxTaskNameLength,
		"spec.taskManifests[].type":        konfidencev1.MaxTaskTypeLength,
		"spec.taskManifests[].dependsOn":   konfidencev1.MaxTaskDependencies,
		"spec.taskManifests[].dependsOn[]": konfidencev1.MaxTaskDependencyLength,
		"spec.component.name":              konfidencev1.MaxComponentNameLength,
		"spec.component.version":           konfidencev1.MaxComponentVersionLength,
		"spec.component.resources":         konfidencev1.MaxResources,
		"spec.component.resources[].name":  konfidencev1.MaxResourceNameLength,
		"spec.component.resources[].type":  konfidencev1.MaxResourceTypeLength,
	}
	if !maps.Equal(maxima, want) {
		t.Errorf("limits in the CRD:\n%v\nconstants:\n%v", maxima, want)
	}
	nonEmpty := []string{
		"spec.component.name", "spec.component.resources[].name", "spec.component.resources[].type",
		"spec.component.version", "spec.manifest.type", "spec.taskManifests[].name", "spec.taskManifests[].type",
	}
	if got := slices.Sorted(maps.Keys(minima)); !slices.Equal(got, nonEmpty) {
		t.Errorf("fields with a minimum length %v, want %v", got, nonEmpty)
	}
	for path, n := range minima {
		if n != 1 {
			t.Errorf("%s: minLength %d, the check requires 1", path, n)
		}
	}
}

// walk collects maxLength/maxItems and minLength of every property below s, by path.
func walk(path string, s apiextensionsv1.JSONSchemaProps, maxima, minima map[string]int64) {
	for _, limit := range []*int64{s.MaxLength, s.MaxItems} {
		if limit != nil {
			maxima[path] = *limit
		}
	}
	if s.MinLength != nil {
		minima[path] = *s.MinLength
	}
	for name, p := range s.Properties {
		walk(path+"."+name, p, maxima, minima)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walk(path+"[]", *s.Items.Schema, maxima, minima)
	}
}
