package vectordeployment

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/signing"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

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

// resolve reads the vector with the credentials and cache bypass of read, and records the outcome in the
// VectorDownloaded condition. A failure of the whole vector is returned, stalling when retrying cannot help.
func (r *Reconciler) resolve(ctx context.Context, vd *konfidencev1.VectorDeployment, read ocm.Read) ([]ResolvedArtifact, error) {
	trust, err := r.trust(ctx, vd)
	if err != nil {
		return nil, failVector(vd, outcome.Retrying(konfidencev1.SignatureInvalidReason,
			fmt.Errorf("reading the keys that verify vector %s: %w", vd.Spec.Vector, err)))
	}
	artifacts, digest, err := r.readVector(ctx, vd.Spec.Vector, trust, read)
	if err != nil {
		return nil, failVector(vd, fmt.Errorf("reading vector %s: %w", vd.Spec.Vector, err))
	}
	if len(artifacts) > r.maxArtifacts {
		// Refused before any ArtifactDeployment is created: its status could outgrow what the API server stores.
		return nil, failVector(vd, outcome.Stallingf(konfidencev1.VectorTooLargeReason, "vector %s has %d artifacts, more than the %d one VectorDeployment deploys",
			vd.Spec.Vector, len(artifacts), r.maxArtifacts))
	}
	// A Stage records it in its history: which content a move deployed.
	vd.Status.VectorDigest = digest
	if msg := repeatedComponents(artifacts); msg != "" {
		return nil, failVector(vd, outcome.Stallingf(konfidencev1.MultipleComponentVersionsReason, "vector %s: %s", vd.Spec.Vector, msg))
	}
	if reason, msg := artifactFailures(artifacts); reason != "" {
		conditions.MarkFalse(vd, konfidencev1.VectorDownloadedCondition, reason, "%s", msg)
	} else {
		conditions.MarkTrue(vd, konfidencev1.VectorDownloadedCondition, meta.SucceededReason,
			"read vector %s and its %d artifacts", vd.Spec.Vector, len(artifacts))
	}
	return artifacts, nil
}

// failVector marks VectorDownloaded with a failure of the whole vector and returns it: its reason and whether it
// stalls are err's (one errors.As, a retried ReconciliationFailed for an error no step classified), its message
// err's whole chain. The generation is observed: the failure is the current spec's.
func failVector(vd *konfidencev1.VectorDeployment, err error) error {
	e := outcome.As(err, meta.ReconciliationFailedReason)
	failed := &outcome.Error{Reason: e.Reason, Stalled: e.Stalled, Err: err}
	conditions.MarkFalse(vd, konfidencev1.VectorDownloadedCondition, failed.Reason, "%s", err)
	vd.Status.ObservedGeneration = vd.Generation
	return failed
}

// repeatedComponents names the components the vector references more than once, or returns "". The status keeps
// one slot (name, collision count, results) per component, so a second version would share the first one's slot:
// one of them would drop out of the status and Ready could come before both are. A vector is a set of artifacts,
// so one version per component is the rule, and a vector breaking it is refused before anything is created.
func repeatedComponents(artifacts []ResolvedArtifact) string {
	refs := map[string][]string{}
	var repeated []string
	for _, a := range artifacts {
		if refs[a.Component] = append(refs[a.Component], a.Ref); len(refs[a.Component]) == 2 {
			repeated = append(repeated, a.Component)
		}
	}
	if len(repeated) == 0 {
		return ""
	}
	msgs := make([]string, len(repeated))
	for i, c := range repeated {
		msgs[i] = fmt.Sprintf("component %s is referenced %d times (%s)", c, len(refs[c]), joinBounded(refs[c], ", "))
	}
	return joinBounded(msgs, "; ") + "; a vector holds one version per component"
}

