package v1alpha1

import "github.com/fluxcd/pkg/apis/meta"

// VectorVerification says which OCM signatures a vector must carry and where the keys that verify them are.
type VectorVerification struct {
	// Signatures names the signatures that must be present and valid. Empty: every signature that has a key in
	// the Secret must verify, and at least one must.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Signatures []string `json:"signatures,omitempty"`

	// SecretRef names a Secret in the VectorDeployment's namespace whose data holds, under each signature name,
	// a PEM public key (RSA) or certificate.
	// +required
	SecretRef meta.LocalObjectReference `json:"secretRef"`
}

// Condition reasons of signature verification and digest pinning (OCM vectors).
const (
	// SignatureMissingReason: verification is required and the vector lacks a required signature, or carries
	// none the trusted keys can check.
	SignatureMissingReason = "SignatureMissing"
	// SignatureInvalidReason: a signature does not verify, or the keys cannot be read.
	SignatureInvalidReason = "SignatureInvalid"
	// KeyRejectedReason: a trusted key, or the key of a signer certificate the vector carries, is not an RSA key of
	// 2048 to 8192 bits. Larger keys cost verification time no reconcile can cancel.
	KeyRejectedReason = "KeyRejected"
	// DigestMismatchReason: content does not match the digest that pins it: an artifact's descriptor against the
	// vector's reference, or a resource's blob or OCI artifact against its digest.
	DigestMismatchReason = "DigestMismatch"
)
