package vectordeployment

import (
	"context"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// VectorSource reads a vector and the artifacts it references. internal/ocm implements it; the reconciler needs
// nothing of OCM's wire format.
type VectorSource interface {
	// ResolveVector returns the vector's artifacts in reference order. The error is a failure of the vector
	// itself; a failure of one artifact is that entry's Err, so the vector's other artifacts still deploy. A
	// vector must verify against every trust policy given; one it does not verify against is a failure of the
	// whole vector.
	ResolveVector(ctx context.Context, ref string, trust []Trust) ([]ResolvedArtifact, error)
}

// Trust is what a vector must carry to be deployed: signatures that verify with Keys.
type Trust struct {
	// Origin says whose policy it is, the platform's or the VectorDeployment's, in messages.
	Origin string
	// Signatures must be present and valid; empty: every signature with a key must verify, at least one must.
	Signatures []string
	// Keys are PEM public keys or certificates by signature name.
	Keys map[string][]byte
}

// ResolvedArtifact is one artifact reference of a vector, read or failed.
type ResolvedArtifact struct {
	// Ref names the artifact (its component reference) in messages.
	Ref string
	// Component is the referenced component's name, also when the artifact failed.
	Component string
	Artifact  Artifact
	Err       error
}

// Artifact is what an ArtifactDeployment is made of.
type Artifact struct {
	Component string
	Version   string
	Manifest  konfidencev1.ArtifactManifest
	Tasks     []konfidencev1.TaskManifest
	Resources []konfidencev1.Resource
	// Source is what the artifact was read from, exactly (repository and content digest); two artifacts of one
	// identity but different sources are different content under one name.
	Source string
}
