package ocm

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// Reason classifies a failure. The values are CamelCase so a reconciler can use them verbatim as a Kubernetes
// condition reason.
type Reason string

// Reasons reported by this package.
const (
	ReasonReferenceInvalid     Reason = "ReferenceInvalid"
	ReasonNotFound             Reason = "NotFound"
	ReasonUnauthorized         Reason = "Unauthorized"
	ReasonTLS                  Reason = "TLSError"
	ReasonUnavailable          Reason = "RegistryUnavailable"
	ReasonUnsupportedMediaType Reason = "UnsupportedMediaType"
	ReasonDescriptorInvalid    Reason = "DescriptorInvalid"
	ReasonDigestMismatch       Reason = "DigestMismatch"
	ReasonBlobTooLarge         Reason = "BlobTooLarge"
	ReasonManifestMissing      Reason = "ArtifactManifestMissing"
	ReasonManifestDuplicated   Reason = "ArtifactManifestDuplicated"
	ReasonManifestInvalid      Reason = "ArtifactManifestInvalid"
	// ReasonTooManyReferences: a vector references more components than Options.MaxReferences.
	ReasonTooManyReferences Reason = "TooManyReferences"
	// ReasonCredentialsRequireTLS: the registry wants credentials, and the reference asks for plain HTTP to a host
	// the operator does not allow credentials in clear for.
	ReasonCredentialsRequireTLS Reason = "CredentialsRequireTLS"
	// ReasonRegistryNotAllowed: the reference names a registry host outside Options.AllowedHosts.
	ReasonRegistryNotAllowed Reason = "RegistryNotAllowed"
	// ReasonRegistryBusy: the registry's reads in flight stayed at Options.HostConcurrency for Options.HostWait.
	ReasonRegistryBusy Reason = "RegistryBusy"
	// ReasonNamespaceBusy: the reads in flight for the namespace stayed at Options.NamespaceConcurrency for
	// Options.NamespaceWait.
	ReasonNamespaceBusy Reason = "NamespaceBusy"
)

// ReasonDescriptorMismatch is the reason when a descriptor names another component or version than the reference
// it was read through, so the name would denote content published under another one.
const ReasonDescriptorMismatch Reason = "DescriptorMismatch"

// Reasons of signature verification (VerifyVector). Not permanent: a corrected key Secret heals them.
const (
	ReasonSignatureMissing Reason = "SignatureMissing"
	ReasonSignatureInvalid Reason = "SignatureInvalid"
	// ReasonKeyRejected: a trusted key, or the key of a signer certificate, is not an RSA key of 2048 to 8192 bits
	// (signing.ErrKeyRejected).
	ReasonKeyRejected Reason = "KeyRejected"
)

// Error is the only error type this package returns. Match a class with errors.Is against the Err* values, or
// extract it with errors.As to read Reason and Ref.
type Error struct {
	Reason Reason
	// Ref names what failed for a person: a component version and its repository (Ref.Describe), or a component
	// version and element.
	Ref string
	// Err is the underlying cause. It never carries credentials: the HTTP client only ever sees them in headers.
	Err error
}

