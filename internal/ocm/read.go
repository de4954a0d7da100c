package ocm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/semaphore"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/spec"
)

// componentVersion is a component version as read from its repository.
type componentVersion struct {
	ref        Ref
	store      store
	digest     string // of the tagged manifest or index
	descriptor *spec.Descriptor
	// doc is the descriptor's document as JSON, which digests and signatures are computed over. It is not kept
	// past the read: what verification needs of it is derived from it while it is at hand.
	doc []byte
	// blobs are the candidates for a localReference: the index's manifests and the manifest's layers.
	blobs []ocispec.Descriptor
}

// readComponentVersion implements OCM's read algorithm: resolve the tag to a manifest or index, find the
// descriptor layer through the config, and decode it by its media type.
func (c *Client) readComponentVersion(ctx context.Context, r Ref, a access) (*componentVersion, error) {
	if r.Version == "" {
		return nil, newError(ReasonReferenceInvalid, r.Describe(), "no version")
	}
	s, err := c.store(r, a)
	if err != nil {
		return nil, err
	}
	desc, rc, err := s.FetchReference(ctx, spec.VersionTag(r.Version))
	if err != nil {
		return nil, classify(r.Describe(), err)
	}
	data, err := c.readVerified(r.Describe(), rc, desc, c.opts.MaxManifestSize)
	if err != nil {
		return nil, err
	}
	cv := &componentVersion{ref: r, store: s, digest: desc.Digest.String()}
	if desc.MediaType == ocispec.MediaTypeImageIndex {
		var index ocispec.Index
		if err := decodeBounded(ctx, r.Describe(), "index", func() error { return json.Unmarshal(data, &index) }); err != nil {
			return nil, err
		}
		if len(index.Manifests) == 0 || index.Manifests[0].MediaType != ocispec.MediaTypeImageManifest {
			return nil, newError(ReasonUnsupportedMediaType, r.Describe(), "index does not start with an OCI image manifest")
		}
		cv.blobs = index.Manifests
		if data, err = c.fetch(ctx, cv, index.Manifests[0], c.opts.MaxManifestSize); err != nil {
			return nil, err
		}
	} else if desc.MediaType != ocispec.MediaTypeImageManifest {
		return nil, newError(ReasonUnsupportedMediaType, r.Describe(), "manifest media type %q", desc.MediaType)
	}
	var manifest ocispec.Manifest
	if err := decodeBounded(ctx, r.Describe(), "manifest", func() error { return json.Unmarshal(data, &manifest) }); err != nil {
		return nil, err
	}
	cv.blobs = append(cv.blobs, manifest.Layers...)

	layer, err := c.descriptorLayer(ctx, cv, manifest)
	if err != nil {
		return nil, err
	}
	if data, err = c.fetch(ctx, cv, layer, c.opts.MaxDescriptorSize); err != nil {
		return nil, err
	}
	var (
		d   *spec.Descriptor
		doc []byte
	)
	err = decodeBounded(ctx, r.Describe(), "component descriptor", func() (err error) {
		d, doc, err = spec.Decode(layer.MediaType, data)
		return err
	})
	switch {
	case errors.Is(err, spec.ErrUnsupportedMediaType):
		return nil, &Error{Reason: ReasonUnsupportedMediaType, Ref: r.Describe(), Err: err}
	case err != nil:
		return nil, err
	case d.Component.Name != r.Component || d.Component.Version != r.Version:
		// A tag is only a pointer: were the descriptor's own name and version taken as they say, any tag could
		// publish content under another version's (or component's) name, and the ArtifactDeployment named after it.
		// The claims are cut to the longest valid name and version: they are the publisher's, of any length.
		return nil, newError(ReasonDescriptorMismatch, r.Describe(), "descriptor is for %.255s:%.128s", d.Component.Name, d.Component.Version)
	}
	cv.descriptor, cv.doc = d, doc
	return cv, nil
}

// taggedDigest resolves r's version tag to the digest of the manifest or index it points at, with one request,
// and reads nothing more: the body is not read, the digest being the response's.
func (c *Client) taggedDigest(ctx context.Context, r Ref, a access) (string, error) {
	s, err := c.store(r, a)
	if err != nil {
		return "", err
	}
	desc, rc, err := s.FetchReference(ctx, spec.VersionTag(r.Version))
	if err != nil {
		return "", classify(r.Describe(), err)
	}
	_ = rc.Close() // nothing of it is needed
	return desc.Digest.String(), nil
}

// maxConcurrentDecodes bounds the manifest and descriptor decodes running at once in the process, across Clients
// and reconcilers. At the size limits one decode costs up to ~30 MiB of heap (docs/security.md), so decoding
// stays below 64 MiB whatever number of registries, vectors and workers; decoding is CPU-bound, so more slots
// than the two cores the operator is sized for would not finish it sooner.
const maxConcurrentDecodes = 2

var decodeSlots = semaphore.NewWeighted(maxConcurrentDecodes)

