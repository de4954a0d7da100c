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

// VerifyVector checks a resolved vector against a trust policy, transitively: the vector's signatures, each
// artifact's normalised descriptor against the digest of the vector's componentReference that pins it, and each
// artifact resource's digest against the content it names (a local blob's reference, an OCI artifact's manifest
// digest in its registry). Artifacts that failed to resolve are skipped: they fail on their own and are not
// deployed. The outcome is cached by the content digests of the vector and its artifacts, the policy and the
// credentials (Read.Credentials); a moved tag of an OCI resource is then not noticed again, which is harmless since
// deployers pin the digest.
//
// The registries resources name are tenant input like the vector's: they are read under Options.Timeout, within
// the per-namespace and per-host limits, only when Options.AllowedHosts allows them, and with the credentials reads of that host
// present (Read.Credentials, under the same TLS rule). A read that fails keeps its own reason (Unauthorized,
// RegistryUnavailable, ...); DigestMismatch means content and digest disagree, or no digest covers the content.
func (c *Client) VerifyVector(ctx context.Context, v *Vector, policy TrustPolicy, read Read) error {
	key := verificationKey(v, policy, credentialsID(read.Credentials))
	if _, ok := c.verified.get(key, read.BypassCache); ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	complete, err := c.verifyVector(ctx, v, policy, read)
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
func (c *Client) verifyVector(ctx context.Context, v *Vector, policy TrustPolicy, read Read) (complete bool, err error) {
	name := v.Component + ":" + v.Version
	if v.signedErr != nil {
		return false, signatureError(name, fmt.Errorf("%w: %w", signing.ErrSignatureInvalid, v.signedErr))
	}
	if _, err := v.signed.Verify(policy.Signatures, policy.Keys); err != nil {
		return false, signatureError(name, err)
	}
	complete = true
	for i, ref := range v.refs {
		a := v.Artifacts[i].Artifact
		if a == nil {
			complete = false
			continue
		}
		if err := verifyReference(ref, a); err != nil {
			return false, err
		}
		if err := c.verifyResources(ctx, a, read); err != nil {
			return false, err
		}
	}
	return complete, nil
}

func signatureError(ref string, err error) error {
	if errors.Is(err, signing.ErrSignatureMissing) {
		return &Error{Reason: ReasonSignatureMissing, Ref: ref, Err: err}
	}
	return KeyError(ref, err)
}

// KeyError is the error of trusted keys that cannot be used, or of a signature that does not verify: KeyRejected
// when a key is refused (signing.ErrKeyRejected: not RSA, or outside 2048 to 8192 bits), else SignatureInvalid.
func KeyError(ref string, err error) *Error {
	if errors.Is(err, signing.ErrKeyRejected) {
		return &Error{Reason: ReasonKeyRejected, Ref: ref, Err: err}
	}
	return &Error{Reason: ReasonSignatureInvalid, Ref: ref, Err: err}
}

// verifyReference compares the digest the vector pins an artifact with to the artifact's normalised descriptor.
func verifyReference(ref spec.Reference, a *Artifact) error {
	name := a.Component + ":" + a.Version
	if ref.Digest == nil || ref.Digest.Value == "" {
		return newError(ReasonDigestMismatch, name, "the vector's reference %s carries no digest, so the signature does not cover the artifact", ref.Name)
	}
	got, ok := a.normalised[algorithmsOf(ref.Digest)]
	switch {
	case !ok: // resolveArtifact computes it for every signed vector's pinned reference
		return newError(ReasonDigestMismatch, name, "reference %s: the artifact's %s digest was not computed", ref.Name, ref.Digest.NormalisationAlgorithm)
	case got.err != nil:
		return newError(ReasonDigestMismatch, name, "reference %s: %v", ref.Name, got.err)
	case got.value != ref.Digest.Value:
		return newError(ReasonDigestMismatch, name, "the artifact's normalised descriptor hashes to %s, the vector pins %s", got.value, ref.Digest.Value)
	}
	return nil
}

// verifyResources checks each resource's digest against what its access names, reading the access deployers are
// given. The signature covers digests, not accesses, so a resource without a digest would deploy unverified
// content: it is refused.
func (c *Client) verifyResources(ctx context.Context, a *Artifact, read Read) error {
	name := a.Component + ":" + a.Version
	for _, res := range slices.Concat(a.manifests, a.Resources) {
		if err := c.verifyResource(ctx, res, read); err != nil {
			var e *Error
			errors.As(err, &e) // verifyResource returns only *Error
			cause := fmt.Errorf("resource %s: %w", res.Name, e.Err)
			if e.Ref != "" {
				cause = fmt.Errorf("resource %s: %s: %w", res.Name, e.Ref, e.Err)
			}
			return &Error{Reason: e.Reason, Ref: name, Err: cause}
		}
	}
	return nil
}

// verifyResource checks one resource. Its errors are *Error, mismatches without Ref.
func (c *Client) verifyResource(ctx context.Context, res Resource, read Read) error {
	mismatch := func(format string, args ...any) error {
		return &Error{Reason: ReasonDigestMismatch, Err: fmt.Errorf(format, args...)}
	}
	var access struct {
		Type           string `json:"type"`
		LocalReference string `json:"localReference"`
		ImageReference string `json:"imageReference"`
	}
	if err := json.Unmarshal(res.Access, &access); err != nil {
		return mismatch("access: %w", err)
	}
	if access.Type == "none" || access.Type == "None" {
		return nil // nothing to fetch, nothing to deploy
	}
	want := contentDigest(res.recorded)
	switch {
	case res.recorded == nil:
		return mismatch("no digest: the signature does not cover its content")
	case res.recorded.HashAlgorithm == spec.HashNoDigest || res.recorded.NormalisationAlgorithm == spec.NormalisationExcludeFromSignature:
		return mismatch("excluded from the signature")
	case want == "":
		return mismatch("digest %s/%s cannot be checked (SHA-256 blob or OCI artifact digests can)", res.recorded.HashAlgorithm, res.recorded.NormalisationAlgorithm)
	case spec.IsLocalBlobType(access.Type):
		// The blob's bytes are checked against localReference wherever they are fetched (content addressing).
		if access.LocalReference != want {
			return mismatch("local blob %s, digest %s", access.LocalReference, want)
		}
		return nil
	case isOCIAccessType(access.Type):
		got, err := c.manifestDigest(ctx, access.ImageReference, read)
		if err != nil {
			return err
		}
		if got != want {
			return mismatch("%s has manifest digest %s, the descriptor records %s", access.ImageReference, got, want)
		}
		return nil
	}
	return mismatch("an access of type %q cannot be checked against its digest", access.Type)
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

// isHelmAccessType reports whether an access type is OCM's Helm repository access, by any of its aliases.
func isHelmAccessType(t string) bool {
	name, version, _ := strings.Cut(t, "/")
	return (name == "Helm" || name == "helm") && (version == "" || version == "v1")
}

// parseImageReference reads an OCM imageReference ([http://|https://|oci://]host/repo[:tag][@digest]): the
// reference, selecting the digest when it names one, and whether the registry is read over plain HTTP.
func parseImageReference(imageReference string) (ref registry.Reference, plainHTTP bool, err error) {
	rest, plainHTTP := strings.CutPrefix(imageReference, "http://")
	rest = strings.TrimPrefix(strings.TrimPrefix(rest, "https://"), "oci://")
	name, digest, pinned := strings.Cut(rest, "@")
	if ref, err = registry.ParseReference(name); err != nil {
		return registry.Reference{}, false, fmt.Errorf("image reference %q: %w", imageReference, err)
	}
	if pinned {
		ref.Reference = digest
	}
	return ref, plainHTTP, nil
}

// manifestDigest resolves an OCM imageReference ([http://|https://|oci://]host/repo[:tag][@digest]) to the digest
// of the manifest it names in its registry, as a read of that registry: allowed host, namespace and host slots, the
// credentials for the host under the TLS rule.
func (c *Client) manifestDigest(ctx context.Context, imageReference string, read Read) (string, error) {
	ref, plainHTTP, err := parseImageReference(imageReference)
	if err != nil {
		return "", &Error{Reason: ReasonDigestMismatch, Ref: imageReference, Err: err}
	}
	if err := c.allowedHost(ref.Registry, imageReference); err != nil {
		return "", err
	}
	a, err := c.hostAccess(ctx, ref.Registry, plainHTTP, imageReference, read.Credentials)
	if err != nil {
		return "", err
	}
	release, err := c.slots(ctx, read, ref.Registry, imageReference)
	if err != nil {
		return "", err
	}
	defer release()
	repo := &remote.Repository{Client: c.authClient(a), Reference: ref, PlainHTTP: plainHTTP}
	desc, err := repo.Resolve(ctx, ref.Reference)
	if err != nil {
		return "", a.explain(classify(imageReference, err))
	}
	return desc.Digest.String(), nil
}

// verificationKey identifies a verification by content: the digests of the vector's and artifacts' manifests
// (which pin their descriptors), the required names and the trusted keys; and by the credentials it read with.
func verificationKey(v *Vector, policy TrustPolicy, credentials string) string {
	var b strings.Builder
	b.WriteString(credentials + "\n" + v.Digest + "\n")
	for _, a := range v.Artifacts {
		if a.Artifact != nil {
			b.WriteString(a.Artifact.Digest + "\n")
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
