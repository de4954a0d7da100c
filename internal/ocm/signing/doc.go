// Package signing implements OCM component-version signatures as OCM defines them, for verification (and, for
// test fixtures, signing): the normalisations jsonNormalisation/v4alpha1, v3 and v2 (RFC 8785 over the v2
// descriptor after OCM's exclusion rules), SHA-256 digests, and RSASSA-PSS and RSASSA-PKCS1-V1_5 signatures in
// PEM or hex encoding, checked with PEM public keys or certificates. It works on descriptor JSON and knows nothing
// of registries.
//
// The rules and their sources (OCM's Go code and specification) are listed in the README's "Verification" section;
// testdata holds a vector real OCM produced.
package signing