// readVector reads a vector through the OCM client, verifies it against every trust policy and returns its
// artifacts in reference order and its digest. It is the reconciler's boundary to OCM: the OCM client's errors leave it as
// outcome errors, of the vector as a whole (the error) or of one artifact (its entry's Err), so that the vector's
// other artifacts still deploy. A vector that does not verify against a policy fails as a whole.
func (r *Reconciler) readVector(ctx context.Context, ref string, trust []Trust, read ocm.Read) ([]ResolvedArtifact, string, error) {
	if err := refuseCTF(ref); err != nil {
		return nil, "", err
	}
	v, err := r.OCM.ResolveVector(ctx, ref, read)
	if v == nil {
		return nil, "", fromOCM(err)
	}
	// The vector verified is the one deployed: one read serves every policy and the deployment.
	for _, t := range trust {
		if err := r.verify(ctx, v, t, read); err != nil {
			return nil, "", fmt.Errorf("%s: %w", t.Origin, fromOCM(err))
		}
	}
	return ArtifactsOf(v), v.Digest, nil
}

// refuseCTF refuses a CTF reference: it names a directory on the operator's own file system, and no tenant may
// point the operator there.
func refuseCTF(ref string) error {
	if parsed, err := ocm.ParseRef(ref); err == nil && parsed.IsCTF() {
		return fromOCM(&ocm.Error{Reason: ocm.ReasonReferenceInvalid, Ref: ref,
			Err: errors.New("a VectorDeployment must name an OCI registry, not a CTF directory of the operator's file system")})
	}
	return nil
}

func (r *Reconciler) verify(ctx context.Context, v *ocm.Vector, trust Trust, read ocm.Read) error {
	keys, err := signing.ParseKeys(trust.Keys)
	if err != nil {
		return ocm.KeyError(v.Component+":"+v.Version, fmt.Errorf("trusted keys: %w", err))
	}
	return r.OCM.VerifyVector(ctx, v, ocm.TrustPolicy{Keys: keys, Signatures: trust.Signatures}, read)
}

// fromOCM converts an error of the OCM client into an outcome error with the OCM reason, stalling when the same
// bytes would fail again (ocm.IsPermanent). Other errors pass unchanged.
func fromOCM(err error) error {
	var e *ocm.Error
	switch {
	case !errors.As(err, &e):
		return err
	case ocm.IsPermanent(e):
		return outcome.Stalling(string(e.Reason), err)
	}
	return outcome.Retrying(string(e.Reason), err)
}

// ArtifactsOf turns a vector read by the OCM client into the artifacts the reconciler deploys, in reference order,
// each failure converted as the reconciler reports it.
func ArtifactsOf(v *ocm.Vector) []ResolvedArtifact {
	out := make([]ResolvedArtifact, len(v.Artifacts))
	for i, a := range v.Artifacts {
		out[i] = ResolvedArtifact{Ref: a.Ref, Component: a.Component}
		if a.Err != nil {
			out[i].Err = fromOCM(a.Err)
		}
		if a.Artifact != nil {
			out[i].Artifact = artifactFromOCM(a.Artifact)
		}
	}
	return out
}

// artifactFromOCM copies what an ArtifactDeployment needs; the OCM client's values are shared with its cache.
func artifactFromOCM(a *ocm.Artifact) Artifact {
	out := Artifact{
		Component: a.Component,
		Version:   a.Version,
		Manifest:  konfidencev1.ArtifactManifest{Type: a.Type, AllowReuse: a.AllowReuse},
		Source:    a.Source,
	}
	for _, t := range a.Tasks {
		out.Tasks = append(out.Tasks, konfidencev1.TaskManifest{
			Name: t.Name, Type: t.Type, DependsOn: append([]string(nil), t.DependsOn...), Spec: rawJSON(t.Spec),
		})
	}
	for _, r := range a.Resources {
		out.Resources = append(out.Resources, konfidencev1.Resource{Name: r.Name, Type: r.Type, Content: rawJSON(r.Access), Digest: r.Digest})
	}
	return out
}

func rawJSON(raw []byte) *apiextensionsv1.JSON {
	if len(raw) == 0 {
		return nil
	}
	return &apiextensionsv1.JSON{Raw: append([]byte(nil), raw...)}
}

// FailureReason is the condition reason for a failure of an artifact or a vector: the reason its outcome error
// carries, and a generic one otherwise, since a condition without a reason is rejected by the API server. The CLI's
// previews report artifacts with it, as the VectorDeployment's status would.
func FailureReason(err error) string {
	return outcome.As(err, meta.ReconciliationFailedReason).Reason
}
