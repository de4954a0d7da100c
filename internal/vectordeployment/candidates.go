package vectordeployment

import (
	"context"
	"fmt"
	"slices"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
	"github.com/fluxdeployer/fluxdeployer/internal/stage"
)

// What a Stage asks before it creates a VectorDeployment for a version in its semver range. vd is the
// VectorDeployment the Stage would create (its namespace, spec.vector, spec.secretRef and spec.verify); it need not
// exist. Both read exactly as a reconcile of vd would: through the same OCM client (its allow-list, namespace and
// host limits, timeouts and cache), with the credentials vd may use, so a Stage opens no way to a registry that a
// VectorDeployment of its namespace does not have.

// Versions lists the versions of vd's vector component in its registry; the list is not cached.
func (r *Reconciler) Versions(ctx context.Context, vd *konfidencev1.VectorDeployment) ([]string, error) {
	if err := refuseCTF(vd.Spec.Vector); err != nil {
		return nil, err
	}
	creds, err := r.Credentials.forVectorDeployment(ctx, r.APIReader, vd)
	if err != nil {
		return nil, err
	}
	versions, err := r.OCM.Versions(ctx, vd.Spec.Vector, r.read(vd, creds, ocm.Read{}))
	if err != nil {
		return nil, fromOCM(err)
	}
	return versions, nil
}

// Verify reads vd's vector and verifies it against every trust policy a reconcile of vd applies. required is false,
// and nothing is read, when no policy applies: neither the operator's --require-signatures nor vd's spec.verify. A
// vector that does not verify, or cannot be deployed as read, fails with the reason the VectorDeployment would
// report, stalling (see outcome.Stalls); a registry that did not answer, or keys that cannot be read, are retried.
func (r *Reconciler) Verify(ctx context.Context, vd *konfidencev1.VectorDeployment, fresh stage.Freshness) (required bool, err error) {
	trust, err := r.trust(ctx, vd)
	if err != nil {
		return true, outcome.Retrying(konfidencev1.SignatureInvalidReason, fmt.Errorf("reading the keys that verify vector %s: %w", vd.Spec.Vector, err))
	}
	if len(trust) == 0 {
		return false, nil
	}
	creds, err := r.Credentials.forVectorDeployment(ctx, r.APIReader, vd)
	if err != nil {
		return true, err
	}
	_, _, err = r.readVector(ctx, vd.Spec.Vector, trust, r.read(vd, creds, ocm.Read{BypassCache: fresh == stage.Fresh, Revalidate: fresh == stage.Revalidated}))
	if err != nil && !outcome.Stalls(err) && slices.Contains(verificationFailures, ocm.ReasonOf(err)) {
		// Retried on a VectorDeployment, since keys may be rotated; for a Stage choosing among versions, this
		// version does not verify now and the next older one is tried.
		return true, outcome.Stalling(outcome.As(err, string(ocm.ReasonOf(err))).Reason, err)
	}
	return true, err
}

// verificationFailures are the reasons for which a vector was read and does not verify.
var verificationFailures = []ocm.Reason{ocm.ReasonSignatureMissing, ocm.ReasonSignatureInvalid, ocm.ReasonKeyRejected, ocm.ReasonDigestMismatch}
