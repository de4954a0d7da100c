package fluxdeployer

import (
	"strings"
	"testing"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TestResourceDigestPinsTheSource: a resource's recorded digest becomes the OCIRepository's ref.digest, in place
// of the tag; an access pinning another digest is refused with DigestMismatch.
func TestResourceDigestPinsTheSource(t *testing.T) {
	digest := "sha256:" + strings.Repeat("a", 64)
	access := func(ref string) *apiextensionsv1.JSON {
		return &apiextensionsv1.JSON{Raw: []byte(`{"type":"ociArtifact","imageReference":"` + ref + `"}`)}
	}
	a, err := resolveAccess(&konfidencev1.Resource{Name: "chart", Type: "helmChart", Content: access("registry.example/charts/web:1.0.0"), Digest: digest})
	if err != nil {
		t.Fatal(err)
	}
	repo := ociRepository(&konfidencev1.ArtifactDeployment{}, a, references{}, config{})
	if diff := cmp.Diff(&sourcev1.OCIRepositoryRef{Digest: digest}, repo.Spec.Reference); diff != "" {
		t.Errorf("OCIRepository ref, want the digest only (-want +got):\n%s", diff)
	}
	_, err = resolveAccess(&konfidencev1.Resource{Name: "chart", Type: "helmChart",
		Content: access("registry.example/charts/web:1.0.0@sha256:" + strings.Repeat("b", 64)), Digest: digest})
	assertFailure(t, err, konfidencev1.DigestMismatchReason, true) // conflicting digests
}
