package fluxdeployer

import (
	"strings"
	"testing"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TestNameSuffix: the suffix comes from the name's hash and spec.component.version, which cannot change; the
// konfidence.cloud/* annotations, which a tenant can edit, change nothing.
func TestNameSuffix(t *testing.T) {
	for _, tc := range []struct {
		name, adName, version string
		want                  string
	}{
		{name: "version and hash", adName: "backend-1-2-3-build-5-e1mvwibzp5", version: "1.2.3+build.5", want: "-1-2-3-build-5-e1mvwibzp5"},
		{name: "a Konfidence name", adName: "frontend-1-0-0-bcdfg24567", version: "1.0.0", want: "-1-0-0-bcdfg24567"},
		{name: "36 characters fit", adName: "e1mvwibzp5", version: "1.0.0-rc.1-aaaaaaaaaaaaa", want: "-1-0-0-rc-1-aaaaaaaaaaaaa-e1mvwibzp5"},
		{name: "37 characters fall back to the hash", adName: "e1mvwibzp5", version: "1.0.0-rc.1-aaaaaaaaaaaaaa", want: "-e1mvwibzp5"},
		{name: "a version with nothing usable falls back to the hash", adName: "app-e1mvwibzp5", version: "+++", want: "-e1mvwibzp5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ad := artifactDeployment("ns", tc.adName, KustomizeManifestType)
			ad.Spec.Component.Version = tc.version
			got, err := nameSuffix(ad)
			if err != nil || got != tc.want {
				t.Errorf("nameSuffix = %q, %v; want %q", got, err, tc.want)
			}
			ad.Annotations[konfidencev1.ArtifactHashAnnotation] = "victim0001"
			ad.Annotations[konfidencev1.ArtifactVersionAnnotation] = "9.9.9"
			if edited, err := nameSuffix(ad); err != nil || edited != got {
				t.Errorf("with edited annotations nameSuffix = %q, %v; want %q still", edited, err, got)
			}
		})
	}
	ad := artifactDeployment("ns", strings.Repeat("a", 36), KustomizeManifestType)
	_, err := nameSuffix(ad) // a name ending in 36 characters without a dash
	assertFailure(t, err, konfidencev1.InvalidNameReason, true)
}
