// Package ocmtest writes OCM component versions, as the OCM Go binding does, into OCI registries and CTF
// directories, and runs an in-process registry for tests. Tests, the demo and e2e use it to create vectors.
package ocmtest

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/signing"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/spec"
)

// Creators written into the software.ocm.creator annotation: the current Go binding, and the OCM v1 library
// whose manifests carry +yaml+tar descriptors and no artifactType.
const (
	CreatorGoBinding = "ocm.software/open-component-model/bindings/go/oci"
	CreatorLegacy    = "OCM Go Library 0.20.0"
)

// ComponentVersion describes a component version to write.
type ComponentVersion struct {
	Name    string
	Version string
	// Tag, when set, is the version the component version is stored and referenced under instead of Version: a
	// descriptor that lies about the reference it is read through, as a hostile publisher would write one.
	Tag      string
	Provider string // default "test"
	// Resources with a Blob become local blobs; the others keep their Access.
	Resources  []Resource
	References []spec.Reference
	// DescriptorMediaType selects the descriptor encoding; default JSON, as the current Go binding writes.
	// Any other type is written the way OCM v1 wrote +yaml+tar: without artifactType, with the legacy creator.
	DescriptorMediaType string
	// Index wraps the manifest in an OCI index, as OCM does when a local blob is itself an OCI artifact.
	Index bool
	// RawDescriptor, when set, is stored verbatim as the descriptor layer (of DescriptorMediaType) instead of the
	// encoded descriptor: hostile or malformed descriptors for tests.
	RawDescriptor []byte
	// Signers sign the descriptor, in order.
	Signers []Signer
}

// Signer signs a component version's descriptor as OCM's RSA signing handler does.
type Signer struct {
	Name    string
	Key     *rsa.PrivateKey
	Options signing.SignOptions
}

// Resource is a resource to write.
type Resource struct {
	Name     string
	Version  string
	Type     string
	Relation string // default "local" for local blobs, "external" otherwise
	// Access is marshalled as the access of a non-local resource.
	Access any
	// Blob, when non-nil, is stored as a local blob of media type BlobMediaType (default application/json).
	Blob          []byte
	BlobMediaType string
	// Digest is recorded for a non-local resource, e.g. the manifest digest of the OCI artifact its access names.
	Digest *spec.Digest
}

// Target receives a component version's blobs and manifests. *remote.Repository implements it.
type Target interface {
	Push(ctx context.Context, expected ocispec.Descriptor, r io.Reader) error
	Tag(ctx context.Context, desc ocispec.Descriptor, reference string) error
}

// Repository returns the Target that holds a component's versions.
type Repository func(component string) (Target, error)

// RegistryRepository writes to an OCI registry below subPath.
func RegistryRepository(client remote.Client, host, subPath string, plainHTTP bool) Repository {
	return func(component string) (Target, error) {
		return &remote.Repository{
			Client:    client,
			Reference: registry.Reference{Registry: host, Repository: spec.RepositoryPath(subPath, component)},
			PlainHTTP: plainHTTP,
		}, nil
	}
}

// Write stores a component version and tags it with its version; it returns the tagged manifest or index.
func Write(ctx context.Context, repo Repository, cv ComponentVersion) (ocispec.Descriptor, error) {
	t, err := repo(cv.Name)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	mediaType := cv.DescriptorMediaType
	if mediaType == "" {
		mediaType = spec.MediaTypeDescriptorJSON
	}
	d, blobs, err := describe(cv)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	var layers []ocispec.Descriptor
	for _, b := range blobs {
		if err := t.Push(ctx, b.desc, bytes.NewReader(b.data)); err != nil {
			return ocispec.Descriptor{}, err
		}
		layers = append(layers, b.desc)
	}
	data, err := spec.Encode(mediaType, d)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if cv.RawDescriptor != nil {
		data = cv.RawDescriptor
	}
	descLayer, err := push(ctx, t, mediaType, data)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	config, err := pushJSON(ctx, t, spec.MediaTypeComponentConfig, spec.ComponentConfig{ComponentDescriptorLayer: &descLayer})
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	manifest := ocispec.Manifest{
		MediaType:   ocispec.MediaTypeImageManifest,
		Config:      config,
		Layers:      append([]ocispec.Descriptor{descLayer}, layers...),
		Annotations: annotations(cv),
	}
	manifest.SchemaVersion = 2
	if mediaType == spec.MediaTypeDescriptorJSON {
		manifest.ArtifactType = spec.ArtifactTypeComponentDescriptor
	}
	tagged, err := pushJSON(ctx, t, ocispec.MediaTypeImageManifest, manifest)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if cv.Index {
		index := ocispec.Index{
			MediaType:   ocispec.MediaTypeImageIndex,
			Manifests:   []ocispec.Descriptor{tagged},
			Annotations: map[string]string{spec.AnnotationComponentVersion: cv.Name + ":" + cv.Version},
		}
		index.SchemaVersion = 2
		if tagged, err = pushJSON(ctx, t, ocispec.MediaTypeImageIndex, index); err != nil {
			return ocispec.Descriptor{}, err
		}
	}
	return tagged, t.Tag(ctx, tagged, spec.VersionTag(cv.tag()))
}