// decodeBounded runs decode in one of the process's decode slots, waiting for one as long as ctx allows. A decode
// error is DescriptorInvalid, naming what was decoded.
func decodeBounded(ctx context.Context, ref, what string, decode func() error) error {
	if err := decodeSlots.Acquire(ctx, 1); err != nil {
		return &Error{Reason: ReasonUnavailable, Ref: ref, Err: fmt.Errorf("waiting to decode the %s: %w", what, err)}
	}
	defer decodeSlots.Release(1)
	if err := decode(); err != nil {
		if errors.Is(err, spec.ErrUnsupportedMediaType) {
			return err
		}
		return newError(ReasonDescriptorInvalid, ref, "decoding %s: %v", what, err)
	}
	return nil
}

// descriptorLayer reads the config's componentDescriptorLayer; its media type, not the layer entry's, says how
// to decode. Configs without it fall back to the first layer, where every writer puts the descriptor.
func (c *Client) descriptorLayer(ctx context.Context, cv *componentVersion, m ocispec.Manifest) (ocispec.Descriptor, error) {
	data, err := c.fetch(ctx, cv, m.Config, c.opts.MaxManifestSize)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	var cfg spec.ComponentConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return ocispec.Descriptor{}, newError(ReasonDescriptorInvalid, cv.ref.Describe(), "decoding config: %v", err)
	}
	switch {
	case cfg.ComponentDescriptorLayer != nil:
		return *cfg.ComponentDescriptorLayer, nil
	case len(m.Layers) > 0:
		return m.Layers[0], nil
	}
	return ocispec.Descriptor{}, newError(ReasonDescriptorInvalid, cv.ref.Describe(), "manifest has no descriptor layer")
}

// localBlob reads a resource stored in the component version itself.
func (c *Client) localBlob(ctx context.Context, cv *componentVersion, res spec.Resource) ([]byte, error) {
	var access spec.LocalBlobAccess
	if err := json.Unmarshal(res.Access, &access); err != nil || !spec.IsLocalBlobType(access.Type) {
		return nil, newError(ReasonDescriptorInvalid, cv.ref.Describe(), "resource %s: access is not a local blob", res.Name)
	}
	for _, b := range cv.blobs {
		if b.Digest.String() == access.LocalReference {
			return c.fetch(ctx, cv, b, c.opts.MaxBlobSize)
		}
	}
	return nil, newError(ReasonNotFound, cv.ref.Describe(), "resource %s: local blob %s is not part of the component version", res.Name, access.LocalReference)
}

// fetch reads a blob of at most limit bytes.
func (c *Client) fetch(ctx context.Context, cv *componentVersion, desc ocispec.Descriptor, limit int64) ([]byte, error) {
	ref := fmt.Sprintf("%s (blob %s)", cv.ref, desc.Digest)
	// Refusing by the advertised size first spares the download; readVerified still enforces the cap.
	if desc.Size > limit {
		return nil, newError(ReasonBlobTooLarge, ref, "%d bytes exceed the limit of %d for a %s", desc.Size, limit, blobKind(desc))
	}
	rc, err := cv.store.Fetch(ctx, desc)
	if err != nil {
		return nil, classify(ref, err)
	}
	return c.readVerified(ref, rc, desc, limit)
}

// blobKind names what a blob is for, in messages.
func blobKind(desc ocispec.Descriptor) string {
	switch {
	case spec.IsDescriptorMediaType(desc.MediaType):
		return "component descriptor"
	case desc.MediaType == ocispec.MediaTypeImageManifest, desc.MediaType == ocispec.MediaTypeImageIndex,
		desc.MediaType == spec.MediaTypeComponentConfig:
		return "manifest"
	}
	return "blob"
}

// readVerified reads at most limit bytes and checks them against the descriptor: registries and CTFs are
// content-addressed, so bytes that do not hash to their digest are corrupt or tampered with.
func (c *Client) readVerified(ref string, rc io.ReadCloser, desc ocispec.Descriptor, limit int64) ([]byte, error) {
	defer func() { _ = rc.Close() }() // everything needed was read, or the read failed
	if desc.Size > limit {
		return nil, newError(ReasonBlobTooLarge, ref, "%d bytes exceed the limit of %d for a %s", desc.Size, limit, blobKind(desc))
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(rc, limit+1))
	switch {
	case err != nil:
		return nil, classify(ref, err)
	case n > limit:
		return nil, newError(ReasonBlobTooLarge, ref, "more than %d bytes, the limit for a %s", limit, blobKind(desc))
	case desc.Size >= 0 && n != desc.Size:
		return nil, newError(ReasonDigestMismatch, ref, "got %d bytes, want %d", n, desc.Size)
	}
	if err := desc.Digest.Validate(); err != nil {
		return nil, newError(ReasonDigestMismatch, ref, "invalid digest: %v", err)
	}
	if got := desc.Digest.Algorithm().FromBytes(buf.Bytes()); got != desc.Digest {
		return nil, newError(ReasonDigestMismatch, ref, "content hashes to %s", got)
	}
	return buf.Bytes(), nil
}
