package ocmtest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/spec"
)

func readBlob(t *testing.T, dir, digest string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, spec.CTFBlobsDir, spec.CTFBlobName(digest)))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", digest, err)
	}
}

// TestWriteMatchesGoBindingLayout pins the shape §2.2 of the format reference describes, so fixtures look like
// what Konfidence (through the OCM Go binding) publishes.
func TestWriteMatchesGoBindingLayout(t *testing.T) {
	dir := t.TempDir()
	cv := Artifact("acme.org/artifacts/a", "1.0.0+ci.1", "cloud.konfidence.flux.helm", true)
	desc, err := Write(context.Background(), CTFRepository(dir), cv)
	if err != nil {
		t.Fatal(err)
	}
	idxData, err := os.ReadFile(filepath.Join(dir, spec.CTFIndexFile))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := spec.DecodeCTFIndex(idxData)
	if err != nil {
		t.Fatal(err)
	}
	want := spec.CTFArtifact{Repository: "component-descriptors/acme.org/artifacts/a", Tag: "1.0.0.build-ci.1", Digest: desc.Digest.String(), MediaType: ocispec.MediaTypeImageManifest}
	if len(idx.Artifacts) != 1 || idx.Artifacts[0] != want {
		t.Fatalf("index = %+v, want %+v", idx.Artifacts, want)
	}

	var m ocispec.Manifest
	readBlob(t, dir, desc.Digest.String(), &m)
	if m.ArtifactType != spec.ArtifactTypeComponentDescriptor || m.Config.MediaType != spec.MediaTypeComponentConfig || len(m.Layers) != 2 {
		t.Fatalf("manifest = %+v", m)
	}
	for k, v := range map[string]string{
		spec.AnnotationComponentVersion: "acme.org/artifacts/a:1.0.0+ci.1",
		spec.AnnotationCreator:          CreatorGoBinding,
		ocispec.AnnotationVersion:       "1.0.0+ci.1",
	} {
		if m.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, m.Annotations[k], v)
		}
	}
	var cfg spec.ComponentConfig
	readBlob(t, dir, m.Config.Digest.String(), &cfg)
	if cfg.ComponentDescriptorLayer == nil || cfg.ComponentDescriptorLayer.Digest != m.Layers[0].Digest ||
		m.Layers[0].MediaType != spec.MediaTypeDescriptorJSON {
		t.Errorf("config %+v does not point at the JSON descriptor layer %+v", cfg, m.Layers[0])
	}
	var artifact []spec.ArtifactAnnotation
	if err := json.Unmarshal([]byte(m.Layers[1].Annotations[spec.AnnotationArtifact]), &artifact); err != nil ||
		len(artifact) != 1 || artifact[0].Kind != "resource" || artifact[0].Identity["name"] != "artifact-manifest" {
		t.Errorf("local blob layer annotation = %q (%v)", m.Layers[1].Annotations[spec.AnnotationArtifact], err)
	}
	var d spec.Descriptor
	readBlob(t, dir, m.Layers[0].Digest.String(), &d)
	var access spec.LocalBlobAccess
	if err := json.Unmarshal(d.Component.Resources[0].Access, &access); err != nil || access.LocalReference != m.Layers[1].Digest.String() ||
		access.Type != spec.AccessTypeLocalBlob || d.Component.Resources[0].Digest.Value != m.Layers[1].Digest.Encoded() {
		t.Errorf("local blob resource = %+v / %+v (%v)", d.Component.Resources[0], access, err)
	}
}

func TestWriteLegacyAndIndexForms(t *testing.T) {
	dir := t.TempDir()
	cv := Artifact("acme.org/artifacts/a", "1.0.0", "x", true)
	cv.DescriptorMediaType = spec.MediaTypeDescriptorYAMLTar
	cv.Index = true
	desc, err := Write(context.Background(), CTFRepository(dir), cv)
	if err != nil {
		t.Fatal(err)
	}
	var index ocispec.Index
	readBlob(t, dir, desc.Digest.String(), &index)
	if desc.MediaType != ocispec.MediaTypeImageIndex || len(index.Manifests) != 1 || index.Manifests[0].MediaType != ocispec.MediaTypeImageManifest {
		t.Fatalf("index = %+v", index)
	}
	var m ocispec.Manifest
	readBlob(t, dir, index.Manifests[0].Digest.String(), &m)
	if m.ArtifactType != "" || m.Annotations[spec.AnnotationCreator] != CreatorLegacy || m.Layers[0].MediaType != spec.MediaTypeDescriptorYAMLTar {
		t.Errorf("legacy manifest = %+v", m)
	}
}