// tag is the version a component version is stored and referenced under.
func (cv ComponentVersion) tag() string {
	if cv.Tag != "" {
		return cv.Tag
	}
	return cv.Version
}

// blob is a local blob to push as a layer.
type blob struct {
	desc ocispec.Descriptor
	data []byte
}

// describe builds the (signed) descriptor of a component version and the local blobs it names.
func describe(cv ComponentVersion) (*spec.Descriptor, []blob, error) {
	d := &spec.Descriptor{
		Meta: spec.Meta{SchemaVersion: spec.SchemaVersionV2},
		Component: spec.Component{
			Name: cv.Name, Version: cv.Version, Provider: provider(cv.Provider),
			References: cv.References,
		},
	}
	var blobs []blob
	for _, r := range cv.Resources {
		res, b, err := describeResource(r)
		if err != nil {
			return nil, nil, fmt.Errorf("resource %s: %w", r.Name, err)
		}
		d.Component.Resources = append(d.Component.Resources, res)
		if b != nil {
			blobs = append(blobs, *b)
		}
	}
	for _, s := range cv.Signers {
		if err := sign(d, s); err != nil {
			return nil, nil, fmt.Errorf("signing %s:%s as %s: %w", cv.Name, cv.Version, s.Name, err)
		}
	}
	return d, blobs, nil
}

// sign adds a signature to d, computed over d as JSON (the form every encoding converts to).
func sign(d *spec.Descriptor, s Signer) error {
	unsigned, err := json.Marshal(d)
	if err != nil {
		return err
	}
	signed, err := signing.Sign(unsigned, s.Name, s.Key, s.Options)
	if err != nil {
		return err
	}
	*d = spec.Descriptor{}
	return json.Unmarshal(signed, d)
}

// Digest is the digest a vector's component reference pins cv with: SHA-256 over its descriptor normalised with
// jsonNormalisation/v4alpha1, as Konfidence writes it.
func Digest(cv ComponentVersion) (*spec.Digest, error) {
	d, _, err := describe(cv)
	if err != nil {
		return nil, err
	}
	doc, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	value, err := signing.Digest(doc, signing.NormalisationV4alpha1, signing.HashSHA256)
	if err != nil {
		return nil, err
	}
	return &spec.Digest{HashAlgorithm: signing.HashSHA256, NormalisationAlgorithm: signing.NormalisationV4alpha1, Value: value}, nil
}

func provider(name string) json.RawMessage {
	if name == "" {
		name = "test"
	}
	b, _ := json.Marshal(name) // a string always marshals
	return b
}

func annotations(cv ComponentVersion) map[string]string {
	a := map[string]string{
		spec.AnnotationComponentVersion: cv.Name + ":" + cv.Version,
		spec.AnnotationCreator:          CreatorGoBinding,
		ocispec.AnnotationTitle:         fmt.Sprintf("OCM Component Descriptor OCI Artifact Manifest for %s in version %s", cv.Name, cv.Version),
		ocispec.AnnotationVersion:       cv.Version,
	}
	if cv.DescriptorMediaType != "" && cv.DescriptorMediaType != spec.MediaTypeDescriptorJSON {
		a[spec.AnnotationCreator] = CreatorLegacy
	}
	return a
}

