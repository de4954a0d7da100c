package fluxdeployer

import (
	"errors"
	"testing"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

func TestNameSuffix(t *testing.T) {
	for _, tc := range []struct {
		name, version, hash, specVersion string
		want                             string
	}{
		{name: "version and hash", version: "1.2.3+build.5", hash: "e1mvwibzp5", want: "-1-2-3-build-5-e1mvwibzp5"},
		{name: "version from the spec without the annotation", hash: "e1mvwibzp5", specVersion: "2.0.0", want: "-2-0-0-e1mvwibzp5"},
		{name: "36 characters fit", version: "1.0.0-rc.1-aaaaaaaaaaaaa", hash: "e1mvwibzp5", want: "-1-0-0-rc-1-aaaaaaaaaaaaa-e1mvwibzp5"},
		{name: "37 characters fall back to the hash", version: "1.0.0-rc.1-aaaaaaaaaaaaaa", hash: "e1mvwibzp5", want: "-e1mvwibzp5"},
		{name: "a version with nothing usable falls back to the hash", version: "+++", hash: "e1mvwibzp5", want: "-e1mvwibzp5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ad := artifactDeployment("ns", "x", KustomizeManifestType)
			ad.Annotations[konfidencev1.ArtifactVersionAnnotation] = tc.version
			ad.Annotations[konfidencev1.ArtifactHashAnnotation] = tc.hash
			ad.Spec.Component.Version = tc.specVersion
			got, err := nameSuffix(ad)
			if err != nil || got != tc.want {
				t.Errorf("nameSuffix = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	ad := artifactDeployment("ns", "x", KustomizeManifestType)
	delete(ad.Annotations, konfidencev1.ArtifactHashAnnotation)
	var se *stepError
	if _, err := nameSuffix(ad); !errors.As(err, &se) || se.reason != konfidencev1.InvalidAnnotationReason || !se.stalled {
		t.Errorf("missing hash annotation: %v", err)
	}
}
