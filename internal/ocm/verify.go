package ocm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/signing"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/spec"
)

// TrustPolicy says what a vector must carry to be deployed: signatures verified by these keys.
type TrustPolicy struct {
	// Keys are the trusted public keys or certificates by signature name (signing.AnyName for any).
	Keys signing.Keys
	// Signatures name the signatures that must be present and valid; empty means every signature with a key must
	// verify, and at least one must.
	Signatures []string
}

// rawDescriptor is a descriptor layer as stored.
type rawDescriptor struct {
	mediaType string
	data      []byte
}

func (d rawDescriptor) json() ([]byte, error) { return spec.DescriptorJSON(d.mediaType, d.data) }

// VerifyVector checks a resolved vector against a trust policy, transitively: the vector's signatures, each
// artifact's normalised descriptor against the digest of the vector's componentReference that pins it, and each
// artifact resource's digest against the content it names (a local blob's reference, an OCI artifact's manifest
// digest in its registry). Artifacts that failed to resolve are skipped: they fail on their own and are not
// deployed. The outcome is cached by the content digests of the vector and its artifacts and by the policy;
// a moved tag of an OCI resource is then not noticed again, which is harmless since deployers pin the digest.
func (c *Client) VerifyVector(ctx context.Context, v *Vector, policy TrustPolicy) error {
	key := verificationKey(v, policy)
	if _, ok := c.verified.get(ctx, key); ok {
		return nil
	}
	complete, err := c.verifyVector(ctx, v, policy)
	switch {
	case err != nil:
		// A failure found while bypassing the cache (a reconcile request) replaces an earlier success, so the
		// retries that follow do not report the vector verified again.
		c.verified.remove(key)
	case complete:
		c.verified.add(key, struct{}{})
	}
	return err
}

// verifyVector does VerifyVector's checks; complete is false when an artifact was skipped.
func (c *Client) verifyVector(ctx context.Context, v *Vector, policy TrustPolicy) (complete bool, err error) {
	name := v.Component + ":" + v.Version
	doc, err := v.descriptor.json()
	if err != nil {
		return false, &Error{Reason: ReasonDescriptorInvalid, Ref: name, Err: err}
	}
	if _, err := signing.Verify(doc, policy.Signatures, policy.Keys); err != nil {
		return false, signatureError(name, err)
	}
	var d spec.Descriptor
	if err := json.Unmarshal(doc, &d); err != nil || len(d.Component.References) != len(v.Artifacts) {
		return false, newError(ReasonDescriptorInvalid, name, "component references do not match the resolved vector")
	}
	complete = true
	for i, ref := range d.Component.References {
		a := v.Artifacts[i]
		if a == nil {
			complete = false
			continue
		}
		if err := verifyReference(ref, a); err != nil {
			return false, err
		}
		if err := c.verifyResources(ctx, a); err != nil {
			return false, err
		}
	}
	return complete, nil
}

func signatureError(ref string, err error) error {
	reason := ReasonSignatureInvalid
	if errors.Is(err, signing.ErrSignatureMissing) {
		reason = ReasonSignatureMissing
	}
	return &Error{Reason: reason, Ref: ref, Err: err}
}

// verifyReference compares the digest the vector pins an artifact with to the artifact's normalised descriptor.
func verifyReference(ref spec.Reference, a *Artifact) error {
	name := a.Component + ":" + a.Version
	if ref.Digest == nil || ref.Digest.Value == "" {
		return newError(ReasonDigestMismatch, name, "the vector's reference %s carries no digest, so the signature does not cover the artifact", ref.Name)
	}
	doc, err := a.descriptor.json()
	if err != nil {
		return &Error{Reason: ReasonDescriptorInvalid, Ref: name, Err: err}
	}
	got, err := signing.Digest(doc, ref.Digest.NormalisationAlgorithm, ref.Digest.HashAlgorithm)
	if err != nil {
		return newError(ReasonDigestMismatch, name, "reference %s: %v", ref.Name, err)
	}
	if got != ref.Digest.Value {
		return newError(ReasonDigestMismatch, name, "the artifact's normalised descriptor hashes to %s, the vector pins %s", got, ref.Digest.Value)
	}
	return nil
}

// verifyResources checks each resource's digest against what its access names. The signature covers digests,
// not accesses, so a resource without a digest would deploy unverified content: it is refused.
func (c *Client) verifyResources(ctx context.Context, a *Artifact) error {
	name := a.Component + ":" + a.Version
	doc, err := a.descriptor.json()
	if err != nil {
		return &Error{Reason: ReasonDescriptorInvalid, Ref: name, Err: err}
	}
	var d spec.Descriptor
	if err := json.Unmarshal(doc, &d); err != nil {
		return &Error{Reason: ReasonDescriptorInvalid, Ref: name, Err: err}
	}
	for _, res := range d.Component.Resources {
		if err := c.verifyResource(ctx, res); err != nil {
			return &Error{Reason: ReasonDigestMismatch, Ref: name, Err: fmt.Errorf("resource %s: %w", res.Name, err)}
		}
	}
	return nil
}