// describeResource describes a resource; a local blob is described the way OCM ingests one: the access points at
// the blob's digest and the layer is annotated with the resource identity.
func describeResource(r Resource) (spec.Resource, *blob, error) {
	res := spec.Resource{Name: r.Name, Version: r.Version, Type: r.Type, Relation: r.Relation, Digest: r.Digest}
	if r.Blob == nil {
		if res.Relation == "" {
			res.Relation = "external"
		}
		if r.Access != nil {
			var err error
			if res.Access, err = json.Marshal(r.Access); err != nil {
				return res, nil, err
			}
		}
		return res, nil, nil
	}
	if res.Relation == "" {
		res.Relation = "local"
	}
	mediaType := r.BlobMediaType
	if mediaType == "" {
		mediaType = "application/json"
	}
	layer := content.NewDescriptorFromBytes(mediaType, r.Blob)
	var err error
	if res.Access, err = json.Marshal(spec.LocalBlobAccess{Type: spec.AccessTypeLocalBlob, LocalReference: layer.Digest.String(), MediaType: mediaType}); err != nil {
		return res, nil, err
	}
	res.Digest = &spec.Digest{HashAlgorithm: spec.HashAlgorithmSHA256, NormalisationAlgorithm: spec.NormalisationGenericBlobDigest, Value: layer.Digest.Encoded()}
	artifact, err := json.Marshal([]spec.ArtifactAnnotation{{Identity: res.Identity(), Kind: "resource"}})
	if err != nil {
		return res, nil, err
	}
	layer.Annotations = map[string]string{spec.AnnotationArtifact: string(artifact)}
	return res, &blob{desc: layer, data: r.Blob}, nil
}

func pushJSON(ctx context.Context, t Target, mediaType string, v any) (ocispec.Descriptor, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return push(ctx, t, mediaType, data)
}

func push(ctx context.Context, t Target, mediaType string, data []byte) (ocispec.Descriptor, error) {
	desc := content.NewDescriptorFromBytes(mediaType, data)
	return desc, t.Push(ctx, desc, bytes.NewReader(data))
}

// CTFRepository writes into a CTF directory, creating it if needed.
func CTFRepository(dir string) Repository {
	return func(component string) (Target, error) {
		return &ctfTarget{dir: dir, repository: spec.RepositoryPath("", component)}, nil
	}
}

// CopyCTF copies every component version of a CTF directory (as the OCM CLI writes one) into repo under the tag
// the CTF gives it, each blob and manifest before what names it, as `ocm transfer ctf` does: a CLI-made fixture
// can then be read from a registry.
func CopyCTF(ctx context.Context, dir string, repo Repository) error {
	data, err := os.ReadFile(filepath.Join(dir, spec.CTFIndexFile))
	if err != nil {
		return err
	}
	idx, err := spec.DecodeCTFIndex(data)
	if err != nil {
		return err
	}
	for _, a := range idx.Artifacts {
		component, ok := strings.CutPrefix(a.Repository, spec.ComponentDescriptorsPath+"/")
		if !ok {
			return fmt.Errorf("CTF %s: repository %s holds no component descriptors", dir, a.Repository)
		}
		t, err := repo(component)
		if err != nil {
			return err
		}
		mediaType := a.MediaType
		if mediaType == "" { // written by old OCM
			mediaType = ocispec.MediaTypeImageManifest
		}
		desc, err := copyCTFGraph(ctx, dir, t, mediaType, a.Digest)
		if err != nil {
			return fmt.Errorf("CTF %s: %s:%s: %w", dir, a.Repository, a.Tag, err)
		}
		if err := t.Tag(ctx, desc, a.Tag); err != nil {
			return err
		}
	}
	return nil
}

// copyCTFGraph pushes the CTF blob dgst and, for a manifest or index, first everything it names.
func copyCTFGraph(ctx context.Context, dir string, t Target, mediaType, dgst string) (ocispec.Descriptor, error) {
	// Validating first keeps the index from naming files outside blobs/.
	want, err := digest.Parse(dgst)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	data, err := os.ReadFile(filepath.Join(dir, spec.CTFBlobsDir, spec.CTFBlobName(want.String())))
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	desc := content.NewDescriptorFromBytes(mediaType, data)
	if desc.Digest != want {
		return ocispec.Descriptor{}, fmt.Errorf("blob %s has digest %s", dgst, desc.Digest)
	}
	if mediaType == ocispec.MediaTypeImageManifest || mediaType == ocispec.MediaTypeImageIndex {
		var graph struct {
			Config    *ocispec.Descriptor  `json:"config"`
			Layers    []ocispec.Descriptor `json:"layers"`
			Manifests []ocispec.Descriptor `json:"manifests"`
		}
		if err := json.Unmarshal(data, &graph); err != nil {
			return ocispec.Descriptor{}, fmt.Errorf("%s %s: %w", mediaType, dgst, err)
		}
		children := append(graph.Layers, graph.Manifests...)
		if graph.Config != nil {
			children = append(children, *graph.Config)
		}
		for _, c := range children {
			if _, err := copyCTFGraph(ctx, dir, t, c.MediaType, c.Digest.String()); err != nil {
				return ocispec.Descriptor{}, err
			}
		}
	}
	return desc, t.Push(ctx, desc, bytes.NewReader(data))
}

