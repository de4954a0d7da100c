// Package ocm reads Konfidence vectors and artifacts, which are OCM component versions, from OCI registries
// and CTF directories. It is the only place in fluxdeployer that knows OCM's wire format; everything else sees
// Vector and Artifact.
//
// The OCM Go modules cannot be used here, so the package implements the parts of the format it needs on
// oras-go: component references (ParseRef, as OCM's compref), the OCI mapping of component versions (tag =
// version with '+' → ".build-", a manifest or an index whose first manifest is the descriptor's, the config's
// componentDescriptorLayer, JSON/YAML/tar descriptor encodings including Gardener's legacy ones), local blobs
// (digest-verified) and CTF directories. Subpackage spec holds the document and media type definitions shared
// with the fixture writer in subpackage ocmtest.
//
// On top sit Konfidence's conventions: a vector's componentReferences are its artifacts, resolved in the
// vector's repository; an artifact carries exactly one cloud.konfidence.artifact.manifest local blob
// ({type, allowReuse}), any number of cloud.konfidence.artifact.task.manifest blobs, and other resources whose
// access is forwarded verbatim to the deployer.
//
// Registries are tenant input. What is read is bounded (per-kind size limits, YAML parsed only under YAML media
// types, documents refused when an object has a key twice or in two cases, at most two decodes at once in the
// process), credentials go over TLS only unless a host is allowed in clear, reads under different credentials share
// no cached result or token, and hosts can be allow-listed and are limited in concurrent reads; the registries
// resource digests are checked in are read under the same rules (docs/security.md). The caches are bounded in
// entries and bytes, and keep the parsed form of what was read, never a descriptor's bytes.
//
// VerifyVector checks a resolved vector against a TrustPolicy: the vector's OCM signatures (subpackage signing:
// descriptor normalisation as OCM defines it, RSA signatures), each artifact's normalised descriptor against the
// digest the vector pins it with, and each artifact resource's digest against its content. Resources report the
// digest they are pinned by (Resource.Digest).
//
// A Client caches resolved versions (they are immutable), so a steady-state resync costs no registry request; each
// call says with which credentials it reads and whether it bypasses the cache (Read). Every error is an *Error
// whose Reason is fit for a Kubernetes condition; IsPermanent tells a reconciler whether to retry.
//
// The wire format follows OCM's specification (ocm-spec: component descriptor v2, the OCI repository mapping and
// the CTF layout) and the OCM CLI's reader, which the tests check byte for byte where they can.
package ocm
