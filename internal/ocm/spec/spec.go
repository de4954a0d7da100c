// Package spec holds OCM's storage wire format as fluxdeployer reads and writes it: the component descriptor v2
// document, the media types and annotations of its OCI representation, and the CTF index. The reader (package
// ocm) and the fixture writer (package ocmtest) both build on these definitions so they cannot drift apart.
//
// Sources: OCM's specification (ocm-spec), its OCI repository mapping, the component descriptor v2 schema and the
// CTF layout.
package spec

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"sigs.k8s.io/yaml"
)

// Media types of the descriptor layer. The current OCM Go binding writes JSON; OCM v1 and old CLIs wrote
// +yaml+tar, and Gardener-era tooling the cnudie types.
const (
	MediaTypeDescriptorJSON    = "application/vnd.ocm.software.component-descriptor.v2+json"
	MediaTypeDescriptorYAML    = "application/vnd.ocm.software.component-descriptor.v2+yaml"
	MediaTypeDescriptorYAMLTar = "application/vnd.ocm.software.component-descriptor.v2+yaml+tar"

	MediaTypeLegacyDescriptorJSON      = "application/vnd.gardener.cloud.cnudie.component-descriptor.v2+json"
	MediaTypeLegacyDescriptorYAML      = "application/vnd.gardener.cloud.cnudie.component-descriptor.v2+yaml"
	MediaTypeLegacyDescriptorYAMLTar   = "application/vnd.gardener.cloud.cnudie.component-descriptor.v2+yaml+tar"
	MediaTypeLegacyDescriptorConfigTar = "application/vnd.oci.gardener.cloud.cnudie.component-descriptor.config.v2+yaml+tar"

	// DescriptorTarFile is the descriptor's file name inside the +tar encodings.
	DescriptorTarFile = "component-descriptor.yaml"
)

// The OCI representation of a component version.
const (
	ComponentDescriptorsPath        = "component-descriptors"
	MediaTypeComponentConfig        = "application/vnd.ocm.software.component.config.v1+json"
	ArtifactTypeComponentDescriptor = "application/vnd.ocm.software.component-descriptor.v2"
	AnnotationComponentVersion      = "software.ocm.componentversion"
	AnnotationCreator               = "software.ocm.creator"
	AnnotationArtifact              = "software.ocm.artifact"
)

// Values inside the descriptor document.
const (
	SchemaVersionV2                = "v2"
	AccessTypeLocalBlob            = "LocalBlob/v1"
	HashAlgorithmSHA256            = "SHA-256"
	NormalisationGenericBlobDigest = "genericBlobDigest/v1"
	// NormalisationOCIArtifactDigest is OCM v1's label for the digest of an OCI artifact's manifest.
	NormalisationOCIArtifactDigest = "ociArtifactDigest/v1"
	// HashNoDigest and NormalisationExcludeFromSignature mark a resource excluded from signing.
	HashNoDigest                      = "NO-DIGEST"
	NormalisationExcludeFromSignature = "EXCLUDE-FROM-SIGNATURE"
)

// The CTF directory layout.
const (
	CTFIndexFile = "artifact-index.json"
	CTFBlobsDir  = "blobs"

	ctfIndexSchemaVersion = 1
	// maxDescriptorTarEntries bounds the walk through a hostile tar full of tiny entries.
	maxDescriptorTarEntries = 64
)

// tarModTime is the fixed modification time OCM's encoder writes, so equal descriptors give equal blobs.
var tarModTime = time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)

// Descriptor is a component descriptor v2 document, reduced to what fluxdeployer reads and writes. Unknown
// fields are dropped on read; that is fine because fluxdeployer never re-stores a descriptor it read.
type Descriptor struct {
	Meta       Meta              `json:"meta"`
	Component  Component         `json:"component"`
	Signatures []json.RawMessage `json:"signatures,omitempty"`
}

// Meta carries the schema version.
type Meta struct {
	SchemaVersion string `json:"schemaVersion"`
}

// Component is the component section. The list fields have no omitempty because OCM writes them as null when
// empty, and a reader must accept that.
type Component struct {
	Name               string            `json:"name"`
	Version            string            `json:"version"`
	Provider           json.RawMessage   `json:"provider"`
	CreationTime       string            `json:"creationTime,omitempty"`
	RepositoryContexts []json.RawMessage `json:"repositoryContexts"`
	Resources          []Resource        `json:"resources"`
	Sources            []json.RawMessage `json:"sources"`
	References         []Reference       `json:"componentReferences"`
}

// Resource is an element of component.resources. Access stays raw: its shape depends on its type, and
// fluxdeployer forwards the access of most resources untouched.
type Resource struct {
	Name          string            `json:"name"`
	Version       string            `json:"version,omitempty"`
	ExtraIdentity map[string]string `json:"extraIdentity,omitempty"`
	Type          string            `json:"type"`
	Relation      string            `json:"relation,omitempty"`
	Access        json.RawMessage   `json:"access,omitempty"`
	Digest        *Digest           `json:"digest,omitempty"`
}