type ctfTarget struct {
	dir        string
	repository string
}

func (c *ctfTarget) Push(_ context.Context, expected ocispec.Descriptor, r io.Reader) error {
	if err := os.MkdirAll(filepath.Join(c.dir, spec.CTFBlobsDir), 0o750); err != nil {
		return err
	}
	data, err := content.ReadAll(r, expected)
	if err != nil {
		return err
	}
	// The CTF directory is the caller's to choose; ReadAll verified the digest that names the file.
	return os.WriteFile(filepath.Join(c.dir, spec.CTFBlobsDir, spec.CTFBlobName(expected.Digest.String())), data, 0o600) //nolint:gosec // G703
}

func (c *ctfTarget) Tag(_ context.Context, desc ocispec.Descriptor, tag string) error {
	path := filepath.Join(c.dir, spec.CTFIndexFile)
	idx := spec.NewCTFIndex()
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if idx, err = spec.DecodeCTFIndex(data); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	idx.Artifacts = slices.DeleteFunc(idx.Artifacts, func(a spec.CTFArtifact) bool {
		return a.Repository == c.repository && a.Tag == tag
	})
	idx.Artifacts = append(idx.Artifacts, spec.CTFArtifact{Repository: c.repository, Tag: tag, Digest: desc.Digest.String(), MediaType: desc.MediaType})
	if data, err = json.Marshal(idx); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600) //nolint:gosec // G703: the CTF directory is the caller's to choose
}

// The helpers below build Konfidence-shaped component versions.

// Artifact is an artifact component version with an artifact manifest {type, allowReuse} and one helm chart
// resource pointing at an OCI image.
func Artifact(component, version, deployerType string, allowReuse bool) ComponentVersion {
	manifest, _ := json.Marshal(struct { // two plain fields always marshal
		Type       string `json:"type"`
		AllowReuse bool   `json:"allowReuse"`
	}{deployerType, allowReuse})
	return ComponentVersion{
		Name: component, Version: version,
		Resources: []Resource{
			{Name: "artifact-manifest", Version: version, Type: ocm.ResourceTypeArtifactManifest, Blob: manifest},
			ChartResource("6.9.1", "ghcr.io/stefanprodan/charts/podinfo:6.9.1"),
		},
	}
}

// TaskResource is a task manifest resource.
func TaskResource(t ocm.Task) Resource {
	data, _ := json.Marshal(t) // Task's Spec is valid JSON or empty
	return Resource{Name: "task-" + t.Name, Type: ocm.ResourceTypeTaskManifest, Blob: data}
}

// Vector is a vector component version referencing the given artifacts, named ref-<i> as Konfidence's test
// helper names them, each pinned by its normalised digest as Konfidence pins them.
func Vector(component, version string, artifacts ...ComponentVersion) ComponentVersion {
	v := ComponentVersion{Name: component, Version: version, Provider: "konfidence"}
	for i, a := range artifacts {
		digest, _ := Digest(a) // fails only for unmarshalable accesses, which Write reports
		v.References = append(v.References, spec.Reference{Name: fmt.Sprintf("ref-%d", i), ComponentName: a.Name, Version: a.tag(), Digest: digest})
	}
	return v
}

// WithOCIDigest records digest ("sha256:<hex>", the manifest digest of the OCI artifact the access names) on a
// resource, as OCM's genericBlobDigest/v1.
func (r Resource) WithOCIDigest(digest string) Resource {
	r.Digest = &spec.Digest{HashAlgorithm: spec.HashAlgorithmSHA256, NormalisationAlgorithm: spec.NormalisationGenericBlobDigest, Value: strings.TrimPrefix(digest, "sha256:")}
	return r
}

// ChartResource is the helmChart resource of an artifact whose chart was pushed to ref (see PushHelmChart).
func ChartResource(version, ref string) Resource {
	return Resource{Name: "chart", Version: version, Type: "helmChart", Access: ociArtifactAccess(ref)}
}

// BundleResource is the kustomize resource of an artifact whose bundle was pushed to ref (see
// PushKustomizeBundle).
func BundleResource(version, ref string) Resource {
	return Resource{Name: "bundle", Version: version, Type: "kustomize", Access: ociArtifactAccess(ref)}
}

func ociArtifactAccess(ref string) map[string]string {
	return map[string]string{"type": "ociArtifact", "imageReference": ref}
}
