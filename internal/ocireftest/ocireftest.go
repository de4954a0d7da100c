// Package ocireftest holds the OCI image references that internal/ocm and internal/fluxdeployer must judge alike.
// Both read registry hosts, repository paths, tags and digests with oras' grammar (oras.land/oras-go/v2/registry);
// each package's test feeds every case to its own parser (the Flux deployer an image reference, the OCM reader a
// component reference in that registry path with the tag as version), so the two cannot drift apart without a
// test failing. The cases avoid what each package adds on top of the grammar: every case has a tag or a digest
// (the deployer needs one) and a non-empty repository (OCM allows none).
package ocireftest

import "strings"

// Case is one OCI reference, host/repository[:tag][@digest].
type Case struct {
	Host, Repository, Tag, Digest string
	// Valid is the OCI grammar's verdict.
	Valid bool
	// OCMDigestOnly marks a digest that OCM's component-reference grammar accepts and the OCI grammar does not:
	// OCM takes any algorithm with 32 or more hex digits, since it never sends that digest to a registry.
	OCMDigestOnly bool
}

// ImageReference is the case as the Flux deployer reads it: host/repository[:tag][@digest].
func (c Case) ImageReference() string {
	return c.Host + "/" + c.Repository + suffix(":", c.Tag) + suffix("@", c.Digest)
}

// ComponentReference is the case as the OCM reader reads it: the repository is the subPath of the registry, the
// tag the component version. The repository type is named, so OCM neither guesses a CTF directory from the host
// nor takes the "::" of an IPv6 host for its type separator.
func (c Case) ComponentReference(component string) string {
	return "oci::" + c.Host + "/" + c.Repository + "//" + component + suffix(":", c.Tag) + suffix("@", c.Digest)
}

func suffix(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// Cases are the references both parsers are fed.
var Cases = []Case{
	{Host: "ghcr.io", Repository: "org/app", Tag: "v1", Valid: true},
	{Host: "localhost:5000", Repository: "a", Tag: "1", Valid: true},
	{Host: "registry.example.com:5000", Repository: "a/b/c", Tag: "1.0.0_build.1", Valid: true},
	{Host: "[::1]:5000", Repository: "org/app", Tag: "v1", Valid: true},
	{Host: "ghcr.io", Repository: "a__b/c-d/e--f/g.h/i_j", Tag: "latest", Valid: true},
	{Host: "ghcr.io", Repository: "org/app", Tag: "_x-Y.z", Valid: true},
	{Host: "ghcr.io", Repository: "org/app", Tag: "t" + strings.Repeat("a", 127), Valid: true},
	{Host: "ghcr.io", Repository: "org/app", Digest: "sha256:" + hex64, Valid: true},
	{Host: "ghcr.io", Repository: "org/app", Tag: "v1", Digest: "sha256:" + hex64, Valid: true},
	{Host: "ghcr.io", Repository: "org/app", Tag: "v1", Digest: "sha512:" + hex64 + hex64, Valid: true},

	{Host: "ghcr.io:port", Repository: "org/app", Tag: "v1"},
	{Host: "ghcr.io", Repository: "Org/app", Tag: "v1"},
	{Host: "ghcr.io", Repository: "org/app-", Tag: "v1"},
	{Host: "ghcr.io", Repository: "org/-app", Tag: "v1"},
	{Host: "ghcr.io", Repository: "a___b", Tag: "v1"},
	{Host: "ghcr.io", Repository: "a.-b", Tag: "v1"},
	{Host: "ghcr.io", Repository: "org//app", Tag: "v1"},
	{Host: "ghcr.io", Repository: "org/app", Tag: ".v1"},
	{Host: "ghcr.io", Repository: "org/app", Tag: "-v1"},
	{Host: "ghcr.io", Repository: "org/app", Tag: "bad:tag"},
	{Host: "ghcr.io", Repository: "org/app", Tag: "t" + strings.Repeat("a", 128)},
	{Host: "ghcr.io", Repository: "org/app", Tag: "v1", Digest: "sha256"},
	{Host: "ghcr.io", Repository: "org/app", Tag: "v1", Digest: "sha256:abc"},
	{Host: "ghcr.io", Repository: "org/app", Tag: "v1", Digest: "sha256:" + hex64[:63] + "g"},

	{Host: "ghcr.io", Repository: "org/app", Tag: "v1", Digest: "sha256:" + hex64[:32], OCMDigestOnly: true},
	{Host: "ghcr.io", Repository: "org/app", Tag: "v1", Digest: "sha256:" + strings.ToUpper(hex64), OCMDigestOnly: true},
	{Host: "ghcr.io", Repository: "org/app", Tag: "v1", Digest: "md5:" + hex64[:32], OCMDigestOnly: true},
}