// Reference is an element of component.componentReferences.
type Reference struct {
	Name          string            `json:"name"`
	ComponentName string            `json:"componentName"`
	Version       string            `json:"version"`
	ExtraIdentity map[string]string `json:"extraIdentity,omitempty"`
	Digest        *Digest           `json:"digest,omitempty"`
}

// Digest is an element digest.
type Digest struct {
	HashAlgorithm          string `json:"hashAlgorithm"`
	NormalisationAlgorithm string `json:"normalisationAlgorithm"`
	Value                  string `json:"value"`
}

// LocalBlobAccess is the access of a resource stored inside the component version's own OCI artifact.
type LocalBlobAccess struct {
	Type           string `json:"type"`
	LocalReference string `json:"localReference"`
	MediaType      string `json:"mediaType"`
	ReferenceName  string `json:"referenceName,omitempty"`
}

// IsLocalBlobType reports whether an access type names a local blob: OCM registers LocalBlob and localBlob,
// each with and without /v1.
func IsLocalBlobType(accessType string) bool {
	name, version, _ := strings.Cut(accessType, "/")
	return (name == "LocalBlob" || name == "localBlob") && (version == "" || version == "v1")
}

// ComponentConfig is the OCI config blob of a component version.
type ComponentConfig struct {
	ComponentDescriptorLayer *ocispec.Descriptor `json:"componentDescriptorLayer,omitempty"`
}

// ArtifactAnnotation is one entry of the software.ocm.artifact layer annotation.
type ArtifactAnnotation struct {
	Identity map[string]string `json:"identity"`
	Kind     string            `json:"kind"`
}

// Identity returns the resource's identity: name, version when set, and extraIdentity.
func (r Resource) Identity() map[string]string {
	id := make(map[string]string, len(r.ExtraIdentity)+2)
	for k, v := range r.ExtraIdentity {
		id[k] = v
	}
	id["name"] = r.Name
	if r.Version != "" {
		id["version"] = r.Version
	}
	return id
}

// RepositoryPath is the OCI repository, relative to the registry host, that holds a component's versions.
func RepositoryPath(subPath, component string) string {
	if subPath = strings.Trim(subPath, "/"); subPath == "" {
		return ComponentDescriptorsPath + "/" + component
	}
	return subPath + "/" + ComponentDescriptorsPath + "/" + component
}

// VersionTag maps a version to its OCI tag. OCI tags cannot hold '+', so OCM replaces the first one.
func VersionTag(version string) string {
	return strings.Replace(version, "+", ".build-", 1)
}

// ErrUnsupportedMediaType reports a descriptor layer media type this package cannot decode.
var ErrUnsupportedMediaType = errors.New("unsupported media type")

// IsDescriptorMediaType reports whether Decode understands a descriptor layer media type.
func IsDescriptorMediaType(mediaType string) bool {
	switch mediaType {
	case MediaTypeDescriptorJSON, MediaTypeDescriptorYAML, MediaTypeDescriptorYAMLTar,
		MediaTypeLegacyDescriptorJSON, MediaTypeLegacyDescriptorYAML, MediaTypeLegacyDescriptorYAMLTar,
		MediaTypeLegacyDescriptorConfigTar:
		return true
	}
	return false
}

// IsYAMLMediaType reports whether a descriptor layer media type carries YAML (plain or inside a tar); the others
// carry JSON.
func IsYAMLMediaType(mediaType string) bool {
	return strings.HasSuffix(mediaType, "+yaml") || strings.HasSuffix(mediaType, "+yaml+tar")
}

// Decode parses a descriptor layer according to its media type: JSON media types with the JSON decoder only, YAML
// ones with the YAML parser. OCM parses every encoding with sigs.k8s.io/yaml and so also reads YAML labelled
// +json; fluxdeployer does not, because the YAML parser costs some 80 times the input in memory (a 4 MiB layer
// took ~320 MiB) and a +json label must not buy that price for input that is not JSON.
//
// It returns the descriptor and its document as JSON, the form digests and signatures are computed over: the
// descriptor is decoded from exactly that document, so what is verified and what is read are one value. A
// document with a key twice in one object, or two keys that differ only in case, is refused (UniqueKeys).
func Decode(mediaType string, data []byte) (*Descriptor, []byte, error) {
	doc, err := document(mediaType, data)
	if err != nil {
		return nil, nil, err
	}
	if IsYAMLMediaType(mediaType) {
		// Strict: a YAML mapping with a key twice is an error, not its last value.
		if doc, err = yaml.YAMLToJSONStrict(doc); err != nil {
			return nil, nil, fmt.Errorf("reading it as YAML: %w", err)
		}
	}
	if err := UniqueKeys(doc); err != nil {
		return nil, nil, fmt.Errorf("reading it as %s: %w", encodingName(mediaType), err)
	}
	var d Descriptor
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, nil, fmt.Errorf("reading it as %s: %w", encodingName(mediaType), err)
	}
	return &d, doc, nil
}

