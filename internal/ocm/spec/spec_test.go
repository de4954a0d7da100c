package spec

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestEncodeDecodeAllMediaTypes(t *testing.T) {
	d := &Descriptor{
		Meta: Meta{SchemaVersion: SchemaVersionV2},
		Component: Component{
			Name: "acme.org/x", Version: "1.0.0+b", Provider: []byte(`"acme"`),
			Resources: []Resource{{Name: "r", Type: "helmChart", Access: []byte(`{"type":"ociArtifact","imageReference":"h/r:1"}`)}},
		},
	}
	for _, mt := range []string{
		MediaTypeDescriptorJSON, MediaTypeDescriptorYAML, MediaTypeDescriptorYAMLTar,
		MediaTypeLegacyDescriptorJSON, MediaTypeLegacyDescriptorYAML, MediaTypeLegacyDescriptorYAMLTar,
		MediaTypeLegacyDescriptorConfigTar,
	} {
		data, err := Encode(mt, d)
		if err != nil {
			t.Fatalf("%s: %v", mt, err)
		}
		got, _, err := Decode(mt, data)
		if err != nil {
			t.Fatalf("%s: %v", mt, err)
		}
		if got.Component.Name != "acme.org/x" || got.Component.Version != "1.0.0+b" || len(got.Component.Resources) != 1 ||
			got.Component.Resources[0].Type != "helmChart" {
			t.Errorf("%s: decoded %+v", mt, got.Component)
		}
	}
}

func TestDecodeNullArraysAndTarLayout(t *testing.T) {
	got, _, err := Decode(MediaTypeDescriptorJSON, []byte(`{"meta":{"schemaVersion":"v2"},"component":{"name":"acme.org/x","version":"1","provider":"p",`+
		`"repositoryContexts":null,"resources":null,"sources":null,"componentReferences":null}}`))
	if err != nil || got.Component.Resources != nil || got.Component.References != nil {
		t.Fatalf("null arrays: %+v, %v", got, err)
	}

	// OCM trims a leading "/" and skips other entries.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range map[string]string{"other.txt": "x", "/" + DescriptorTarFile: "component:\n  name: acme.org/y\n  version: 2.0.0\n"} {
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(body)), Mode: 0o644})
		_, _ = tw.Write([]byte(body))
	}
	_ = tw.Close()
	if got, _, err := Decode(MediaTypeDescriptorYAMLTar, buf.Bytes()); err != nil || got.Component.Name != "acme.org/y" {
		t.Errorf("tar with leading slash: %+v, %v", got, err)
	}

	buf.Reset()
	tw = tar.NewWriter(&buf)
	_ = tw.Close()
	if _, _, err := Decode(MediaTypeDescriptorYAMLTar, buf.Bytes()); err == nil {
		t.Error("a tar without component-descriptor.yaml was decoded")
	}
	if _, _, err := Decode("application/vnd.oci.image.layer.v1.tar", nil); !errors.Is(err, ErrUnsupportedMediaType) {
		t.Errorf("unknown media type: %v, want ErrUnsupportedMediaType", err)
	}
}

func TestNaming(t *testing.T) {
	for in, want := range map[string]string{"1.2.3+ci.42": "1.2.3.build-ci.42", "1.0.0+a+b": "1.0.0.build-a+b", "latest": "latest"} {
		if got := VersionTag(in); got != want {
			t.Errorf("VersionTag(%q) = %q, want %q", in, got, want)
		}
	}
	if got := RepositoryPath("/ocm/vector/", "acme.org/x"); got != "ocm/vector/component-descriptors/acme.org/x" {
		t.Errorf("RepositoryPath = %q", got)
	}
	if got := RepositoryPath("", "acme.org/x"); got != "component-descriptors/acme.org/x" {
		t.Errorf("RepositoryPath = %q", got)
	}
	if got := CTFBlobName("sha256:abc"); got != "sha256.abc" {
		t.Errorf("CTFBlobName = %q", got)
	}
	for typ, want := range map[string]bool{"LocalBlob/v1": true, "LocalBlob": true, "localBlob/v1": true, "localBlob": true, "LocalBlob/v2": false, "ociArtifact": false} {
		if IsLocalBlobType(typ) != want {
			t.Errorf("IsLocalBlobType(%q) = %v", typ, !want)
		}
	}
}

