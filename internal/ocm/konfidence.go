package ocm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/signing"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/spec"
)

// Resource types by which Konfidence marks an artifact's deployment metadata.
const (
	ResourceTypeArtifactManifest = "cloud.konfidence.artifact.manifest"
	ResourceTypeTaskManifest     = "cloud.konfidence.artifact.task.manifest"
)

// Vector is a resolved vector: a component version whose component references are the artifacts to deploy.
// Values returned by a Client may be shared with its cache and must not be modified.
type Vector struct {
	Component string
	Version   string
	// Digest is the vector's manifest (or index) digest.
	Digest string
	// Artifacts are the vector's component references, in the descriptor's order, each read or failed.
	Artifacts []ReferencedArtifact

	// What VerifyVector checks, kept in place of the descriptor: the component references with the digests that
	// pin the artifacts (aligned with References), and the signatures with the descriptor's digests (nil when
	// the vector is unsigned, or signedErr when they cannot be read).
	refs      []spec.Reference
	signed    *signing.Signed
	signedErr error
}

// ReferencedArtifact is one component reference of a vector and what reading it gave.
type ReferencedArtifact struct {
	// Ref is the reference as component:version.
	Ref string
	// Component is the referenced component's name, also when the artifact failed.
	Component string
	// Artifact is nil when the artifact failed, and Err says why.
	Artifact *Artifact
	Err      error
}

// Artifact is a resolved artifact component version.
type Artifact struct {
	Component string
	Version   string
	// Digest is the artifact's manifest (or index) digest.
	Digest string
	// Source is where the artifact was read from and what exactly: an OCM reference pinned by Digest, with the
	// repository spelled one way whatever the vector's reference said (see Ref.Pinned).
	Source string
	// Type is the deployer type from the artifact manifest, e.g. cloud.konfidence.flux.helm.
	Type string
	// AllowReuse says whether VectorDeployments may share one ArtifactDeployment of this artifact.
	AllowReuse bool
	Tasks      []Task
	// Resources are every resource except the manifests, for the deployer to interpret.
	Resources []Resource

	// What VerifyVector checks, kept in place of the descriptor: the manifest resources (checked beside
	// Resources), and the descriptor's digests under the algorithms signed vectors pin it by.
	manifests  []Resource
	normalised map[digestAlgorithms]digestOutcome
}

// digestAlgorithms names how a component reference's digest is computed.
type digestAlgorithms struct{ normalisation, hash string }

func algorithmsOf(d *spec.Digest) digestAlgorithms {
	return digestAlgorithms{normalisation: d.NormalisationAlgorithm, hash: d.HashAlgorithm}
}

// digestOutcome is a descriptor's digest under one pair of algorithms, or why it has none.
type digestOutcome struct {
	value string
	err   error
}

// Task is a cloud.konfidence.artifact.task.manifest local blob.
type Task struct {
	Name      string          `json:"name"`
	Type      string          `json:"type"`
	DependsOn []string        `json:"dependsOn,omitempty"`
	Spec      json.RawMessage `json:"spec,omitempty"`
}

// Resource is a resource forwarded to the deployer.
type Resource struct {
	Name string
	Type string
	// Access is the resource's access specification in canonical JSON (sorted keys, no insignificant
	// whitespace), as OCM's runtime.Raw keeps it, so equal accesses compare equal whatever the descriptor's
	// encoding.
	Access json.RawMessage
	// Digest is the resource's content digest ("sha256:<hex>") when the descriptor records one a deployer can
	// pin an OCI artifact by: the blob digest (genericBlobDigest/v1, which OCM writes for OCI artifacts as the
	// manifest digest) or ociArtifactDigest/v1.
	Digest string

	// recorded is the digest as the descriptor records it, for VerifyVector.
	recorded *spec.Digest
}

// artifactManifest is the cloud.konfidence.artifact.manifest local blob.
type artifactManifest struct {
	Type       string `json:"type"`
	AllowReuse bool   `json:"allowReuse"`
}