// UniqueKeys refuses a JSON document in which an object has a key twice, or two keys equal under Unicode case
// folding (imageReference and imagereference). Readers disagree on such objects: encoding/json matches struct
// fields case-insensitively and keeps the last duplicate, a map keeps both case variants and sorts them, another
// implementation may keep the first; so one reader could verify one value while another deploys the other.
func UniqueKeys(doc []byte) error {
	type frame struct {
		object, wantKey bool
		keys            map[string]string // folded key -> key as written
	}
	var stack []frame
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber() // numbers are only skipped: no float parsing
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			if key, ok := tok.(string); ok {
				top := &stack[n-1]
				folded := foldKey(key)
				if first, dup := top.keys[folded]; dup {
					return fmt.Errorf("an object has the keys %.64q and %.64q: keys may appear once, and not in two cases", first, key)
				}
				if top.keys == nil {
					top.keys = map[string]string{}
				}
				top.keys[folded], top.wantKey = key, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: in an object, a key comes next.
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
}

// foldKey maps a key to one representative of its case-folding class, so that keys equal under strings.EqualFold
// (the comparison encoding/json matches field names with) fold to the same string.
func foldKey(key string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, key)
}

// document returns the descriptor document of a layer: the layer itself, or the file inside a +tar one.
func document(mediaType string, data []byte) ([]byte, error) {
	if !IsDescriptorMediaType(mediaType) {
		return nil, fmt.Errorf("%w %q for a component descriptor", ErrUnsupportedMediaType, mediaType)
	}
	if strings.HasSuffix(mediaType, "+tar") {
		return descriptorFromTar(data)
	}
	return data, nil
}

func encodingName(mediaType string) string {
	if IsYAMLMediaType(mediaType) {
		return "YAML"
	}
	return "JSON"
}

func descriptorFromTar(data []byte) ([]byte, error) {
	tr := tar.NewReader(bytes.NewReader(data))
	for range maxDescriptorTarEntries {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading component descriptor tar: %w", err)
		}
		if strings.TrimPrefix(h.Name, "/") == DescriptorTarFile {
			// The tar is itself a size-limited blob, so reading the entry fully is bounded.
			return io.ReadAll(tr)
		}
	}
	return nil, fmt.Errorf("component descriptor tar has no %s", DescriptorTarFile)
}

// Encode serialises a descriptor for a descriptor layer of the given media type.
func Encode(mediaType string, d *Descriptor) ([]byte, error) {
	if !IsDescriptorMediaType(mediaType) {
		return nil, fmt.Errorf("%w %q for a component descriptor", ErrUnsupportedMediaType, mediaType)
	}
	data, err := json.Marshal(d)
	if err != nil || strings.HasSuffix(mediaType, "+json") {
		return data, err
	}
	if data, err = yaml.JSONToYAML(data); err != nil || !strings.HasSuffix(mediaType, "+tar") {
		return data, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: DescriptorTarFile, Size: int64(len(data)), Mode: 0o644, ModTime: tarModTime}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// CTFIndex is a CTF's artifact-index.json.
type CTFIndex struct {
	SchemaVersion int           `json:"schemaVersion"`
	Artifacts     []CTFArtifact `json:"artifacts"`
}

// CTFArtifact is one tagged manifest of a CTF. Old CTFs omit the media type.
type CTFArtifact struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag,omitempty"`
	Digest     string `json:"digest"`
	MediaType  string `json:"mediaType,omitempty"`
}

// NewCTFIndex returns an empty index of the version OCM reads.
func NewCTFIndex() CTFIndex { return CTFIndex{SchemaVersion: ctfIndexSchemaVersion} }

// DecodeCTFIndex parses artifact-index.json.
func DecodeCTFIndex(data []byte) (CTFIndex, error) {
	var idx CTFIndex
	if err := json.Unmarshal(data, &idx); err != nil {
		return idx, fmt.Errorf("decoding %s: %w", CTFIndexFile, err)
	}
	if idx.SchemaVersion != ctfIndexSchemaVersion {
		return idx, fmt.Errorf("%s has schemaVersion %d, want %d", CTFIndexFile, idx.SchemaVersion, ctfIndexSchemaVersion)
	}
	return idx, nil
}

// CTFBlobName is the file name, under blobs/, of a blob with the given digest.
func CTFBlobName(digest string) string { return strings.ReplaceAll(digest, ":", ".") }