// TestDecodeRefusesYAMLUnderJSONMediaType: unlike OCM, a +json layer is read with the JSON decoder only, so input
// that is not JSON never reaches the YAML parser; YAML media types still read YAML.
func TestDecodeRefusesYAMLUnderJSONMediaType(t *testing.T) {
	yamlDoc := []byte("component:\n  name: acme.org/z\n  version: 1.0.0\n")
	for _, mt := range []string{MediaTypeDescriptorJSON, MediaTypeLegacyDescriptorJSON} {
		if got, _, err := Decode(mt, yamlDoc); err == nil {
			t.Errorf("Decode(%s, YAML) = %+v, want an error", mt, got.Component)
		}
	}
	for _, mt := range []string{MediaTypeDescriptorYAML, MediaTypeLegacyDescriptorYAML} {
		if got, _, err := Decode(mt, yamlDoc); err != nil || got.Component.Name != "acme.org/z" {
			t.Errorf("Decode(%s, YAML) = %+v, %v", mt, got, err)
		}
	}
}

// TestDecodeRefusesAmbiguousKeys: an object with a key twice, or with two keys that differ only in case, is
// refused in every encoding, at any depth, so that no two readers of the descriptor can take different values
// from it; the same keys in different objects, and keys that only look alike, are fine.
func TestDecodeRefusesAmbiguousKeys(t *testing.T) {
	head := `{"meta":{"schemaVersion":"v2"},"component":{"name":"acme.org/x","version":"1.0.0","provider":"p","resources":[`
	yamlHead := "meta:\n  schemaVersion: v2\ncomponent:\n  name: acme.org/x\n  version: 1.0.0\n  provider: p\n  resources:\n"
	yamlAccess := yamlHead + "  - name: c\n    type: helmChart\n    access:\n      type: ociArtifact\n"
	jsonAccess := head + `{"name":"c","type":"helmChart","access":{"type":"ociArtifact",`
	for _, tc := range []struct {
		name, mediaType, doc string
		refused              bool
	}{
		{"json-case-variant", MediaTypeDescriptorJSON, jsonAccess + `"imagereference":"evil/c:1","imageReference":"good/c:1"}}]}}`, true},
		{"json-duplicate", MediaTypeDescriptorJSON, jsonAccess + `"imageReference":"good/c:1","imageReference":"evil/c:1"}}]}}`, true},
		{"json-escaped-duplicate", MediaTypeDescriptorJSON, jsonAccess + `"imageReference":"good/c:1","\u0069mageReference":"evil/c:1"}}]}}`, true},
		{"json-kelvin-sign", MediaTypeLegacyDescriptorJSON, head + `{"name":"c","type":"helmChart","access":{"k":1,"\u212a":2}}]}}`, true},
		{"json-top-level", MediaTypeDescriptorJSON, `{"meta":{"schemaVersion":"v2"},"Meta":{},"component":{"name":"acme.org/x","version":"1.0.0"}}`, true},
		{"json-field-case", MediaTypeDescriptorJSON, `{"meta":{"schemaVersion":"v2"},"component":{"name":"acme.org/x","Name":"acme.org/y","version":"1.0.0"}}`, true},
		{"json-same-keys-in-sibling-objects", MediaTypeDescriptorJSON, head + `{"name":"a","type":"t","access":{"type":"x"}},{"name":"b","type":"t","access":{"type":"x"}}]}}`, false},
		{"yaml-duplicate", MediaTypeDescriptorYAML, yamlAccess + "      imageReference: good/c:1\n      imageReference: evil/c:1\n", true},
		{"yaml-case-variant", MediaTypeDescriptorYAML, yamlAccess + "      imagereference: evil/c:1\n      imageReference: good/c:1\n", true},
		{"yaml-distinct", MediaTypeDescriptorYAML, yamlAccess + "      imageReference: good/c:1\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, doc, err := Decode(tc.mediaType, []byte(tc.doc))
			switch {
			case tc.refused && err == nil:
				t.Fatalf("decoded %+v", d.Component)
			case tc.refused && !strings.Contains(err.Error(), "keys may appear once") && !strings.Contains(err.Error(), "already set in map"):
				t.Errorf("error %q does not say why", err)
			case !tc.refused && err != nil:
				t.Fatal(err)
			case !tc.refused && !json.Valid(doc):
				t.Errorf("document %s is not JSON", doc)
			}
		})
	}
}