// ResolveVector resolves a vector reference and its artifacts, each looked up in the vector's repository
// (Konfidence copies artifacts there before publishing a vector). Versions are immutable, so results are
// cached; aliases such as "latest" are re-read every time.
//
// One artifact failing does not fail the others: the vector comes back with that artifact's entry failed, with its
// reason, together with an error joining every artifact failure. A nil vector means the vector itself could not be
// read, or that an artifact's resource names a host outside Options.AllowedHosts (RegistryNotAllowed).
func (c *Client) ResolveVector(ctx context.Context, ref string, read Read) (*Vector, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	if err := c.allowed(r); err != nil {
		return nil, err
	}
	a, err := c.access(ctx, r, read.Credentials)
	if err != nil {
		return nil, err
	}
	key := cacheKey(r, a)
	cached, ok := c.vectors.get(key, read.BypassCache)
	if ok && !read.Revalidate {
		return cached, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	if !r.IsCTF() {
		release, err := c.slots(ctx, read, r.Host(), r.Describe())
		if err != nil {
			return nil, err
		}
		defer release()
	}
	if ok {
		digest, err := c.taggedDigest(ctx, r, a)
		if err != nil {
			return nil, a.explain(err)
		}
		if digest == cached.Digest {
			return cached, nil
		}
	}
	cv, err := c.readComponentVersion(ctx, r, a)
	if err != nil {
		return nil, a.explain(err)
	}
	refs := slices.Clone(cv.descriptor.Component.References) // of exactly its length, as the vector keeps it
	if len(refs) > c.opts.MaxReferences {
		return nil, newError(ReasonTooManyReferences, r.Describe(), "the vector references %d components, at most %d are read", len(refs), c.opts.MaxReferences)
	}
	v := &Vector{
		Component: cv.descriptor.Component.Name,
		Version:   cv.descriptor.Component.Version,
		Digest:    cv.digest,
		Artifacts: make([]ReferencedArtifact, len(refs)),
		refs:      refs,
	}
	if len(cv.descriptor.Signatures) > 0 {
		// Only a signed vector can pass VerifyVector, so only for one are the digests computed, and they are
		// computed now, while the descriptors are at hand, in a decode slot: normalising costs what decoding does.
		if err := decodeBounded(ctx, r.Describe(), "signatures", func() error {
			v.signed, v.signedErr = signing.Prepare(cv.doc)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	var g errgroup.Group // no shared context: one artifact's failure must not cancel the others
	g.SetLimit(c.opts.Concurrency)
	for i, cref := range refs {
		entry := &v.Artifacts[i]
		entry.Ref, entry.Component = cref.ComponentName+":"+cref.Version, cref.ComponentName
		ar, err := r.sibling(cref.ComponentName, cref.Version)
		if err != nil {
			entry.Err = err
			continue
		}
		var pin *spec.Digest // the digest VerifyVector will check the artifact against
		if v.signed != nil && cref.Digest != nil {
			pin = cref.Digest
		}
		g.Go(func() error {
			entry.Artifact, entry.Err = c.resolveArtifact(ctx, ar, a, pin, read.BypassCache)
			entry.Err = a.explain(entry.Err)
			return nil
		})
	}
	_ = g.Wait() // the goroutines report through the entries
	if err := c.allowedAccesses(v); err != nil {
		return nil, err
	}
	if err := v.artifactErrors(); err != nil {
		return v, err // not cached: a retry may heal a transient failure
	}
	if isVersion(r.Version) {
		c.vectors.add(key, v)
	}
	return v, nil
}

// artifactErrors joins the failures of the vector's artifacts.
func (v *Vector) artifactErrors() error {
	errs := make([]error, len(v.Artifacts))
	for i, a := range v.Artifacts {
		errs[i] = a.Err
	}
	return errors.Join(errs...)
}

// resolveArtifact reads an artifact in the vector's repository, with the vector's access. With pin, the artifact
// carries its descriptor's digest under pin's algorithms; a cached one without it is read again.
func (c *Client) resolveArtifact(ctx context.Context, r Ref, acc access, pin *spec.Digest, bypassCache bool) (*Artifact, error) {
	key := cacheKey(r, acc)
	cached, ok := c.artifacts.get(key, bypassCache)
	if ok && (pin == nil || cached.hasDigest(pin)) {
		return cached, nil
	}
	cv, err := c.readComponentVersion(ctx, r, acc)
	if err != nil {
		return nil, err
	}
	a := &Artifact{
		Component: cv.descriptor.Component.Name, Version: cv.descriptor.Component.Version,
		Digest: cv.digest, Source: r.Pinned(cv.digest),
	}
	if pin != nil {
		if err := c.normalise(ctx, r, cv, a, cached, pin); err != nil {
			return nil, err
		}
	}
	manifests := 0
	for _, res := range cv.descriptor.Component.Resources {
		switch res.Type {
		case ResourceTypeArtifactManifest:
			if manifests++; manifests > 1 {
				return nil, newError(ReasonManifestDuplicated, r.Describe(), "more than one resource of type %s", ResourceTypeArtifactManifest)
			}
			var m artifactManifest
			if err := c.decodeManifest(ctx, cv, res, &m); err != nil {
				return nil, err
			}
			if m.Type == "" {
				return nil, newError(ReasonManifestInvalid, r.Describe(), "resource %s: manifest has no type", res.Name)
			}
			a.Type, a.AllowReuse = m.Type, m.AllowReuse
			a.manifests = append(a.manifests, Resource{Name: res.Name, Type: res.Type, Access: res.Access, recorded: res.Digest})
		case ResourceTypeTaskManifest:
			var t Task
			if err := c.decodeManifest(ctx, cv, res, &t); err != nil {
				return nil, err
			}
			if t.Name == "" || t.Type == "" {
				return nil, newError(ReasonManifestInvalid, r.Describe(), "resource %s: task manifest needs a name and a type", res.Name)
			}
			a.Tasks = append(a.Tasks, t)
			a.manifests = append(a.manifests, Resource{Name: res.Name, Type: res.Type, Access: res.Access, recorded: res.Digest})
		default:
			// The access is kept in one form, which both the deployer and VerifyVector read.
			access, err := canonicalJSON(res.Access)
			if err != nil {
				return nil, newError(ReasonDescriptorInvalid, r.Describe(), "resource %s: %v", res.Name, err)
			}
			a.Resources = append(a.Resources, Resource{Name: res.Name, Type: res.Type, Access: access, Digest: contentDigest(res.Digest), recorded: res.Digest})
		}
	}
	if manifests == 0 {
		return nil, newError(ReasonManifestMissing, r.Describe(), "no resource of type %s", ResourceTypeArtifactManifest)
	}
	// Copies of exactly their length: append may have doubled the capacity, which a cached artifact would keep.
	a.Tasks, a.Resources, a.manifests = slices.Clone(a.Tasks), slices.Clone(a.Resources), slices.Clone(a.manifests)
	if isVersion(r.Version) {
		c.artifacts.add(key, a)
	}
	return a, nil
}

// normalise records in a the descriptor's digest under pin's algorithms, beside those a cached copy of the same
// artifact carries, in a decode slot: normalising costs what decoding does.
func (c *Client) normalise(ctx context.Context, r Ref, cv *componentVersion, a, cached *Artifact, pin *spec.Digest) error {
	a.normalised = map[digestAlgorithms]digestOutcome{}
	if cached != nil && cached.Digest == a.Digest {
		maps.Copy(a.normalised, cached.normalised)
	}
	return decodeBounded(ctx, r.Describe(), "normalised descriptor", func() error {
		value, err := signing.Digest(cv.doc, pin.NormalisationAlgorithm, pin.HashAlgorithm)
		a.normalised[algorithmsOf(pin)] = digestOutcome{value: value, err: err}
		return nil
	})
}

// hasDigest reports whether the artifact carries its descriptor's digest under pin's algorithms.
func (a *Artifact) hasDigest(pin *spec.Digest) bool {
	_, ok := a.normalised[algorithmsOf(pin)]
	return ok
}

func (c *Client) decodeManifest(ctx context.Context, cv *componentVersion, res spec.Resource, into any) error {
	data, err := c.localBlob(ctx, cv, res)
	if err != nil {
		return err
	}
	// The task spec goes to the ArtifactDeployment as written: it must read the same whoever reads it.
	if err := spec.UniqueKeys(data); err != nil {
		return newError(ReasonManifestInvalid, cv.ref.String(), "resource %s: %v", res.Name, err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		return newError(ReasonManifestInvalid, cv.ref.Describe(), "resource %s: %v", res.Name, err)
	}
	return nil
}

// canonicalJSON re-encodes an access with encoding/json: generic values encode with sorted keys and without
// insignificant whitespace, so equal accesses give equal bytes whatever the descriptor's spelling. That is all the
// ArtifactDeployment spec comparison needs; RFC 8785 (JCS) is not, since nothing hashes or signs these bytes for
// another implementation to reproduce, so no JCS library.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil || v == nil {
		return nil, fmt.Errorf("access is missing or not JSON")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	// A copy of exactly its length: the buffer may have twice the capacity, which a cached artifact would keep.
	return bytes.Clone(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// cacheKey identifies a component version across spellings of its repository (the scheme matters only as plain
// HTTP versus TLS, and a CTF by its absolute path) together with the credential it is read with: what one
// credential may read is served from the cache only to reads presenting the same credential.
func cacheKey(r Ref, a access) string {
	return strings.Join([]string{r.Pinned(r.Digest), a.id}, "\x00")
}