func (c *Client) verifyResource(ctx context.Context, res spec.Resource) error {
	var access struct {
		Type           string `json:"type"`
		LocalReference string `json:"localReference"`
		ImageReference string `json:"imageReference"`
	}
	if err := json.Unmarshal(res.Access, &access); err != nil {
		return fmt.Errorf("access: %w", err)
	}
	if access.Type == "none" || access.Type == "None" {
		return nil // nothing to fetch, nothing to deploy
	}
	want := contentDigest(res.Digest)
	switch {
	case res.Digest == nil:
		return errors.New("no digest: the signature does not cover its content")
	case res.Digest.HashAlgorithm == spec.HashNoDigest || res.Digest.NormalisationAlgorithm == spec.NormalisationExcludeFromSignature:
		return errors.New("excluded from the signature")
	case want == "":
		return fmt.Errorf("digest %s/%s cannot be checked (SHA-256 blob or OCI artifact digests can)", res.Digest.HashAlgorithm, res.Digest.NormalisationAlgorithm)
	case spec.IsLocalBlobType(access.Type):
		// The blob's bytes are checked against localReference wherever they are fetched (content addressing).
		if access.LocalReference != want {
			return fmt.Errorf("local blob %s, digest %s", access.LocalReference, want)
		}
		return nil
	case isOCIAccessType(access.Type):
		got, err := c.manifestDigest(ctx, access.ImageReference)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%s has manifest digest %s, the descriptor records %s", access.ImageReference, got, want)
		}
		return nil
	}
	return fmt.Errorf("an access of type %q cannot be checked against its digest", access.Type)
}

// contentDigest returns a resource digest as an OCI digest, or "" unless it is a SHA-256 digest of a blob or of an
// OCI artifact's manifest.
func contentDigest(d *spec.Digest) string {
	if d == nil || d.HashAlgorithm != spec.HashAlgorithmSHA256 ||
		(d.NormalisationAlgorithm != spec.NormalisationGenericBlobDigest && d.NormalisationAlgorithm != spec.NormalisationOCIArtifactDigest) {
		return ""
	}
	if b, err := hex.DecodeString(d.Value); err != nil || len(b) != sha256.Size {
		return ""
	}
	return "sha256:" + d.Value
}

// isOCIAccessType reports whether an access type is OCM's OCI artifact access, by any of its aliases.
func isOCIAccessType(t string) bool {
	name, version, _ := strings.Cut(t, "/")
	return slices.Contains([]string{"OCIImage", "ociImage", "ociArtifact", "ociRegistry"}, name) && (version == "" || version == "v1")
}

// manifestDigest resolves an OCM imageReference ([http://|https://|oci://]host/repo[:tag][@digest]) to the digest
// of the manifest it names in its registry.
func (c *Client) manifestDigest(ctx context.Context, imageReference string) (string, error) {
	rest, plainHTTP := strings.CutPrefix(imageReference, "http://")
	rest = strings.TrimPrefix(strings.TrimPrefix(rest, "https://"), "oci://")
	name, digest, pinned := strings.Cut(rest, "@")
	ref, err := registry.ParseReference(name)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", imageReference, err)
	}
	if pinned {
		ref.Reference = digest
	}
	repo := &remote.Repository{Client: c.http, Reference: ref, PlainHTTP: plainHTTP}
	desc, err := repo.Resolve(ctx, ref.Reference)
	if err != nil {
		return "", classify(imageReference, err)
	}
	return desc.Digest.String(), nil
}

// verificationKey identifies a verification by content: the digests of the vector's and artifacts' manifests
// (which pin their descriptors), the required names and the trusted keys.
func verificationKey(v *Vector, policy TrustPolicy) string {
	var b strings.Builder
	b.WriteString(v.Digest + "\n")
	for _, a := range v.Artifacts {
		if a != nil {
			b.WriteString(a.Digest + "\n")
		}
	}
	b.WriteString(strings.Join(policy.Signatures, ",") + "\n")
	for _, name := range slices.Sorted(maps.Keys(policy.Keys)) {
		k := policy.Keys[name]
		b.WriteString(strconv.Quote(name) + " " + hex.EncodeToString(k.PublicKey.N.Bytes()) + " " + hex.EncodeToString(certificateRaw(k)) + "\n")
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

func certificateRaw(k signing.TrustedKey) []byte {
	if k.Certificate == nil {
		return nil
	}
	return k.Certificate.Raw
}