func (e *Error) Error() string {
	switch {
	case e.Ref == "" && e.Err == nil:
		return string(e.Reason)
	case e.Err == nil:
		return fmt.Sprintf("%s: %s", e.Reason, e.Ref)
	case e.Ref == "":
		return fmt.Sprintf("%s: %v", e.Reason, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", e.Reason, e.Ref, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches any *Error of the same Reason, so errors.Is(err, ErrNotFound) works on wrapped errors.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason == e.Reason
}

// Sentinels for errors.Is, one per Reason.
var (
	ErrReferenceInvalid      = &Error{Reason: ReasonReferenceInvalid}
	ErrNotFound              = &Error{Reason: ReasonNotFound}
	ErrUnauthorized          = &Error{Reason: ReasonUnauthorized}
	ErrTLS                   = &Error{Reason: ReasonTLS}
	ErrUnavailable           = &Error{Reason: ReasonUnavailable}
	ErrUnsupportedMediaType  = &Error{Reason: ReasonUnsupportedMediaType}
	ErrDescriptorInvalid     = &Error{Reason: ReasonDescriptorInvalid}
	ErrDigestMismatch        = &Error{Reason: ReasonDigestMismatch}
	ErrBlobTooLarge          = &Error{Reason: ReasonBlobTooLarge}
	ErrManifestMissing       = &Error{Reason: ReasonManifestMissing}
	ErrManifestDuplicated    = &Error{Reason: ReasonManifestDuplicated}
	ErrManifestInvalid       = &Error{Reason: ReasonManifestInvalid}
	ErrTooManyReferences     = &Error{Reason: ReasonTooManyReferences}
	ErrCredentialsRequireTLS = &Error{Reason: ReasonCredentialsRequireTLS}
	ErrRegistryNotAllowed    = &Error{Reason: ReasonRegistryNotAllowed}
	ErrRegistryBusy          = &Error{Reason: ReasonRegistryBusy}
	ErrNamespaceBusy         = &Error{Reason: ReasonNamespaceBusy}
	ErrDescriptorMismatch    = &Error{Reason: ReasonDescriptorMismatch}
	ErrSignatureMissing      = &Error{Reason: ReasonSignatureMissing}
	ErrSignatureInvalid      = &Error{Reason: ReasonSignatureInvalid}
	ErrKeyRejected           = &Error{Reason: ReasonKeyRejected}
)

// ReasonOf returns the Reason of the first *Error in err's chain, or "" if there is none.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// IsPermanent reports whether retrying cannot help: the reference is malformed, or an immutable component
// version is itself malformed, so the same bytes would fail again. Everything else (network, auth, a version
// not pushed yet, a corrupted transfer) may heal and is worth a retry with backoff.
func IsPermanent(err error) bool {
	switch ReasonOf(err) {
	case ReasonReferenceInvalid, ReasonUnsupportedMediaType, ReasonDescriptorInvalid,
		ReasonManifestMissing, ReasonManifestDuplicated, ReasonManifestInvalid, ReasonTooManyReferences,
		ReasonRegistryNotAllowed, ReasonDescriptorMismatch:
		return true
	}
	return false
}

func newError(reason Reason, ref string, format string, args ...any) *Error {
	return &Error{Reason: reason, Ref: ref, Err: fmt.Errorf(format, args...)}
}

// classify turns an error from the OCI client or the file system into an *Error. Errors that already are one
// pass through, so deeper layers can be more specific; one raised inside the HTTP client, which names no reference,
// gets ref in place of the client's wrapping (the method and URL of the request).
func classify(ref string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		if e.Ref == "" {
			return &Error{Reason: e.Reason, Ref: ref, Err: e.Err}
		}
		return err
	}
	// Unavailable covers what is left: connection failures, timeouts, 5xx.
	reason := ReasonUnavailable
	var (
		resp        *errcode.ErrorResponse
		unknownAuth x509.UnknownAuthorityError
		hostname    x509.HostnameError
		invalid     x509.CertificateInvalidError
		verify      *tls.CertificateVerificationError
		record      tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, auth.ErrBasicCredentialNotFound):
		reason = ReasonUnauthorized
	case errors.Is(err, errdef.ErrNotFound):
		reason = ReasonNotFound
	case errors.Is(err, errdef.ErrSizeExceedsLimit): // oras' own cap on manifests, above ours
		reason = ReasonBlobTooLarge
	case errors.As(err, &resp):
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			reason = ReasonUnauthorized
		case http.StatusNotFound:
			reason = ReasonNotFound
		}
	case errors.As(err, &unknownAuth), errors.As(err, &hostname), errors.As(err, &invalid),
		errors.As(err, &verify), errors.As(err, &record),
		// net/http turns the RecordHeaderError of a plain-HTTP server into this untyped error.
		strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		reason = ReasonTLS
	}
	return &Error{Reason: reason, Ref: ref, Err: err}
}
